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


SYMBOLIC = """
@R.function
def main(x: R.Tensor(("n", 3, 4), "float32"), w: R.Tensor((12, "m"), "float32")):
    f = R.reshape(x, R.shape(["n", 12]))
    y = R.matmul(f, w)
    z = R.reshape(y, R.shape(["n * m"]))
    return z
"""


def test_lowered_source_reads_symbolic_dims_from_the_arguments():
    """A shape with symbolic dims (a batch of any size) is written over the dims the parameters bind,
    so the source runs for every size, as the NumPy executor does."""
    torch = need("torch")
    from retrograd.runtime.torch_source import lower_to_torch

    mod = retrograd.parse(SYMBOLIC)
    src = lower_to_torch(mod, "symbolic")
    assert "dim_n = x.shape[0]" in src and "dim_m = w.shape[1]" in src
    ns: dict = {}
    exec(compile(src, "symbolic_torch", "exec"), ns)  # noqa: S102 - our own generated source
    rng = np.random.default_rng(1)
    for n, m in ((2, 5), (7, 1)):
        x, w = rng.standard_normal((n, 3, 4)).astype("float32"), rng.standard_normal((12, m)).astype("float32")
        got = ns["main"](torch.from_numpy(x), torch.from_numpy(w)).numpy()
        want = retrograd.build(mod)["main"](x, w)
        assert got.shape == want.shape == (n * m,)
        np.testing.assert_allclose(got, want, rtol=1e-5)


EMPTY_CHANNELS = """
@R.function
def main(x: R.Tensor((2, "c", 5, 6), "float32"), w: R.Tensor((4, "c", 3, 3), "float32")):
    y = R.nn.conv2d(x, w)
    z = R.nn.avg_pool2d(y, pool_size=[2, 2])
    return z
"""


def test_lowered_source_computes_empty_arguments_as_numpy():
    """ATen's convolution of no input channels drops the output channels ((2, 0, 3, 4), where the NumPy
    kernel gives zeros of (2, 4, 3, 4)): calls that may see an empty argument go through NumPy there."""
    torch = need("torch")
    from retrograd.runtime.torch_source import lower_to_torch

    mod = retrograd.parse(EMPTY_CHANNELS)
    src = lower_to_torch(mod, "empty")
    ns: dict = {}
    exec(compile(src, "empty_torch", "exec"), ns)  # noqa: S102 - our own generated source
    rng = np.random.default_rng(2)
    for c in (0, 3):
        x, w = rng.standard_normal((2, c, 5, 6)).astype("float32"), rng.standard_normal((4, c, 3, 3)).astype("float32")
        got = ns["main"](torch.from_numpy(x), torch.from_numpy(w)).numpy()
        want = retrograd.build(mod)["main"](x, w)
        assert got.shape == want.shape == (2, 4, 2, 3)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert want.any() == (c > 0)  # no input channels: zeros


def test_lowering_names_a_dim_no_parameter_binds():
    need("torch")
    from retrograd.runtime.torch_source import lower_to_torch

    text = SYMBOLIC.replace("    return z", '    k = R.reshape(z, R.shape(["q", 1]))\n    return k')
    try:
        mod = retrograd.parse(text)
    except retrograd.errors.DiagnosticError:
        pytest.skip("the parser refuses an unbound dim itself")
    with pytest.raises(UnsupportedError, match="'q'"):
        lower_to_torch(mod, "unbound")


def test_compiled_adjoint_of_a_cnn_is_one_graph():
    """The adjoint of a CNN (conv, relu, max and average pooling) through torch.compile: one graph, no
    break (the pooling backward's compiled form), and the NumPy executor's gradients."""
    torch = need("torch")
    from retrograd.passes.gradient import Gradient
    from retrograd.runtime.torch_compiled import compile_available

    if compile_available(torch) is not None:
        pytest.skip(compile_available(torch))
    dynamo_utils = need("torch._dynamo.utils")

    adj = Gradient("main", seeds="ones")(retrograd.parse((CORPUS / "c30_conv_pool.py").read_text()))
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((2, 4, 8, 8)).astype("float32"), rng.standard_normal((6, 2, 3, 3)).astype("float32")]
    want = retrograd.build(adj)["main_adjoint"](*args)
    dynamo_utils.counters.clear()
    ex = retrograd.build(adj, backend="torch", compile=True, numpy_outputs=True)
    got = ex["main_adjoint"](*args)
    assert sum(dynamo_utils.counters["graph_break"].values()) == 0, dict(dynamo_utils.counters["graph_break"])
    assert sum(dynamo_utils.counters["stats"].get(k, 0) for k in ("unique_graphs",)) == 1
    flat = lambda v: [y for x in v for y in flat(x)] if isinstance(v, tuple) else [v]  # noqa: E731
    for g, w in zip(flat(got), flat(want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
