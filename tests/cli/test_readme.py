"""README's commands and Python example stay true."""

import os
import re
import shutil
import subprocess
import sys
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


def console_commands(text: str) -> list[tuple[str, str]]:
    """(command, the output shown under it) for every `$ ` line of every ```console block."""
    out = []
    for block in re.findall(r"```console\n(.*?)```", text, re.S):
        for chunk in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, shown = chunk.partition("\n")
            out.append((command, shown))
    return out


_FLOAT = re.compile(r"\d+\.\d+")
# A printed value's last digits depend on the BLAS kernel this CPU runs (OPENBLAS_CORETYPE set or not).
_NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


def same_output(got: list[str], shown: list[str]) -> bool:
    """Line by line equal, numbers with a decimal point equal to 1e-5 relative (1e-6 absolute)."""
    if len(got) != len(shown):
        return False
    for a, b in zip(got, shown):
        if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
            return False
        x, y = (np.array([float(v) for v in _NUMBER.findall(line)]) for line in (a, b))
        if not np.allclose(x, y, rtol=1e-5, atol=1e-6):
            return False
    return True


def comparable(command: str, output: str) -> list[str]:
    """The output's lines; for --profile, the table's rows without their times, in name order."""
    lines = output.rstrip("\n").splitlines()
    if "--profile" not in command:
        return lines
    start = next(i for i, line in enumerate(lines) if line.startswith("op "))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("total "))
    rows = sorted(" ".join(_FLOAT.sub("#", line).split()) for line in lines[start + 1 : end])
    return lines[:start] + [lines[start]] + rows + [" ".join(_FLOAT.sub("#", lines[end]).split())] + lines[end + 1 :]


def test_readme_tour_shows_the_real_output(tmp_path):
    commands = console_commands(README)
    shown = " ".join(c for c, _ in commands)
    for needed in ("retrograd check", "--print-changed", "--profile", "retrograd lower", "retrograd dot"):
        assert needed in shown
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for command, expected in commands:
        # The README's own commands, run with this checkout's package.
        line = re.sub(r"(?<![\w./-])retrograd(?= )", f"{sys.executable} -m retrograd", command)
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout
        got, shown = comparable(command, proc.stdout), comparable(command, expected)
        assert same_output(got, shown), (command, got, shown)


def test_readme_shows_the_lowered_adjoint_of_the_mlp():
    lowered = [shown for command, shown in console_commands(README) if command.startswith("retrograd lower")]
    assert lowered and "\ndef main_adjoint(x, w0, b0, w1, b1, targets):\n" in lowered[0]
    assert "grad_nll_loss_backward(" in lowered[0]
