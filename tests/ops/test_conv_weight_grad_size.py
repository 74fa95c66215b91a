"""conv2d's weight gradient computes exactly the kernel's size (no larger result cropped afterwards), with
PyTorch's gradients, where the strides leave input rows and columns the forward never reads."""

from __future__ import annotations

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.ir.expr import Call
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.passes import Gradient

# (input H, W, kernel, stride, padding): each leaves rows or columns unread at the bottom/right.
CASES = [
    (8, 8, 1, 2, 0),  # ResNet's 1x1 stride-2 downsample: the last row and column are never read
    (9, 8, 3, 2, 0),
    (7, 10, 3, 3, 1),
    (8, 9, 2, 3, 0),
]


def _module(h, w, k, s, p):
    n, c, o = 2, 3, 4
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return retrograd.parse(f"""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({n}, {c}, {h}, {w}), dtype="float64"), wt: R.Tensor(({o}, {c}, {k}, {k}), dtype="float64"),
             gy: R.Tensor(({n}, {o}, {oh}, {ow}), dtype="float64")) -> R.Tensor((), dtype="float64"):
        with R.dataflow():
            y = R.nn.conv2d(x, wt, strides=[{s}, {s}], padding=[{p}, {p}, {p}, {p}])
            z = R.multiply(y, gy)
            loss = R.sum(z)
            R.output(loss)
        return loss
""")


@pytest.mark.parametrize("case", CASES)
def test_weight_gradient_is_computed_at_the_kernel_size(case):
    h, w, k, s, p = case
    adj = Gradient("main", require_grads=[0, 1])(_module(*case))["main_adjoint"]
    convs = [b for blk in adj.body.blocks for b in blk.bindings
             if isinstance(b.value, Call) and getattr(b.value.op, "name", "") == "relax.nn.conv2d"]
    assert len(convs) == 2  # the forward and the weight gradient's
    for b in convs:
        sinfo = b.var.struct_info
        assert isinstance(sinfo, TensorStructInfo)
        # The weight gradient's conv is laid out CNHW: its spatial dims are the kernel's.
        if b is convs[1]:
            assert tuple(sinfo.shape[2:]) == (k, k), (case, sinfo.shape)


@pytest.mark.parametrize("case", CASES)
def test_weight_and_data_gradients_match_torch(case):
    torch = need("torch")
    h, w, k, s, p = case
    mod = Gradient("main", require_grads=[0, 1])(_module(*case))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, h, w))
    wt = rng.standard_normal((4, 3, k, k))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    gy = rng.standard_normal((2, 4, oh, ow))
    loss, (dx, dw) = retrograd.build(mod)["main_adjoint"](x, wt, gy)
    xt, wtt = torch.tensor(x, requires_grad=True), torch.tensor(wt, requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wtt, stride=s, padding=p)
    (y * torch.tensor(gy)).sum().backward()
    np.testing.assert_allclose(np.asarray(loss), (y * torch.tensor(gy)).sum().item(), rtol=1e-10)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, wtt.grad.numpy(), rtol=1e-10, atol=1e-12)
