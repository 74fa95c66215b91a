"""`retrograd train ... --nproc N` and torchrun: data-parallel training from the command line, equal to
the one-process run on the same global batches; worker 0 alone prints and saves."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from optional import need

from distributed.workers import ROOT

from retrograd.cli.app import main
from retrograd.distributed.launch import free_port

MLP = """
@R.function
def main(x: R.Tensor(("n", 5), dtype="float64"), w1: R.Tensor((5, 8), dtype="float64"), b1: R.Tensor((8,), dtype="float64"), w2: R.Tensor((8,), dtype="float64"), y: R.Tensor(("n",), dtype="float64")) -> R.Tensor((), dtype="float64"):
    h = R.tanh(R.add(R.matmul(x, w1), b1))
    r = R.subtract(R.matmul(h, w2), y)
    return R.mean(R.multiply(r, r))
"""


def _files(tmp_path):
    script = tmp_path / "mlp.py"
    script.write_text(MLP)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 5))
    np.savez(tmp_path / "d.npz", x=x, y=np.sin(x).sum(1))
    return ["train", str(script), "--data", str(tmp_path / "d.npz"), "--epochs", "2", "--batch-size", "12",
            "--lr", "0.01", "--optimizer", "adam", "--init", "xavier_uniform"]


def _cli(argv, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "retrograd", *argv], env=env, capture_output=True, text=True,
                          timeout=240, **kw)


def test_nproc_trains_like_one_process(tmp_path, capsys):
    need("torch")
    argv = _files(tmp_path)
    assert main(argv + ["--out", str(tmp_path / "one")]) == 0
    single = capsys.readouterr().out
    run = _cli(argv + ["--out", str(tmp_path / "two"), "--nproc", "2", "--bucket", "100"])
    assert run.returncode == 0, run.stderr
    # worker 0 alone prints the summary; both report the same global losses
    assert run.stdout.count("steps, first loss") == 1, run.stdout
    got = re.search(r"16 steps, first loss (\S+), last loss (\S+)", run.stdout).groups()
    want = re.search(r"16 steps, first loss (\S+), last loss (\S+)", single).groups()
    np.testing.assert_allclose([float(v) for v in got], [float(v) for v in want], rtol=1e-9)
    with np.load(tmp_path / "one" / "params.npz") as a, np.load(tmp_path / "two" / "params.npz") as b:
        assert sorted(a.files) == sorted(b.files) == ["b1", "w1", "w2"]
        for k in a.files:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-10, atol=1e-12)


def test_torchrun_digits_rank0_alone_writes(tmp_path):
    need("torch")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "retrograd", "train",
                          "digits", "--seed", "0", "--epochs", "1", "--limit", "128", "--out", str(tmp_path)],
                         env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("test accuracy") == 1
    assert (tmp_path / "digits_params.npz").exists()


def test_nproc_errors(tmp_path, capsys):
    argv = _files(tmp_path)
    assert main(argv + ["--nproc", "0"]) == 1
    assert "--nproc must be at least 1" in capsys.readouterr().err
