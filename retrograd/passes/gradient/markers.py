"""Checkpoint markers in Gradient (TVM 0.27's semantics): values of a segment are recomputed, not kept."""

from __future__ import annotations

from retrograd.ir.vars import read_vars
from retrograd.ir.copy import rebuild_keeping_sinfo, copy_expr
from retrograd.ir.expr import Call, Expr, Function, Tuple, TupleGetItem, Var, map_tuple_nest
from retrograd.passes.barriers import BARRIER_OPS, END, START, emit_recomputation, is_barrier
from retrograd.passes.dce import is_pure


def marker_kind(value: Expr) -> str | None:
    """START or END for a checkpoint marker call, else None."""
    return value.op.name if is_barrier(value) and len(value.args) == 1 else None


def collect_checkpoints(func: Function, mod=None) -> tuple[set, dict] | None:
    """TVM's CheckpointCollector over the top-level bindings of `func`: (the variables whose values the
    backward part keeps, marker var -> the var it marks), or None when `func` has no marker.

    Kept: the parameters; every var marked by start_checkpoint (a segment's input); and every other
    var whose value reads only kept vars or results of end_checkpoint. A value reading a
    start_checkpoint result is inside a segment and is recomputed, and so is what it flows into up to
    the segment's end_checkpoint. Values only read constants are kept (nothing to recompute from), and
    so are impure calls (running one twice is not the same)."""
    bindings = [b for block in func.body.blocks for b in block.bindings]
    ops = {b.value.op for b in bindings if b.value.__class__ is Call}  # the usual answer, without a call per binding
    if all(getattr(op, "name", None) not in BARRIER_OPS for op in ops) or not any(marker_kind(b.value) for b in bindings):
        return None
    kept = set(func.params)
    ends: set = set()
    marks: dict = {}
    reads: list = []
    for b in bindings:
        kind = marker_kind(b.value)
        arg = b.value.args[0] if kind else None
        if isinstance(arg, Var):
            target = marks.get(arg, arg)
            marks[b.var] = target
            if kind == START:
                kept.add(target)
            else:
                ends.add(b.var)
            continue
        reads.clear()
        read_vars(b.value, reads)
        if all(v in kept or v in ends for v in reads) or not is_pure(b.value, mod):
            kept.add(b.var)
        if kind == END:
            ends.add(b.var)
    return kept, marks


class Recompute:
    """Restores forward values for the backward part: a kept var is read as is, any other is
    recomputed once (with what it needs that is neither kept nor recomputed yet), in forward order,
    right where the backward first asks for it.

    The recomputations stay behind barriers (JAX's optimization_barrier idea), emitted by
    `barriers.emit_recomputation` as the checkpoint planner's are (`<v>_ckin`, `<v>_cp`, `<v>_ckout`), so
    that no clean-up pass can merge a recomputation back into the forward value and bring the memory
    peak back. Differentiated again,
    an adjoint's barriers are segments again: harmless, the values are the same."""

    def __init__(self, bb, forward: list, kept: set):
        self.bb = bb
        self.kept = kept
        self.value_of = {b.var: b.value for b in forward}
        self.position = {b.var: i for i, b in enumerate(forward)}
        self.restored: dict = {}  # forward var -> the end_checkpoint var that hands its recomputation on

    def missing(self, var) -> bool:
        return var in self.value_of and var not in self.kept and var not in self.restored

    def restore(self, expr: Expr) -> Expr:
        """`expr` (a var, call, tuple or item) reading kept values and recomputations only."""
        reads: list = []
        read_vars(expr, reads)
        todo = [v for v in reads if self.missing(v)]
        if todo:
            self._recompute(todo)
        elif not any(v in self.restored for v in reads):
            return expr
        return _replace(expr, self.restored)

    def _recompute(self, todo: list) -> None:
        group: set = set()
        reads: list = []
        while todo:  # iterative: a segment may be thousands of bindings long
            v = todo.pop()
            if v in group or not self.missing(v):
                continue
            group.add(v)
            reads.clear()
            read_vars(self.value_of[v], reads)
            todo.extend(reads)
        order = sorted(group, key=self.position.__getitem__)
        inputs: dict = {}
        for v in order:
            reads.clear()
            read_vars(self.value_of[v], reads)
            inputs.update((r, self.restored.get(r, r)) for r in reads if r not in group)
        handed = emit_recomputation(
            lambda name, value: self.bb.emit(value, name),
            inputs.items(),
            [(v, v, self.value_of[v]) for v in order],
            copy_expr,
            group,
        )
        self.restored.update(handed)


def _replace(expr: Expr, vmap: dict) -> Expr:
    """`expr` with vars replaced through nested calls too (gradient rules return unnormalized trees)."""
    if isinstance(expr, Var):
        return vmap.get(expr, expr)
    if isinstance(expr, Call):
        args = tuple(_replace(a, vmap) for a in expr.args)
        return Call(expr.op, args, expr.attrs, expr.struct_info, span=expr.span)
    if isinstance(expr, Tuple | TupleGetItem):
        # A stack over the nest (tuples nest to any depth); calls inside are replaced recursively.
        return map_tuple_nest(expr, lambda e: _replace(e, vmap), rebuild_keeping_sinfo)
    return expr
