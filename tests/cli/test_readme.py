"""README's commands and Python example stay true."""

import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_exactly_two_setup_commands():
    first_block = re.search(r"```bash\n(.*?)```", README, re.S).group(1).strip().splitlines()
    assert len(first_block) == 2
    assert first_block[0].startswith("pip install -e . && retrograd ")
    assert first_block[1] == 'pip install -e ".[test]" && python -m pytest'


def test_python_example_runs_and_its_gradients_are_right(monkeypatch, capsys):
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # the README's own example, not user input
    from retrograd.testing import check_gradients

    report = check_gradients(scope["mod"], "main", scope["inputs"] + [scope["targets"]])
    assert report.ok, report
    loss, grads = scope["loss"], scope["grads"]
    assert np.isfinite(loss) and len(grads) == 5
