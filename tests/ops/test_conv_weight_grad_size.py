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


# -- every rank, padding far beyond the data -----------------------------------------------------------

# (spatial size, kernel, stride, dilation, leading pad, trailing pad) per axis.
ND_CASES = [
    [(1, 3, 2**40, 1, 2**31, 100000)],  # the forward reads only padding: both gradients are zero
    [(8, 1, 3, 1, 0, 0)],  # the last data column is never read: cut from the data
    [(7, 2, 3, 2, 1, 4)],
    [(6, 2, 10**6, 1, 10**6 - 1, 10**6)],  # three windows: padding, the data's first column, padding
    [(5, 2, 2, 1, 1, 0), (1, 1, 10**9, 1, 0, 10**9)],
    [(4, 2, 3, 1, 0, 2), (3, 1, 2, 1, 0, 0), (2, 2, 1, 1, 1, 1)],
]


def _naive_grads(x, wt, gy, axes):
    """dx and dw of sum(conv(x, wt) * gy), tap by tap with no padded buffer (index arithmetic only)."""
    dx, dw = np.zeros_like(x), np.zeros_like(wt)
    outs = gy.shape[2:]
    for t in np.ndindex(*outs):
        for k in np.ndindex(*wt.shape[2:]):
            pos = [ti * a[2] + ki * a[3] - a[4] for ti, ki, a in zip(t, k, axes)]
            if all(0 <= p < a[0] for p, a in zip(pos, axes)):
                g = gy[(slice(None), slice(None)) + t]  # (N, O)
                xs = x[(slice(None), slice(None)) + tuple(pos)]  # (N, C)
                dw[(slice(None), slice(None)) + k] += g.T @ xs
                dx[(slice(None), slice(None)) + tuple(pos)] += g @ wt[(slice(None), slice(None)) + k]
    return dx, dw


@pytest.mark.parametrize("axes", ND_CASES, ids=str)
def test_gradients_with_far_padding_are_exact_and_kernel_sized(axes):
    n, c, o = 2, 3, 2
    rank = len(axes)
    outs = [(a[0] + a[4] + a[5] - a[3] * (a[1] - 1) - 1) // a[2] + 1 for a in axes]
    shape = lambda *d: ", ".join(str(v) for v in d)  # noqa: E731
    lst = lambda i: "[" + ", ".join(str(a[i]) for a in axes) + "]"  # noqa: E731
    pads = "[" + ", ".join(str(a[4]) for a in axes) + ", " + ", ".join(str(a[5]) for a in axes) + "]"
    mod = retrograd.parse(f"""
@R.function
def main(x: R.Tensor(({shape(n, c, *(a[0] for a in axes))}), dtype="float64"),
         wt: R.Tensor(({shape(o, c, *(a[1] for a in axes))}), dtype="float64"),
         gy: R.Tensor(({shape(n, o, *outs)}), dtype="float64")) -> R.Tensor((), dtype="float64"):
    y = R.nn.conv{rank}d(x, wt, strides={lst(2)}, dilation={lst(3)}, padding={pads})
    z = R.multiply(y, gy)
    loss = R.sum(z)
    return loss
""")
    adj = Gradient("main", require_grads=[0, 1])(mod)["main_adjoint"]
    for blk in adj.body.blocks:
        for b in blk.bindings:
            sinfo = b.var.struct_info
            if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
                # No gradient computes a larger result than it returns: nothing exceeds the inputs' sizes.
                assert np.prod(sinfo.shape) <= max(n * c * np.prod([a[0] for a in axes]),
                                                   o * c * np.prod([a[1] for a in axes]), n * o * np.prod(outs)), b.var
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, c, *(a[0] for a in axes)))
    wt = rng.standard_normal((o, c, *(a[1] for a in axes)))
    gy = rng.standard_normal((n, o, *outs))
    _, (dx, dw) = retrograd.build(retrograd.IRModule({"main_adjoint": adj}))["main_adjoint"](x, wt, gy)
    want_dx, want_dw = _naive_grads(x, wt, gy, axes)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-10, atol=1e-12)
