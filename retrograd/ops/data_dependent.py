"""Ops whose result size depends on the data, typed as TVM 0.27 types them: nonzero, unique.

TVM knows only the rank of these results (R.Tensor(ndim=k)); so do we, and the kernels return arrays of
the size the data gives. nonzero's result is integer: no gradient. unique's values are the input's
elements (slices) at their first occurrences, and its rule sends each value's gradient there
(take_backward at return_index's positions): the derivative wherever the elements are distinct; at ties,
where none exists, the first occurrence gets it. TVM and PyTorch define no gradient for unique.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.expr import PrimValue, TupleGetItem, prim_value, shape_expr
from retrograd.ir.struct_info import PrimStructInfo, TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops.api import R
from retrograd.ops.registry import Arg, InferCtx, no_gradient, register
from retrograd.ops.shape_utils import normalize_axis

# -- nonzero -------------------------------------------------------------------------------------


def _infer_nonzero(ctx: InferCtx) -> TensorStructInfo:
    ctx.tensor(0)
    return TensorStructInfo(None, "int64", 2)


def _nonzero(x):
    # ONNX's NonZero, as TVM runs it: one row per dimension (a 0-d input counts as 1-D).
    x = np.atleast_1d(x)
    return np.ascontiguousarray(np.stack(np.nonzero(x)).astype(np.int64, copy=False)).reshape(x.ndim, -1)


nonzero = register("relax.nonzero", ("x",), infer=_infer_nonzero, kernel=_nonzero, grad=no_gradient)

# -- unique --------------------------------------------------------------------------------------

_FLAGS = ("sorted", "return_index", "return_inverse", "return_counts")


_DEFAULTS = (True, False, False, False)


def _literal_flag(ctx: InferCtx, i: int) -> bool:
    if i >= len(ctx.call.args):  # left out: TVM's Python defaults
        return _DEFAULTS[i - 1]
    arg = ctx.call.args[i]
    s = ctx.sinfo[i]
    if not isinstance(arg, PrimValue) or not isinstance(s, PrimStructInfo) or arg.value is None:
        raise ctx.error("expects a literal True/False (TVM reads this flag at compile time)", i)
    if not (s.dtype == "bool" or s.dtype.startswith(("int", "uint"))):
        raise ctx.error(f"expects a bool, got a {s.dtype} value", i)
    return bool(arg.value)


def _infer_unique(ctx: InferCtx):
    x = ctx.tensor(0)
    flags = [_literal_flag(ctx, i) for i in range(1, 5)]
    axis = None
    if len(ctx.call.args) == 6:
        arg = ctx.call.args[5]
        if not isinstance(arg, PrimValue) or isinstance(arg.value, bool) or not isinstance(arg.value, int):
            raise ctx.error("expects a literal integer axis", 5)
        axis = arg.value
        if x.ndim >= 0 and normalize_axis(axis, x.ndim) is None:
            raise ctx.error(f"axis {axis} is out of range for ndim {x.ndim}", 0)
    if x.ndim == 0:
        values = TensorStructInfo((1,), x.dtype)
        extra = TensorStructInfo((1,), "int64")
    else:
        values = TensorStructInfo(None, x.dtype, x.ndim if axis is not None else 1)
        extra = TensorStructInfo(None, "int64", 1)
    fields = [values] + [extra for f in flags[1:] if f]
    return fields[0] if len(fields) == 1 else TupleStructInfo(fields)


def _unique(x, sorted=True, return_index=False, return_inverse=False, return_counts=False, axis=None):
    """TVM's relax.run.unique (NumPy's unique; unsorted: the values in order of first occurrence)."""
    if axis is not None:
        if x.ndim == 0 or normalize_axis(axis, x.ndim) is None:
            raise KernelError(f"R.unique: axis {axis} is out of range for shape {x.shape}")
        if x.shape[axis] == 0:
            raise KernelError(f"R.unique: axis {axis} of shape {x.shape} is empty")
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, inverse, counts = first[order], rank[inverse], counts[order]
    out = [np.ascontiguousarray(values)]
    for flag, v in zip((return_index, return_inverse, return_counts), (first, inverse, counts)):
        if flag:
            out.append(np.ascontiguousarray(v, dtype=np.int64))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_grad(call, out, g):
    x = call.args[0]
    xs = x.struct_info
    if not is_float_dtype(xs.dtype or "") or xs.shape is None:
        return [None] * len(call.args)
    sort = call.args[1] if len(call.args) > 1 else prim_value(True, "bool")
    flags = [sort, prim_value(True, "bool"), prim_value(False, "bool"), prim_value(False, "bool")]
    axis = call.args[5] if len(call.args) == 6 else None
    first = TupleGetItem(R.unique(x, *flags, *([axis] if axis is not None else [])), 1)
    gv = TupleGetItem(g, 0) if isinstance(call.struct_info, TupleStructInfo) else g
    if axis is None:
        flat = R.reshape(x, shape_expr([-1]))
        gx = R.reshape(R.grad.take_backward(gv, flat, first, axis=0), shape_expr(list(xs.shape)))
    else:
        gx = R.grad.take_backward(gv, x, first, axis=axis.value % xs.ndim)
    return [gx] + [None] * (len(call.args) - 1)


unique = register(
    "relax.unique",
    ("x", *(Arg(name, "prim", optional=True) for name in _FLAGS), Arg("axis", "prim", optional=True)),
    infer=_infer_unique,
    kernel=_unique,
    grad=_unique_grad,
)
