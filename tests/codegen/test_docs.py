"""The builder example of the README and the examples of docs/tools.md run and stay true."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import retrograd

ROOT = Path(__file__).resolve().parents[2]


def block_after(text: str, heading: str, lang: str) -> str:
    start = text.index(heading)
    return re.search(rf"```{lang}\n(.*?)```", text[start:], re.S).group(1)


def test_readme_builder_example_runs_and_computes_relu_matmul_sum(monkeypatch, capsys):
    code = block_after((ROOT / "README.md").read_text(), "## Building IR in Python", "python")
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # the README's own example
    out = capsys.readouterr().out
    xv, wv = scope["xv"], scope["wv"]
    want = np.maximum(xv.astype("float64") @ wv, 0).sum()
    assert out.rstrip().splitlines()[-1] == str(np.float32(want))
    assert "def main(x, w):" in out and "@R.function" in out


def test_tools_doc_python_example_runs(monkeypatch, capsys):
    code = block_after((ROOT / "docs" / "tools.md").read_text(), "## `show` and `script`", "python")
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/tools.md", "exec"), {})
    assert "def main_adjoint(" in capsys.readouterr().out


def test_tools_doc_shows_the_real_lowering_of_the_mlp(monkeypatch):
    shown = block_after((ROOT / "docs" / "tools.md").read_text(), "`retrograd lower examples/mlp.py` prints", "python")
    monkeypatch.chdir(ROOT)
    assert shown == retrograd.lower_to_python(retrograd.parse_file("examples/mlp.py"), "examples/mlp.py")
