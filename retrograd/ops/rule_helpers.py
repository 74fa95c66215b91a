"""Helpers the gradient rules of every op family share: constants in a value's dtype, static or symbolic shapes."""

from __future__ import annotations

from retrograd.errors import GradientError
from retrograd.ir.expr import Expr, const, shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R


def scalar(value, like: Expr) -> Expr:
    """A 0-d constant with the dtype of `like` (rules must not mix dtypes: TVM's binary ops refuse)."""
    return const(value, like.struct_info.dtype)


def shape_of(expr: Expr, call=None) -> Expr:
    """The (static or symbolic) shape of a tensor expression, for broadcast_to / reshape / zeros; a
    tensor of known rank and unknown extents gives R.shape_of(expr), computed at run time."""
    s = expr.struct_info
    if isinstance(s, TensorStructInfo) and s.shape is None and s.ndim >= 0:
        return R.shape_of(expr)  # extents known only at run time (an imported data-dependent shape)
    if not isinstance(s, TensorStructInfo) or s.shape is None:
        span = getattr(call, "span", None)
        raise GradientError(f"the gradient needs the shape of a tensor whose shape is unknown ({s})", span)
    return shape_expr(s.shape)
