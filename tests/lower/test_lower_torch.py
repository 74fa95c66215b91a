"""`retrograd lower --backend torch`: the module as standalone PyTorch source with the plan's frees, run and
compared with the NumPy executor; `build(..., compile=True)` through torch.compile (or a clear error)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.errors import UnsupportedError

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
ROOT = Path(__file__).resolve().parents[2]


def _mlp_args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((8, 16)).astype("float32"),
            rng.standard_normal(16).astype("float32"), rng.standard_normal((16, 3)).astype("float32"),
            rng.standard_normal(3).astype("float32"), np.array([0, 2, 1, 0])]


def test_lowered_torch_source_runs_and_frees(tmp_path):
    torch = need("torch")
    from retrograd.runtime.torch_source import lower_to_torch

    mod = retrograd.parse((CORPUS / "c01_mlp.py").read_text())
    src = lower_to_torch(mod, "c01")
    # The plan's frees, as statements: every intermediate is deleted right after its last use.
    assert "del lv_1" in src and "del logits" in src and src.count("del ") >= 6
    ns: dict = {}
    exec(compile(src, "c01_torch", "exec"), ns)  # noqa: S102 - our own generated source
    args = _mlp_args()
    got = ns["main"](*[torch.from_numpy(a) for a in args])
    want = retrograd.build(mod)["main"](*args)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_lower_cli_backend_torch(tmp_path):
    need("torch")
    out = tmp_path / "m.py"
    res = subprocess.run([sys.executable, "-m", "retrograd", "lower", str(CORPUS / "c25_recursion.py"), "--backend", "torch",
                          "-o", str(out)], capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert res.returncode == 0, res.stderr
    text = out.read_text()
    assert "import torch" in text and "def main(c, x):" in text and "if c:" in text


def test_compile_runs_or_says_why():
    torch = need("torch")
    from retrograd.runtime.torch_compiled import compile_available

    mod = retrograd.parse((CORPUS / "c01_mlp.py").read_text())
    why = compile_available(torch)
    if why is not None:
        with pytest.raises(UnsupportedError, match="compile=True"):
            retrograd.build(mod, backend="torch", compile=True)
        return
    ex = retrograd.build(mod, backend="torch", compile=True)
    args = _mlp_args()
    np.testing.assert_allclose(float(ex["main"](*args)), retrograd.build(mod)["main"](*args), rtol=1e-6)
