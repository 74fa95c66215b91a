"""Sorting ops (TVM's sorting.py): sort, argsort, topk."""

from __future__ import annotations

import numpy as np

from retrograd.ir.expr import TupleGetItem
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.registry import Attr, InferCtx, no_gradient, register
from retrograd.ops.shape_utils import axes_of


def _axis(ctx: InferCtx, x: TensorStructInfo) -> int | None:
    if x.ndim == -1:
        return None
    (axis,) = axes_of(ctx, (ctx.attrs["axis"],), x.ndim)
    return axis


def _order(x, axis, descending):
    """Stable ascending order; descending keeps equal elements in index order too (as a stable sort)."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    flipped = np.flip(x, axis)
    return n - 1 - np.flip(np.argsort(flipped, axis=axis, kind="stable"), axis)


# -- sort, argsort --------------------------------------------------------------------------------


def _infer_sort(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    _axis(ctx, x)
    return x


def sort_kernel(data, axis=-1, descending=False):
    return np.take_along_axis(data, _order(data, axis, descending), axis)


def _sort_grad(call, out, g):
    # Each sorted element came from one input position: put g back there.
    x = call.args[0]
    order = R.argsort(x, axis=call.attrs["axis"], descending=call.attrs["descending"], dtype="int64")
    return [R.scatter_elements(R.zeros_like(x), order, g, axis=call.attrs["axis"])]


sort = register(
    "relax.sort", ("x",), (Attr("axis", at.to_int, -1), Attr("descending", at.to_bool, False)),
    infer=_infer_sort, kernel=sort_kernel, grad=_sort_grad,
)


def _infer_argsort(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    _axis(ctx, x)
    return TensorStructInfo(x.shape, ctx.attrs["dtype"] or x.dtype, x.ndim)


def argsort_kernel(data, axis=-1, descending=False, dtype="int32"):
    return _order(data, axis, descending).astype(dtype or data.dtype)


argsort = register(
    "relax.argsort",
    ("data",),
    (Attr("axis", at.to_int, -1), Attr("descending", at.to_bool, False), Attr("dtype", at.to_opt_dtype, "int32")),
    infer=_infer_argsort,
    kernel=argsort_kernel,
    grad=no_gradient,
)

# -- topk ----------------------------------------------------------------------------------------


def _k_of(k: int, n) -> object:
    """TVM: k outside (0, n) keeps the whole axis."""
    return k if k > 0 and (not isinstance(n, int) or k < n) else n


def _infer_topk(ctx: InferCtx):
    x = ctx.tensor(0)
    axis = _axis(ctx, x)
    idx_dtype = ctx.attrs["dtype"] or x.dtype
    if x.shape is None:
        vals, idxs = TensorStructInfo(None, x.dtype, x.ndim), TensorStructInfo(None, idx_dtype, x.ndim)
    else:
        shape = list(x.shape)
        shape[axis] = _k_of(ctx.attrs["k"], shape[axis])
        vals, idxs = TensorStructInfo(tuple(shape), x.dtype), TensorStructInfo(tuple(shape), idx_dtype)
    ret = ctx.attrs["ret_type"]
    return TupleStructInfo([vals, idxs]) if ret == "both" else vals if ret == "values" else idxs


def _topk_order(data, k, axis, largest):
    """Positions of the k largest (smallest) along axis, best first, ties by lower index (the stable
    order). For small k, argpartition finds the k-th key and only k elements per row get sorted."""
    n = data.shape[axis]
    if 4 * k >= n:
        return np.take(_order(data, axis, descending=largest), np.arange(k), axis=axis)
    x = np.moveaxis(data, axis, -1)
    # A key whose ascending order is the wanted order (~ reverses integers and bools without overflow).
    key = (-x if x.dtype.kind == "f" else ~x) if largest else x
    kth = np.take_along_axis(key, np.argpartition(key, k - 1, axis=-1)[..., k - 1 : k], -1)
    better, tied = key < kth, key == kth
    # Every element better than the k-th, then the first ties in index order: exactly k per row.
    room = k - better.sum(-1, keepdims=True)
    chosen = better | (tied & (np.cumsum(tied, axis=-1) <= room))
    order = np.nonzero(chosen)[-1].reshape(x.shape[:-1] + (k,))
    order = np.take_along_axis(order, np.argsort(np.take_along_axis(key, order, -1), axis=-1, kind="stable"), -1)
    return np.moveaxis(order, -1, axis)


def topk_kernel(data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32"):
    axis %= data.ndim
    idx = _topk_order(data, _k_of(k, data.shape[axis]), axis, largest)
    vals = np.take_along_axis(data, idx, axis)
    idx = idx.astype(dtype or data.dtype)
    return (vals, idx) if ret_type == "both" else vals if ret_type == "values" else idx


def _topk_grad(call, out, g):
    x = call.args[0]
    attrs = dict(call.attrs)
    ret = attrs["ret_type"]
    if ret == "indices":
        return [None]
    if ret == "both":
        indices, g = TupleGetItem(out, 1), TupleGetItem(g, 0)
    else:
        indices = R.topk(x, **{**attrs, "ret_type": "indices"})
    return [R.scatter_elements(R.zeros_like(x), indices, g, axis=attrs["axis"])]


topk = register(
    "relax.topk",
    ("data",),
    (
        Attr("k", at.to_int, 1),
        Attr("axis", at.to_int, -1),
        Attr("ret_type", at.one_of("both", "values", "indices"), "both"),
        Attr("largest", at.to_bool, True),
        Attr("dtype", at.to_opt_dtype, "int32"),
    ),
    infer=_infer_topk,
    kernel=topk_kernel,
    grad=_topk_grad,
)
