"""Search ops (TVM's search.py): where, argmax, argmin, bucketize."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.kernels import index as index_kernels
from retrograd.ops.registry import Attr, InferCtx, no_gradient, register
from retrograd.ops.rule_helpers import scalar
from retrograd.ops.shape_utils import axes_of, broadcast_shapes, same_dtype

# -- where ---------------------------------------------------------------------------------------


def _infer_where(ctx: InferCtx) -> TensorStructInfo:
    c, a, b = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    if c.dtype and c.dtype != "bool":
        raise ctx.error(f"the condition must be a bool tensor, got dtype {c.dtype}", 0)
    dtype = same_dtype(a, b)
    if dtype is None:
        raise ctx.error(f"dtypes {a.dtype} and {b.dtype} of x1 and x2 differ")
    if c.shape is None or a.shape is None or b.shape is None:
        known = [t.ndim for t in (c, a, b)]
        return TensorStructInfo(None, dtype, -1 if -1 in known else max(known))
    shape = broadcast_shapes(a.shape, b.shape)
    shape = shape if shape is None else broadcast_shapes(c.shape, shape)
    if shape is None:
        raise ctx.error("condition, x1 and x2 cannot be broadcast together")
    return TensorStructInfo(shape, dtype)


def _where_grad(call, out, g):
    # g is full-shaped; the driver collapse-sums each branch to its own (maybe broadcast) shape.
    c = call.args[0]
    zero = scalar(0, out)
    return [None, R.where(c, g, zero), R.where(c, zero, g)]


where = register(
    "relax.where",
    ("condition", "x1", "x2"),
    infer=_infer_where,
    kernel=index_kernels.where,
    grad=_where_grad,
    inplace=index_kernels.where_into,
    cost=ELEMENTWISE,
)

# -- argmax, argmin ------------------------------------------------------------------------------


def _infer_arg_extremum(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    axis, keepdims = ctx.attrs["axis"], ctx.attrs["keepdims"]
    if x.ndim == -1:
        return TensorStructInfo(() if axis is None and not keepdims else None, "int64", 0 if axis is None and not keepdims else -1)
    if axis is not None:
        (axis,) = axes_of(ctx, (axis,), x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, "int64", x.ndim if keepdims else (x.ndim - 1 if axis is not None else 0))
    if axis is None:
        return TensorStructInfo((1,) * x.ndim if keepdims else (), "int64")
    shape = x.shape[:axis] + ((1,) if keepdims else ()) + x.shape[axis + 1 :]
    return TensorStructInfo(shape, "int64")


def arg_extremum_kernel(name, fn):
    def kernel(x, axis=None, keepdims=False):
        if x.size == 0 or (axis is not None and x.shape[axis] == 0):
            raise KernelError(f"R.{name}: empty reduction over a tensor shaped {x.shape}")
        # The first occurrence of the extremum, as TVM and NumPy pick.
        return np.asarray(fn(x, axis=axis, keepdims=keepdims)).astype("int64")

    return kernel


_ARG_ATTRS = (Attr("axis", at.to_opt_int, None), Attr("keepdims", at.to_bool, False))
argmax = register(
    "relax.argmax", ("x",), _ARG_ATTRS, infer=_infer_arg_extremum, kernel=arg_extremum_kernel("argmax", np.argmax), grad=no_gradient
)
argmin = register(
    "relax.argmin", ("x",), _ARG_ATTRS, infer=_infer_arg_extremum, kernel=arg_extremum_kernel("argmin", np.argmin), grad=no_gradient
)

# -- bucketize -----------------------------------------------------------------------------------


def _infer_bucketize(ctx: InferCtx) -> TensorStructInfo:
    x, b = ctx.tensor(0), ctx.tensor(1)
    if b.ndim not in (1, -1):
        raise ctx.error(f"boundaries must be 1-D, got ndim {b.ndim}", 1)
    return TensorStructInfo(x.shape, "int32" if ctx.attrs["out_int32"] else "int64", x.ndim)


def bucketize_kernel(input_tensor, boundaries, out_int32=False, right=False):
    # PyTorch's convention (TVM follows it): right=False counts boundaries < x, right=True boundaries <= x.
    # A NaN input sorts last (len(boundaries)) in both searches.
    side = "right" if right else "left"
    b = np.asarray(boundaries)
    if b.dtype.kind in "fc" and np.isnan(b).any():
        out = _torch_search(b, np.asarray(input_tensor), right)
    else:
        out = np.searchsorted(b, input_tensor, side=side)
    return np.asarray(out).astype("int32" if out_int32 else "int64")


def _torch_search(b, x, right):
    """ATen's bucketize binary search, step for step, for boundaries holding NaN (where searchsorted's
    NaN-sorts-last order and ATen's comparisons part): it moves right unless `b[mid] >= x` (`b[mid] > x`
    when right), so a NaN on either side sends it right; the answer then depends on the path."""
    start, end = np.zeros(x.shape, np.int64), np.full(x.shape, b.size, np.int64)
    with np.errstate(invalid="ignore"):
        while (start < end).any():
            live = start < end
            mid = start + ((end - start) >> 1)
            v = b[np.minimum(mid, b.size - 1)]
            go = ~((v > x) if right else (v >= x))
            start = np.where(live & go, mid + 1, start)
            end = np.where(live & ~go, mid, end)
    return start


bucketize = register(
    "relax.bucketize",
    ("input_tensor", "boundaries"),
    (Attr("out_int32", at.to_bool, False), Attr("right", at.to_bool, False)),
    infer=_infer_bucketize,
    kernel=bucketize_kernel,
    grad=no_gradient,
)
