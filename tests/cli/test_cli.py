"""The `retrograd` command: check, opt pipelines with instruments, run, and located errors."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import retrograd
from retrograd.cli import main

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "examples" / "mlp.py")


def test_check_reports_counts(capsys):
    assert main(["check", MLP]) == 0
    out = capsys.readouterr().out
    assert "ok (1 function(s), 7 binding(s))" in out


def test_opt_gradient_prints_a_module_that_parses_and_computes_gradients(capsys):
    assert main(["opt", MLP, "-p", "gradient(func=main), dce"]) == 0
    text = capsys.readouterr().out
    mod = retrograd.parse(text)
    assert "main_adjoint" in mod
    # Compare the printed adjoint's gradient with finite differences of the original function.
    from retrograd.testing import check_gradients

    rng = np.random.default_rng(0)
    inputs = [
        rng.standard_normal((8, 16)),
        rng.standard_normal((16, 32)) * 0.3,
        rng.standard_normal(32) * 0.1,
        rng.standard_normal((32, 10)) * 0.3,
        rng.standard_normal(10) * 0.1,
        rng.integers(0, 10, 8),
    ]
    inputs = [a.astype("float32") if a.dtype.kind == "f" else a.astype("int64") for a in inputs]
    report = check_gradients(mod, "main", inputs)
    assert report.ok, report


def test_opt_instruments_write_to_stderr(capsys, tmp_path):
    out_file = tmp_path / "out.py"
    rc = main(["opt", MLP, "-p", "gradient(func=main), cse, dce", "--time-passes", "--print-changed", "-o", str(out_file)])
    assert rc == 0
    err = capsys.readouterr().err
    assert "--- before gradient" in err and "+    def main_adjoint(" in err
    timing = [line.split() for line in err.splitlines() if line.split()[:1] in (["gradient"], ["cse"], ["total"])]
    # Rows are the passes that ran, slowest first (the order depends on the machine's load), then the total.
    assert sorted(row[0] for row in timing[:-1]) == ["cse", "gradient"] and timing[-1][0] == "total"
    seconds = [float(row[2]) for row in timing[:-1]]
    assert seconds == sorted(seconds, reverse=True)
    assert retrograd.structural_equal(retrograd.parse_file(out_file), retrograd.parse(out_file.read_text()))


def test_run_prints_result_and_memory(capsys):
    assert main(["run", MLP, "--profile"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("result: shape=() dtype=float32")
    assert "peak live bytes:" in out and "R.matmul" in out


def test_syntax_error_is_located_and_exit_code_is_1(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('@R.function\ndef main(x: R.Tensor((3,), "float32")):\n    y = R.foo(x)\n    return y\n')
    assert main(["check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3:9:" in err and "unknown op R.foo" in err and "^^^^^" in err
    assert "Traceback" not in err


def test_bad_pipeline_and_missing_function_and_file(capsys):
    assert main(["opt", MLP, "-p", "gradient(func=mian)"]) == 1
    assert "no function named 'mian'" in capsys.readouterr().err
    assert main(["opt", MLP, "-p", "gradient(func=main), dcee"]) == 1
    assert "dcee" in capsys.readouterr().err
    assert main(["check", "/nonexistent/file.py"]) == 1
    assert "no such file" in capsys.readouterr().err


def test_passes_lists_the_registry(capsys):
    assert main(["passes"]) == 0
    names = capsys.readouterr().out.split()
    for name in ("gradient", "dce", "cse", "fold-constant", "simplify"):
        assert name in names


@pytest.mark.skipif(shutil.which("retrograd") is None, reason="console script not installed")
def test_console_script_runs_the_readme_main_job():
    proc = subprocess.run(
        ["retrograd", "opt", MLP, "-p", "gradient(func=main)"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "def main_adjoint(" in proc.stdout


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "retrograd.cli", "check", MLP], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "ok" in proc.stdout


def test_run_with_inputs_from_npz_matches_numpy(capsys, tmp_path):
    rng = np.random.default_rng(1)
    arrays = {
        "x": rng.standard_normal((8, 16)).astype("float32"),
        "w0": rng.standard_normal((16, 32)).astype("float32"),
        "b0": rng.standard_normal(32).astype("float32"),
        "w1": rng.standard_normal((32, 10)).astype("float32"),
        "b1": rng.standard_normal(10).astype("float32"),
        "targets": rng.integers(0, 10, 8),
    }
    path = tmp_path / "inputs.npz"
    np.savez(path, **arrays)
    assert main(["run", MLP, "--inputs", str(path)]) == 0
    out = capsys.readouterr().out
    h = np.maximum(arrays["x"] @ arrays["w0"] + arrays["b0"], 0)
    logits = (h @ arrays["w1"] + arrays["b1"]).astype("float64")
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    want = -logp[np.arange(8), arrays["targets"]].mean()
    got = float(out.split("first=[")[1].split("]")[0])
    assert abs(got - want) < 1e-4 * max(1.0, abs(want))
    np.savez(path, nope=np.zeros(3))
    assert main(["run", MLP, "--inputs", str(path)]) == 1
    assert "no parameter named nope" in capsys.readouterr().err
