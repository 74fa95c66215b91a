"""Sparse gradients of gathered tables (Caffe2's GradientSlice): (indices, rows) instead of a dense table."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.expr import Call, Tuple, Var, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_int_dtype
from retrograd.ops.attr_types import to_int
from retrograd.ops.registry import Attr, InferCtx, lookup, register
from retrograd.ops.registry import get as get_op
from retrograd.ops.shape_utils import dim_mul
from retrograd.passes.gradient_copy import read_vars

# -- NumPy helpers for consumers of sparse gradients ---------------------------------------------


def _rows(indices: np.ndarray, num_rows: int | None, who: str) -> np.ndarray:
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


# -- the merge op (emitted under merge_duplicates=True) --------------------------------------------


def _merge_infer(ctx: InferCtx):
    idx, vals = ctx.tensor(0), ctx.tensor(1)
    if idx.dtype and not is_int_dtype(idx.dtype):
        raise ctx.error(f"indices must be integers, got {idx.dtype}", 0)
    if idx.ndim not in (1, -1):
        raise ctx.error("indices must be 1-D", 0)
    # The number of distinct indices is only known at run time.
    return TupleStructInfo((TensorStructInfo(None, "int64", 1), TensorStructInfo(None, vals.dtype, vals.ndim)))


def _merge_kernel(indices, values, *, num_rows):
    return merge_sparse_grad(indices, values, num_rows)


merge_sparse_rows = lookup("relax.grad.merge_sparse_rows") or register(
    "relax.grad.merge_sparse_rows",
    ("indices", "values"),
    (Attr("num_rows", to_int),),
    infer=_merge_infer,
    kernel=_merge_kernel,
)


# -- the Gradient pass side ------------------------------------------------------------------------


class SparseGrads:
    """Which parameters get sparse gradients, and their (indices, output gradient) contributions."""

    def __init__(self, fad):
        self.fad = fad
        self.candidates: list = []  # original params
        self.explicit = False
        self.merge = False
        self.vars: dict = {}  # new var -> list of (indices, grad)

    def configure(self, spec, merge: bool, required: list) -> None:
        self.merge = bool(merge)
        if spec is None or spec is False:
            return
        fad = self.fad
        params = list(fad.func.params)
        if spec is True:
            self.candidates = [p for p in required if any(p is q for q in params)]
            return
        self.explicit = True
        items = list(spec) if isinstance(spec, list | tuple) else [spec]
        for item in items:
            var = fad._resolve_one(item, params, [])
            if not any(var is r for r in required):
                raise fad.error(f"sparse_grads: '{var.name_hint}' is not among the variables whose gradient is required")
            s = var.struct_info
            if not isinstance(s, TensorStructInfo) or s.ndim < 1 or s.shape is None:
                raise fad.error(f"sparse_grads: '{var.name_hint}' must be a table (a tensor of known shape, ndim >= 1)")
            self.candidates.append(var)

    def bind(self, vmap: dict, forward: list, ret) -> None:
        """Map candidates to the copied vars, keeping those used only as take(table, indices, axis=0)."""
        if not self.candidates:
            return
        wanted = {vmap[p]: p for p in self.candidates}
        bad: dict = {}
        reads: list = []
        for b in forward:
            reads.clear()
            read_vars(b.value, reads)
            for v in reads:
                if v in wanted and v not in bad and not _is_row_gather(b.value, v):
                    bad[v] = b
        reads.clear()
        read_vars(ret, reads)
        for v in reads:
            if v in wanted and v not in bad:
                bad[v] = None
        for new, orig in wanted.items():
            s = orig.struct_info
            if new in bad or not isinstance(s, TensorStructInfo) or s.shape is None or s.ndim < 1:
                if self.explicit:
                    where = bad.get(new)
                    raise self.fad.error(
                        f"sparse_grads: '{orig.name_hint}' is used other than as take(table, indices, axis=0)",
                        where,
                    )
                continue
            self.vars[new] = []

    def is_sparse(self, var) -> bool:
        return var in self.vars

    def contribute(self, sweep, binding, call: Call, adj) -> bool:
        if not self.vars or getattr(call.op, "name", None) != "relax.take" or call.args[0] not in self.vars:
            return False
        g = sweep.materialize(adj, binding.var.struct_info, binding.var)
        self.vars[call.args[0]].append((call.args[1], g))
        return True

    def result(self, sweep, var):
        """The (indices, rows) tuple for a sparse parameter: contributions flattened and concatenated."""
        bb = sweep.bb
        table = var.struct_info
        row = tuple(table.shape[1:])
        idx_parts, val_parts = [], []
        for indices, g in self.vars[var]:
            s = indices.struct_info
            n = math.prod(d for d in s.shape if isinstance(d, int)) if s.shape is not None else None
            for d in s.shape or ():
                if isinstance(d, str):
                    n = dim_mul(n, d)
            flat = indices
            if s.ndim != 1:
                flat = bb.emit(get_op("relax.reshape")(indices, shape_expr((n,))), "lv")
            if s.dtype != "int64":
                flat = bb.emit(get_op("relax.astype")(flat, dtype="int64"), "lv")
            vals = g
            if g.struct_info.ndim != 1 + len(row):
                vals = bb.emit(get_op("relax.reshape")(g, shape_expr((n,) + row)), "lv")
            idx_parts.append(flat)
            val_parts.append(vals)
        if not idx_parts:
            idx = bb.emit(get_op("relax.zeros")(shape_expr((0,)), dtype="int64"), "lv")
            vals = bb.emit(get_op("relax.zeros")(shape_expr((0,) + row), dtype=table.dtype), "lv")
        elif len(idx_parts) == 1:
            idx, vals = idx_parts[0], val_parts[0]
        else:
            idx = bb.emit(get_op("relax.concat")(Tuple(idx_parts), axis=0), "lv")
            vals = bb.emit(get_op("relax.concat")(Tuple(val_parts), axis=0), "lv")
        if self.merge:
            first = table.shape[0]
            if not isinstance(first, int):
                raise self.fad.error(f"merge_duplicates needs the number of rows of '{var.name_hint}' to be static")
            return bb.emit(merge_sparse_rows(idx, vals, num_rows=first), f"{var.name_hint}_sparse")
        return bb.normalize(Tuple([idx, vals]))


def _is_row_gather(value, table: Var) -> bool:
    return (
        isinstance(value, Call)
        and getattr(value.op, "name", None) == "relax.take"
        and value.args[0] is table
        and all(a is not table for a in value.args[1:])
        and value.attrs.get("axis") == 0
    )
