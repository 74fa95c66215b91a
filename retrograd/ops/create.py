"""Tensor creation: zeros, ones, full from a shape; zeros_like, ones_like, full_like from a tensor."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.struct_info import ShapeStructInfo, TensorStructInfo
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_dtype, to_opt_dtype
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.registry import Arg, Attr, InferCtx, no_gradient, register


def shape_arg(ctx: InferCtx, i: int, allow_minus_one: bool = False) -> ShapeStructInfo:
    """The struct info of a shape argument, with its static values checked (no negative sizes)."""
    s = ctx.sinfo[i]
    if not isinstance(s, ShapeStructInfo):
        raise ctx.error(f"expected a shape such as R.shape([2, 3]), got {type(s).__name__}", i)
    for d in s.values or ():
        if isinstance(d, int) and d < 0 and not (allow_minus_one and d == -1):
            raise ctx.error(f"negative dimension {d} in shape {list(s.values)}", i)
    return s


def _from_shape(s: ShapeStructInfo, dtype: str) -> TensorStructInfo:
    return TensorStructInfo(s.values, dtype, s.ndim)


def _fill_value(ctx: InferCtx, i: int) -> TensorStructInfo:
    v = ctx.tensor(i)
    if v.ndim not in (0, -1):
        raise ctx.error(f"fill_value must be a scalar (0-d) tensor, got ndim {v.ndim}", i)
    return v


def _infer_const_shape(ctx: InferCtx) -> TensorStructInfo:
    return _from_shape(shape_arg(ctx, 0), ctx.attrs["dtype"])


def _infer_full(ctx: InferCtx) -> TensorStructInfo:
    s, v = shape_arg(ctx, 0), _fill_value(ctx, 1)
    return _from_shape(s, ctx.attrs["dtype"] or v.dtype)


def _infer_like(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    if len(ctx.sinfo) > 1:
        _fill_value(ctx, 1)
    return TensorStructInfo(x.shape, ctx.attrs["dtype"] or x.dtype, x.ndim)


# -- kernels ------------------------------------------------------------------------------------


def np_dtype(dtype: str, op: str) -> np.dtype:
    """A NumPy dtype for a Relax dtype name (bfloat16 / float8 through ml_dtypes)."""
    try:
        return numpy_dtype(dtype)
    except TypeError:
        raise KernelError(f"{op}: dtype {dtype} is not supported by the NumPy kernels") from None


def zeros_kernel(shape, dtype):
    return np.zeros(shape, np_dtype(dtype, "R.zeros"))


def ones_kernel(shape, dtype):
    return np.ones(shape, np_dtype(dtype, "R.ones"))


def full_kernel(shape, fill_value, dtype=None):
    return np.full(shape, fill_value, np_dtype(dtype, "R.full") if dtype else fill_value.dtype)


def zeros_like_kernel(x, dtype=None):
    return np.zeros(x.shape, np_dtype(dtype, "R.zeros_like") if dtype else x.dtype)


def ones_like_kernel(x, dtype=None):
    return np.ones(x.shape, np_dtype(dtype, "R.ones_like") if dtype else x.dtype)


def full_like_kernel(x, fill_value, dtype=None):
    return np.full(x.shape, fill_value, np_dtype(dtype, "R.full_like") if dtype else x.dtype)


# -- gradient rules -----------------------------------------------------------------------------


def _fill_grad(call, out, g):
    """The fill value is used everywhere: its gradient is the sum of g (TVM gives none)."""
    v = call.args[1]
    total = R.sum(g, axis=None, keepdims=False)
    if v.struct_info.dtype != out.struct_info.dtype:
        total = R.astype(total, v.struct_info.dtype)
    return [None, total]


_SHAPE = Arg("shape", kind="shape")

zeros = register("relax.zeros", (_SHAPE,), (Attr("dtype", to_dtype),), infer=_infer_const_shape, kernel=zeros_kernel, grad=no_gradient, cost=ELEMENTWISE)
ones = register("relax.ones", (_SHAPE,), (Attr("dtype", to_dtype),), infer=_infer_const_shape, kernel=ones_kernel, grad=no_gradient, cost=ELEMENTWISE)
full = register(
    "relax.full",
    (_SHAPE, "fill_value"),
    (Attr("dtype", to_opt_dtype, None),),
    infer=_infer_full,
    kernel=full_kernel,
    grad=_fill_grad,
    cost=ELEMENTWISE,
)
zeros_like = register(
    "relax.zeros_like", ("x",), (Attr("dtype", to_opt_dtype, None),), infer=_infer_like, kernel=zeros_like_kernel, grad=no_gradient, cost=ELEMENTWISE
)
ones_like = register(
    "relax.ones_like", ("x",), (Attr("dtype", to_opt_dtype, None),), infer=_infer_like, kernel=ones_like_kernel, grad=no_gradient, cost=ELEMENTWISE
)
full_like = register(
    "relax.full_like",
    ("x", "fill_value"),
    (Attr("dtype", to_opt_dtype, None),),
    infer=_infer_like,
    kernel=full_like_kernel,
    grad=_fill_grad,
    cost=ELEMENTWISE,
)
