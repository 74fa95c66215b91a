"""Sparse gradients of gathered tables (Caffe2's GradientSlice): (indices, rows) instead of a dense table."""

from __future__ import annotations

import math

from retrograd.ir.vars import read_vars
from retrograd.ir.expr import Call, Tuple, Var, shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.grad_sparse import densify_sparse_grad, merge_sparse_grad, merge_sparse_rows
from retrograd.ops.index.take_slice import in_range_indices
from retrograd.ops.registry import get as get_op
from retrograd.ops.shape_utils import dim_mul
from retrograd.passes.gradient.spec import GradientSpec


class SparseGrads:
    """The tables of a GradientSpec that get sparse gradients, and their (indices, output gradient) contributions."""

    def __init__(self, spec: GradientSpec):
        self.spec = spec
        self.merge = spec.merge_duplicates
        self.vars: dict = {}  # new var -> list of (indices, grad)

    def bind(self, vmap: dict, forward: list, ret) -> None:
        """Map candidates to the copied vars, keeping those used only as take(table, indices, axis=0)."""
        if not self.spec.sparse:
            return
        wanted = {vmap[p]: p for p in self.spec.sparse}
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
                if self.spec.sparse_explicit:
                    where = bad.get(new)
                    raise self.spec.error(
                        f"sparse_grads: '{orig.name_hint}' is used other than as take(table, indices, axis=0) "
                        "with mode fast, or clip/wrap on a table of a static number of rows",
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
        indices = sweep.host.restore(call.args[1])
        fixed = in_range_indices(indices, call.args[0].struct_info.shape[0], call.attrs.get("mode") or "fast")
        if fixed is not None:  # the rows take(mode=clip|wrap) really read
            indices = sweep.bb.emit(fixed, "lv")
        self.vars[call.args[0]].append((indices, g))
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
                raise self.spec.error(f"merge_duplicates needs the number of rows of '{var.name_hint}' to be static")
            return bb.emit(merge_sparse_rows(idx, vals, num_rows=first), f"{var.name_hint}_sparse")
        return bb.normalize(Tuple([idx, vals]))


def _is_row_gather(value, table: Var) -> bool:
    return (
        isinstance(value, Call)
        and getattr(value.op, "name", None) == "relax.take"
        and value.args[0] is table
        and all(a is not table for a in value.args[1:])
        and value.attrs.get("axis") == 0
        and _sparse_mode(value.attrs.get("mode") or "fast", table)
    )


def _sparse_mode(mode: str, table: Var) -> bool:
    """Whether the rows take(table, indices, mode=mode) reads can be named by integer indices alone
    (mode nan drops rows: its sparse form would need a mask)."""
    if mode == "fast":
        return True
    shape = getattr(table.struct_info, "shape", None)
    return mode in ("clip", "wrap") and shape is not None and isinstance(shape[0], int) and shape[0] > 0


__all__ = ["SparseGrads", "densify_sparse_grad", "merge_sparse_grad"]
