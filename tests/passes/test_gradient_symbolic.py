"""Gradients of functions whose shapes are not all known: full reductions of unknown shapes and ranks, slices,
concatenations, the next-token loss and conv2d on symbolic dims, against float64 finite differences (and
PyTorch when installed)."""

from __future__ import annotations

import numpy as np
import pytest
from passes.helpers import TVM_IMPORTS

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient
from retrograd.runtime import build
from retrograd.testing import check_gradients
from optional import need  # noqa: E402

UNKNOWN_SHAPE = TVM_IMPORTS + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float64", ndim=2), y: R.Tensor(dtype="float64")) -> R.Tensor((), "float64"):
        a = R.sum(R.multiply(x, x))
        b = R.mean(y)
        c = R.add(a, b)
        return c
"""


def test_full_reductions_of_unknown_shapes_are_scalars_and_differentiable():
    from retrograd.ir.struct_info import TensorStructInfo

    assert TensorStructInfo(None, "float32", 0).shape == ()
    mod = retrograd.parse(UNKNOWN_SHAPE)
    assert mod["main"].body.body.struct_info.shape == ()
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((4,))
    _, (gx, gy) = build(Gradient("main")(mod))["main_adjoint"](x, y)
    np.testing.assert_allclose(gx, 2 * x, rtol=1e-12)
    np.testing.assert_allclose(gy, np.full(4, 0.25), rtol=1e-12)
    assert check_gradients(mod, "main", [x, y]).ok
    assert retrograd.structural_equal(retrograd.parse(mod.script()), mod)


def test_tvm_reads_the_unknown_shape_reduction_module():
    need("tvm")
    from_source = need("tvm.script").from_source

    tvm_mod = from_source(UNKNOWN_SHAPE[len(TVM_IMPORTS):])
    assert "main" in [gv.name_hint for gv in tvm_mod.get_global_vars()]


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "variance", "prod"])
def test_full_reduction_gradients_of_unknown_rank_tensors(op):
    text = TVM_IMPORTS + f"""
@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor(dtype="float64")) -> R.Tensor((), "float64"):
        b = R.{op}(y)
        return b
"""
    mod = retrograd.parse(text)
    y = np.random.default_rng(2).standard_normal((3, 4))
    report = check_gradients(mod, "main", [y])
    assert report.ok and report.checked == 12, str(report)


SYMBOLIC = {
    # the next-token language-model loss: lp[:-1] against tokens[1:], sequence length n symbolic
    "next_token": ("""
    @R.function
    def main(lp: R.Tensor(("n", 5), "float64"), y: R.Tensor(("n", 5), "float64")) -> R.Tensor((), "float64"):
        a = R.strided_slice(lp, axes=[0], begin=[0], end=[-1])
        b = R.strided_slice(y, axes=[0], begin=[1], end=[100])
        s = R.nn.cross_entropy_with_logits(a, b)
        return s
""", [(7, 5), (7, 5)]),
    "slice_two_axes_strided": ("""
    @R.function
    def main(x: R.Tensor(("n", "m"), "float64")) -> R.Tensor((), "float64"):
        a = R.strided_slice(x, axes=[0, 1], begin=[5, 1], end=[0, -1], strides=[-2, 2])
        s = R.sum(R.tanh(a))
        return s
""", [(8, 7)]),
    "concat": ("""
    @R.function
    def main(x: R.Tensor(("n", 3), "float64"), y: R.Tensor(("m", 3), "float64"), z: R.Tensor((2, 3), "float64")) -> R.Tensor((), "float64"):
        a = R.concat((x, y, z), axis=0)
        w = R.sin(a)
        s = R.sum(R.multiply(w, a))
        return s
""", [(4, 3), (2, 3), (2, 3)]),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC))
def test_gradients_on_symbolic_dims_are_computed_at_run_time(name):
    body, shapes = SYMBOLIC[name]
    mod = retrograd.parse(TVM_IMPORTS + "@I.ir_module\nclass Module:\n" + body)
    assert well_formed(Gradient("main")(mod)) == []
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s) for s in shapes]
    report = check_gradients(mod, "main", args)
    assert report.ok and report.checked == sum(int(np.prod(s)) for s in shapes), str(report)


def test_next_token_loss_on_symbolic_length_matches_pytorch():
    torch = need("torch")
    body, shapes = SYMBOLIC["next_token"]
    mod = retrograd.parse(TVM_IMPORTS + "@I.ir_module\nclass Module:\n" + body)
    rng = np.random.default_rng(6)
    lp, y = (rng.standard_normal(s) for s in shapes)
    _, (glp, gy) = build(Gradient("main")(mod))["main_adjoint"](lp, y)
    tlp, ty = torch.tensor(lp, requires_grad=True), torch.tensor(y, requires_grad=True)
    (-(tlp[:-1] * ty[1:]).sum() / (lp.shape[0] - 1)).backward()  # TVM's cross_entropy_with_logits
    np.testing.assert_allclose(glp, tlp.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy, ty.grad.numpy(), rtol=1e-12)


CONV = TVM_IMPORTS + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2, "h", "w"), "float64"), k: R.Tensor((3, 2, 3, 2), "float64")) -> R.Tensor((), "float64"):
        a = R.nn.conv2d(x, k, strides=[2, 3], padding=[1, 0, 1, 1], dilation=[1, 2])
        s = R.sum(R.tanh(a))
        return s
"""


@pytest.mark.parametrize("hw", [(7, 9), (8, 10), (5, 6)])
def test_conv2d_gradient_on_symbolic_spatial_dims(hw):
    mod = retrograd.parse(CONV)
    assert well_formed(Gradient("main")(mod)) == []
    rng = np.random.default_rng(8)
    x, k = rng.standard_normal((2, 2) + hw), rng.standard_normal((3, 2, 3, 2))
    report = check_gradients(mod, "main", [x, k])
    assert report.ok and report.checked == x.size + k.size, str(report)
    torch = need("torch")
    _, (gx, gk) = build(Gradient("main")(mod))["main_adjoint"](x, k)
    tx, tk = torch.tensor(x, requires_grad=True), torch.tensor(k, requires_grad=True)
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(tx, (0, 1, 1, 1)), tk, stride=(2, 3), dilation=(1, 2))
    torch.tanh(y).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gk, tk.grad.numpy(), rtol=1e-10, atol=1e-12)
