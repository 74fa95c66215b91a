"""Dead code elimination: drop pure bindings nobody reads, empty blocks, and unreachable private functions."""

from __future__ import annotations

from retrograd.ir.vars import reachable_functions, read_vars, used_vars
from retrograd.ir.block import VarBinding
from retrograd.ir.expr import Call, Function, GlobalVar, If, SeqExpr, Tuple, Var
from retrograd.ir.functor import ExprMutator, if_depth, stack_room
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import FuncStructInfo
from retrograd.passes.infra import map_functions, module_pass


def is_pure(value, mod: IRModule | None = None) -> bool:
    """Whether evaluating `value` has no effect besides its result (so it may be dropped if unused)."""
    if not isinstance(value, If):
        return _pure_leaf(value, mod)
    # Nested Ifs are walked with a stack: a recursion through all() costs C stack per level.
    stack = [value.true_branch, value.false_branch]
    while stack:
        seq = stack.pop()
        for block in seq.blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, If):
                    stack += (v.true_branch, v.false_branch)
                elif not _pure_leaf(v, mod):
                    return False
    return True


def _pure_leaf(value, mod) -> bool:
    """is_pure for a value that is not an If."""
    if isinstance(value, Call):
        op = value.op
        if isinstance(op, GlobalVar):
            if mod is not None and op.name_hint in mod:
                return bool(getattr(mod[op.name_hint], "is_pure", True))
            sig = op.struct_info
            return not isinstance(sig, FuncStructInfo) or sig.purity
        return bool(getattr(op, "pure", True))
    return True


def eliminate_dead_code(func: Function, mod: IRModule | None = None) -> Function:
    """`func` without the pure bindings whose variables are never read (nested If branches included)."""
    dead: set = set()
    with stack_room(if_depth(func)):  # _find_dead recurses once per nested If
        _find_dead(func.body, mod, dead)
    if not dead:
        return func
    return _Eliminator(dead).visit_expr(func)


def live_flat_bindings(bindings: list, live: set, tuple_args: bool) -> list:
    """Dead code elimination of the flat bindings of one dataflow block (op calls, tuples and projections
    reading leaves: cleanup's one walk): one backward walk; `live` starts as what the result reads.
    `tuple_args`: whether a call may read a tuple of vars. None when the result does not read every output
    var of the block."""
    result = frozenset(live)
    kept = []
    keep, update = kept.append, live.update
    reads: list = []
    for b in reversed(bindings):
        var = b.var
        if var.__class__ is Var and var not in result:
            return None
        value = b.value
        if value.__class__ is Call:
            if var not in live and getattr(value.op, "pure", True):
                continue
            args = value.args
            update(args)  # leaves that are not vars too: only vars are ever looked up
            if tuple_args and Tuple in map(type, args):
                for a in args:
                    if a.__class__ is Tuple:
                        live.update(f for f in a.fields if isinstance(f, Var))
        else:
            if var not in live:
                continue
            reads.clear()
            read_vars(value, reads)
            update(reads)
        keep(b)
    kept.reverse()
    return kept


class _Eliminator(ExprMutator):
    """Drops the bindings found dead (by identity)."""

    def __init__(self, dead: set):
        super().__init__()
        self.dead = dead

    def rewrite_binding(self, binding: VarBinding):
        if id(binding) in self.dead:
            return None
        # Dropping bindings renames nothing: only nested scopes need a visit.
        value = binding.value
        return self.visit_if(value) if isinstance(value, If) else value


def _find_dead(seq: SeqExpr, mod, dead: set) -> set:
    """Add the ids of seq's dead bindings (nested scopes included) to `dead`; return what the live rest reads.

    One backward sweep: a binding is live if a later live binding or the result reads its var.
    """
    reads: list = []
    read_vars(seq.body, reads)
    live = set(reads)
    for block in reversed(seq.blocks):
        for b in reversed(block.bindings):
            if b.var not in live and is_pure(b.value, mod):
                dead.add(id(b))
                continue
            value = b.value
            if isinstance(value, If):
                live.update(used_vars(value.cond))
                live.update(_find_dead(value.true_branch, mod, dead))
                live.update(_find_dead(value.false_branch, mod, dead))
                continue
            reads.clear()
            read_vars(value, reads)
            live.update(reads)
    return live


@module_pass(name="dce")
class DeadCodeElimination:
    """Remove unused pure bindings and empty blocks in every function, then private functions no public function reaches."""

    remove_unused_functions: bool = True

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        out = map_functions(mod, lambda func: eliminate_dead_code(func, mod), self.name)
        if not self.remove_unused_functions:
            return out
        reached = set(reachable_functions(out, [n for n, f in out.items() if not getattr(f, "private", False)]))
        for name in list(out.keys()):
            if name not in reached:
                out = out.without(name)
        return out
