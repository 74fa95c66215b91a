"""`retrograd run` through a subprocess: --save, --repeat, .npz/.npy inputs, dtypes and --cast, --dim checks."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from cli.helpers import CORPUS, MLP, cli

EXP = '@R.function\ndef main(x: R.Tensor((3, 4), "float32")):\n    y = R.exp(x)\n    return y\n'
NDIM = '@R.function\ndef main(x: R.Tensor(ndim=2, dtype="float32")):\n    y = R.exp(x)\n    return y\n'


def mlp_arrays(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((8, 16)).astype("float32"),
        "w0": (rng.standard_normal((16, 32)) * 0.3).astype("float32"),
        "b0": (rng.standard_normal(32) * 0.1).astype("float32"),
        "w1": (rng.standard_normal((32, 10)) * 0.3).astype("float32"),
        "b1": (rng.standard_normal(10) * 0.1).astype("float32"),
        "targets": rng.integers(0, 10, 8),
    }


def reference(a: dict):
    """float64 loss and d loss / d b1 of examples/mlp.py, written out with NumPy."""
    x, w0, b0, w1, b1 = (a[k].astype("float64") for k in ("x", "w0", "b0", "w1", "b1"))
    logits = np.maximum(x @ w0 + b0, 0) @ w1 + b1
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(a["targets"])
    loss = -np.log(p[np.arange(n), a["targets"]]).mean()
    return loss, ((p - np.eye(10)[a["targets"]]) / n).sum(0)


@pytest.fixture
def adjoint(tmp_path):
    path = tmp_path / "adj.py"
    assert cli("opt", MLP, "-p", "gradient(func=main)", "-o", str(path)).returncode == 0
    return str(path)


def test_save_writes_every_output_named_after_its_position(tmp_path, adjoint):
    arrays = mlp_arrays()
    np.savez(tmp_path / "in.npz", **arrays)
    proc = cli("run", adjoint, "--func", "main_adjoint", "--inputs", str(tmp_path / "in.npz"), "--save", str(tmp_path / "out.npz"))
    assert proc.returncode == 0, proc.err
    with np.load(tmp_path / "out.npz") as out:
        assert sorted(out.files) == ["result_0"] + [f"result_1_{i}" for i in range(5)]
        loss, db1 = reference(arrays)
        np.testing.assert_allclose(out["result_0"], loss, rtol=1e-4)
        np.testing.assert_allclose(out["result_1_4"], db1, rtol=1e-3, atol=1e-6)
        assert [out[f"result_1_{i}"].shape for i in range(5)] == [arrays[k].shape for k in ("x", "w0", "b0", "w1", "b1")]


def test_save_to_stdout_moves_the_report_to_stderr(tmp_path):
    np.savez(tmp_path / "in.npz", **mlp_arrays(1))
    proc = cli("run", MLP, "--inputs", str(tmp_path / "in.npz"), "--save", "-")
    assert proc.returncode == 0 and proc.err.startswith("result: shape=()")
    with np.load(io.BytesIO(proc.stdout)) as out:
        np.testing.assert_allclose(out["result"], reference(mlp_arrays(1))[0], rtol=1e-4)
    bad = cli("run", MLP, "--save", str(tmp_path / "out.txt"))
    assert bad.returncode == 1 and ".npz" in bad.err and not (tmp_path / "out.txt").exists()


def test_repeat_reports_median_and_spread_after_warmup():
    proc = cli("run", MLP, "--repeat", "7", "--warmup", "2")
    assert proc.returncode == 0, proc.err
    line = [ln for ln in proc.out.splitlines() if ln.startswith("time over")][0]
    assert line.startswith("time over 7 run(s) after 2 warm-up(s): ")
    v = {k: float(x) for k, x in re.findall(r"(median|mean|min|max|std) ([0-9.]+) ms", line)}
    assert set(v) == {"median", "mean", "min", "max", "std"}
    assert 0 < v["min"] <= v["median"] <= v["max"] and v["min"] <= v["mean"] <= v["max"] and v["std"] >= 0
    assert v["std"] <= v["max"] - v["min"]
    assert "time over" not in cli("run", MLP).out


def test_npy_input_for_a_single_parameter_function(tmp_path):
    script = tmp_path / "exp.py"
    script.write_text(EXP)
    x = np.linspace(-2, 2, 12, dtype="float32").reshape(3, 4)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(script), "--inputs", str(tmp_path / "x.npy"), "--save", str(tmp_path / "o.npz"))
    assert proc.returncode == 0, proc.err
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["result"], np.exp(x.astype("float64")), rtol=1e-6)
    many = cli("run", MLP, "--inputs", str(tmp_path / "x.npy"))
    assert many.returncode == 1 and "holds one array" in many.err and "6 parameters" in many.err


def test_float64_inputs_are_refused_unless_cast(tmp_path):
    script = tmp_path / "exp.py"
    script.write_text(EXP)
    x = np.linspace(-1, 3, 12).reshape(3, 4)  # float64
    np.save(tmp_path / "x.npy", x)
    refused = cli("run", str(script), "--inputs", str(tmp_path / "x.npy"))
    assert refused.returncode == 1
    assert "input 'x' is float64 but the parameter is float32" in refused.err and "--cast" in refused.err
    cast = cli("run", str(script), "--inputs", str(tmp_path / "x.npy"), "--cast", "--save", str(tmp_path / "o.npz"))
    assert cast.returncode == 0, cast.err
    got = np.load(tmp_path / "o.npz")["result"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.exp(x), rtol=1e-6)


def test_dims_name_symbolic_dims_of_the_parameters():
    c06 = str(CORPUS / "c06_symbolic_strings.py")
    ok = cli("run", c06, "--dim", "n=5")
    assert ok.returncode == 0 and ok.out.startswith("result: shape=(5, 3)")
    typo = cli("run", c06, "--dim", "m=5")
    assert typo.returncode == 1 and "no parameter of 'main' has a dim named 'm'" in typo.err and "its symbolic dims are n" in typo.err
    close = cli("run", c06, "--dim", "nn=5")
    assert close.returncode == 1 and "did you mean 'n'?" in close.err
    none = cli("run", MLP, "--dim", "n=4")
    assert none.returncode == 1 and "it has no symbolic dims" in none.err
    missing = cli("run", c06)
    assert missing.returncode == 1 and "--dim n=SIZE" in missing.err


def test_an_ndim_only_parameter_asks_for_inputs_or_dims_in_plain_words(tmp_path):
    script = tmp_path / "ndim.py"
    script.write_text(NDIM)
    proc = cli("run", str(script))
    assert proc.returncode == 1
    assert "parameter 'x' is a tensor of rank 2 with no shape" in proc.err
    assert "--inputs" in proc.err and "--dim" in proc.err
    assert "StructInfo" not in proc.err and "ndim=" not in proc.err
    np.save(tmp_path / "x.npy", np.zeros((2, 5), "float32"))
    given = cli("run", str(script), "--inputs", str(tmp_path / "x.npy"))
    assert given.returncode == 0 and given.out.startswith("result: shape=(2, 5) dtype=float32 first=[1., 1.,")


def test_unknown_function_suggests_the_close_one():
    proc = cli("run", MLP, "--func", "mian")
    assert proc.returncode == 1 and "no function 'mian'" in proc.err and "did you mean 'main'?" in proc.err
