"""Tests aimed at mutants an audit found surviving: tie-breaking of maximum/minimum gradients, the
ceil_mode window count (derived by listing window starts), printing of rank-0 shapes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import retrograd
from retrograd.ops.kernels import pool
from retrograd.ops.kernels.window import window_positions
from retrograd.passes import Gradient
from optional import need  # noqa: E402

TIES = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6,), "float64"), y: R.Tensor((6,), "float64"), c: R.Tensor((6,), "float64")) -> R.Tensor((), "float64"):
        m = R.OP(x, y)
        s = R.sum(R.multiply(m, c))
        return s
"""


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_ties_route_the_whole_gradient_to_the_first_argument(op):
    # TVM's rule: x1 wins ties (x1 >= x2 for maximum, x1 <= x2 for minimum).
    x = np.array([1.0, 2.0, 3.0, -1.0, 0.0, 5.0])
    y = np.array([1.0, 3.0, 2.0, -1.0, 0.0, 4.0])  # ties at 0, 3 and 4
    c = np.arange(1.0, 7.0)
    mod = Gradient("main")(retrograd.parse(TIES.replace("OP", op)))
    _, (gx, gy, _) = retrograd.build(mod)["main_adjoint"](x, y, c)
    first = [(a >= b) if op == "maximum" else (a <= b) for a, b in zip(x, y)]
    np.testing.assert_array_equal(gx, [ci if f else 0.0 for ci, f in zip(c, first)])
    np.testing.assert_array_equal(gy, [0.0 if f else ci for ci, f in zip(c, first)])


def _count_by_listing(size, k, s, p0, p1, d, ceil_mode):
    """Windows counted one by one over the padded input: start j * s is kept when the window fits
    (floor mode), or when it still covers an element left over and starts inside the input or its
    leading padding (ceil mode, PyTorch's rule)."""
    extent = d * (k - 1) + 1
    padded = size + p0 + p1
    count = 0
    for j in range(padded + 1):
        start = j * s
        fits = start + extent <= padded
        if ceil_mode:
            leftover = start < padded - extent + s  # not every element it would cover is already covered
            keep = (fits or leftover) and start < size + p0
        else:
            keep = fits
        count += keep
    return count


def test_window_count_matches_listing_window_starts():
    for size, k, s, p, d, ceil_mode in itertools.product(range(1, 9), (1, 2, 3), (1, 2, 3), (0, 1, 2), (1, 2), (False, True)):
        if p > k // 2 or d * (k - 1) + 1 > size + 2 * p:
            continue
        expected = _count_by_listing(size, k, s, p, p, d, ceil_mode)
        assert window_positions(size, k, s, p, p, d, ceil_mode) == expected, (size, k, s, p, d, ceil_mode)


def test_max_pool_ceil_mode_shape_matches_torch_where_the_last_window_starts_in_the_padding():
    # size 5, kernel 2, stride 2, padding 1: the ceil-mode window at 6 == size + p0 starts past the leading padding.
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 5))
    out = pool.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), padding=(1, 1, 1, 1), ceil_mode=True)
    assert out.shape[2:] == (_count_by_listing(5, 2, 2, 1, 1, 1, True),) * 2 == (3, 3)
    torch = need("torch")
    ref = torch.nn.functional.max_pool2d(torch.tensor(x), 2, 2, padding=1, ceil_mode=True)
    np.testing.assert_array_equal(out, ref.numpy())


def test_rank_zero_shapes_and_tensors_print_and_read_back():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=0), s: R.Shape(ndim=0)) -> R.Tensor(dtype="float32", ndim=0):
        return x
"""
    mod = retrograd.parse(text)
    printed = mod.script()
    assert "R.Shape(ndim=0)" in printed or "R.Shape([])" in printed
    assert 'R.Tensor((), dtype="float32")' in printed
    again = retrograd.parse(printed)
    retrograd.assert_structural_equal(again, mod)
    assert again["main"].params[1].struct_info.ndim == 0
