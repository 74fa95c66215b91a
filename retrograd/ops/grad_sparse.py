"""Sparse gradient slices (Caffe2's GradientSlice): merging repeated rows, densifying; the merge op."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_int_dtype
from retrograd.ir.expr import Tuple, TupleGetItem, const
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_int
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.registry import Attr, InferCtx, register


def _rows(indices, num_rows: int | None, who: str) -> np.ndarray:
    idx = np.asarray(indices).reshape(-1)
    if not is_int_dtype(str(idx.dtype)):
        raise KernelError(f"{who}: indices must be integers, got dtype {idx.dtype}")
    if num_rows is None:
        return idx.astype(np.int64, copy=False)
    bad = (idx < -num_rows) | (idx >= num_rows)
    if bad.any():
        raise KernelError(f"{who}: index {int(idx[bad][0])} out of range for a table of {num_rows} rows")
    # Negative indices wrap like NumPy's, as take's do.
    return np.where(idx < 0, idx + num_rows, idx).astype(np.int64, copy=False)


def merge_sparse_grad(indices, values, num_rows: int | None = None):
    """Sum the rows of repeated indices: (sorted unique indices, merged rows). Vectorized (sort + reduceat)."""
    idx = _rows(indices, num_rows, "merge_sparse_grad")
    vals = np.asarray(values)
    vals = vals.reshape((idx.shape[0],) + vals.shape[np.ndim(indices) :])
    if idx.shape[0] == 0:
        return idx.copy(), vals.copy()
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
    return sorted_idx[starts], np.add.reduceat(vals[order], starts, axis=0)


def densify_sparse_grad(indices, values, num_rows: int):
    """The dense gradient of a (num_rows, ...) table from its sparse (indices, rows) form."""
    unique, merged = merge_sparse_grad(indices, values, num_rows)
    dense = np.zeros((num_rows,) + merged.shape[1:], dtype=merged.dtype)
    dense[unique] = merged  # indices are unique here, so a plain store is exact
    return dense


def _merge_infer(ctx: InferCtx):
    idx, vals = ctx.tensor(0), ctx.tensor(1)
    if idx.dtype and not is_int_dtype(idx.dtype):
        raise ctx.error(f"indices must be integers, got {idx.dtype}", 0)
    if idx.ndim not in (1, -1):
        raise ctx.error("indices must be 1-D", 0)
    # The number of distinct indices is only known at run time.
    return TupleStructInfo((TensorStructInfo(None, "int64", 1), TensorStructInfo(None, vals.dtype, vals.ndim)))


def merge_sparse_rows_kernel(indices, values, *, num_rows):
    return merge_sparse_grad(indices, values, num_rows)


def _merge_grad(call, out, g):
    # Each value row went to the merged row of its (wrapped) index, found in the sorted unique indices
    # by bucketize: its gradient is that row of g. The indices get none.
    indices, _ = call.args
    wrapped = R.where(R.less(indices, const(0, indices.struct_info.dtype)),
                      R.add(indices, const(call.attrs["num_rows"], indices.struct_info.dtype)), indices)
    rows = g.fields[1] if isinstance(g, Tuple) else TupleGetItem(g, 1)
    return [None, R.take(rows, R.bucketize(wrapped, TupleGetItem(out, 0)), axis=0)]


# The Gradient pass emits it under merge_duplicates (to post-process a sparse gradient); its rule
# serves gradients of such gradients.
merge_sparse_rows = register(
    "relax.grad.merge_sparse_rows",
    ("indices", "values"),
    (Attr("num_rows", to_int),),
    infer=_merge_infer,
    kernel=merge_sparse_rows_kernel,
    grad=_merge_grad,
    cost=ELEMENTWISE,
)
