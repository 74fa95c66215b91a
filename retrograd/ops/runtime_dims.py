"""Sizes known only at run time, as tensors: gradient rules on symbolic dims compute them from a value."""

from __future__ import annotations

from retrograd.ir.expr import Expr, const
from retrograd.ops.api import R


def axis_ones(x: Expr, axis: int) -> Expr:
    """A 1-D int64 tensor of ones, as long as `x` along `axis` (whatever that length is at run time)."""
    others = [a for a in range(x.struct_info.ndim) if a != axis]
    line = R.sum(R.zeros_like(x), axis=others) if others else R.zeros_like(x)
    return R.ones_like(line, dtype="int64")


def axis_positions(x: Expr, axis: int) -> Expr:
    """0, 1, ..., n - 1 (int64) for the n elements of `x` along `axis`."""
    return R.subtract(R.cumsum(axis_ones(x, axis), axis=0), const(1, "int64"))


def axis_length(x: Expr, axis: int) -> Expr:
    """The length of `x` along `axis` as a 0-d int64 tensor."""
    return R.sum(axis_ones(x, axis))
