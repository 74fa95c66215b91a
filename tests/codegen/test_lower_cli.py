"""`retrograd lower`, `retrograd --version` and `python -m retrograd`, run as a user runs them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import retrograd
from codegen.helpers import assert_same, load_source

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.py"


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "retrograd", *args], capture_output=True, text=True,
                          input=stdin, check=False, cwd=ROOT)


def test_version_is_the_packages():
    declared = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    done = run("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"retrograd {declared}"


def test_lower_to_a_file_runs_like_the_executor(tmp_path):
    out = tmp_path / "mlp_lowered.py"
    done = run("lower", str(MLP), "-o", str(out))
    assert done.returncode == 0, done.stderr
    module = load_source(out.read_text(), tmp_path, "mlp_cli")
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in [(8, 16), (16, 32), (32,), (32, 10), (10,)]]
    args.append(rng.integers(0, 10, 8))
    want = retrograd.build(retrograd.parse_file(MLP))["main"](*args)
    assert_same(module.main(*args), want)
    # An independent reference: the MLP written out in NumPy, in float64.
    x, w0, b0, w1, b1, t = (a.astype("float64") if a.dtype.kind == "f" else a for a in args)
    logits = np.maximum(x @ w0 + b0, 0) @ w1 + b1
    logp = logits - logits.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    assert np.isclose(float(want), -logp[np.arange(8), t].mean(), rtol=1e-5)


def test_lower_reads_stdin_and_writes_stdout():
    done = run("lower", "-", stdin=MLP.read_text())
    assert done.returncode == 0, done.stderr
    assert "def main(x, w0, b0, w1, b1, targets):" in done.stdout
    compile(done.stdout, "<lowered>", "exec")


def test_lower_of_a_bad_file_is_a_located_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.nosuchop(x)\n    return y\n')
    done = run("lower", str(bad))
    assert done.returncode == 1
    assert f"{bad}:3" in done.stderr and "Traceback" not in done.stderr


def test_lower_usage_error_exits_2():
    done = run("lower")
    assert done.returncode == 2 and "usage" in done.stderr


def test_dot_reads_stdin_and_names_the_function():
    done = run("dot", "-", "--func", "main", stdin=MLP.read_text())
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("digraph module {") and 'label="main";' in done.stdout


def test_dot_errors(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.add(x, z)\n    return y\n')
    done = run("dot", str(bad))
    assert done.returncode == 1 and f"{bad}:3" in done.stderr and "Traceback" not in done.stderr
    done = run("dot", str(MLP), "--svg", "--png")
    assert done.returncode == 2 and "not allowed with" in done.stderr
    done = run("dot", str(tmp_path / "missing.py"))
    assert done.returncode == 1 and "no such file" in done.stderr
