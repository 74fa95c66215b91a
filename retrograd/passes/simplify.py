"""Algebraic simplification and binding canonicalization: aliases, tuple projections, transposes, matmul transposes."""

from __future__ import annotations

import attrs

from retrograd.ir.block import DataflowBlock, VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import (
    Call,
    DataflowVar,
    Function,
    If,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    is_leaf,
)
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import get as get_op
from retrograd.ir.analysis import read_vars
from retrograd.ir.copy import substitute
from retrograd.passes.infra import function_pass

_PERMUTE = "relax.permute_dims"
_MATMUL = "relax.matmul"


def _op_name(value) -> str | None:
    return getattr(value.op, "name", None) if isinstance(value, Call) else None


def _axes(call: Call) -> tuple | None:
    """The explicit permutation of a permute_dims call (None axes reverse them), or None if ndim is unknown."""
    ndim = call.struct_info.ndim if isinstance(call.struct_info, TensorStructInfo) else -1
    axes = call.attrs.get("axes")
    if axes is None:
        return tuple(range(ndim - 1, -1, -1)) if ndim >= 0 else None
    return tuple(a % len(axes) for a in axes)


def _swaps_last_two(axes: tuple | None) -> bool:
    if axes is None or len(axes) < 2:
        return False
    n = len(axes)
    return axes == tuple(range(n - 2)) + (n - 1, n - 2)


class _Simplifier:
    """One forward sweep per scope. `sub` replaces removed variables by what they alias; `defs` gives the
    (rewritten) value of each remaining variable, for pattern matching."""

    def __init__(self, func: Function):
        self.sub: dict = {}
        self.defs: dict = {}
        self.uses: dict = _count_uses(func)
        self.bb = BlockBuilder()

    def resolve(self, expr):
        return substitute(expr, self.sub) if self.sub else expr

    def seq(self, seq: SeqExpr) -> SeqExpr:
        changed = False
        blocks = []
        for block in seq.blocks:
            new = self.block(block)
            if new is not block:
                changed = True
            if new is not None:
                blocks.append(new)
        body = self.resolve(seq.body)
        if not changed and body is seq.body:
            return seq
        return SeqExpr(tuple(blocks), body, seq.struct_info, span=seq.span)

    def block(self, block):
        # If branches are simplified in the middle of their block: keep the outer block's state.
        saved = (self.out, self.position, self.promoted, self.dataflow) if hasattr(self, "out") else None
        self.out: list = []
        self.position: dict = {}  # var -> index in self.out (this block only)
        self.promoted: dict = {}  # dataflow var -> the output var now bound in its place
        self.dataflow = isinstance(block, DataflowBlock)
        try:
            return self._block(block)
        finally:
            if saved is not None:
                self.out, self.position, self.promoted, self.dataflow = saved

    def _block(self, block):
        changed = False
        for b in block.bindings:
            changed |= self.binding(b)
        out = self.out
        if self.promoted:
            # Bindings emitted before a promotion still read the dataflow var: rename it (only
            # bindings after the first promoted one can read a promoted var).
            first = min(self.position[v] for v in self.promoted.values())
            out = out[: first + 1] + [
                b if not _reads_any(b.value, self.promoted) else VarBinding(b.var, _rename(b.value, self.promoted), span=b.span)
                for b in out[first + 1 :]
            ]
            changed = True
        if not changed:
            return block
        if not out:
            return None
        return type(block)(tuple(out), span=block.span)

    def emit(self, binding: VarBinding) -> None:
        self.position[binding.var] = len(self.out)
        self.out.append(binding)
        self.defs[binding.var] = binding.value

    def binding(self, b: VarBinding) -> bool:
        """Emit the simplified binding; True if anything changed."""
        if isinstance(b.value, If):
            value = b.value
            cond = self.resolve(value.cond)
            tb, fb = self.seq(value.true_branch), self.seq(value.false_branch)
            if cond is value.cond and tb is value.true_branch and fb is value.false_branch:
                self.emit(b)
                return False
            self.emit(VarBinding(b.var, If(cond, tb, fb, value.struct_info, span=value.span), span=b.span))
            return True
        value = self.resolve(b.value)
        value = self.rewrite(b.var, value)
        if is_leaf(value) and not isinstance(value, Tuple) and self.alias(b.var, value):
            return True
        if value is b.value:
            self.emit(b)
            return False
        self.emit(VarBinding(b.var, value, span=b.span))
        return True

    # -- aliases ----------------------------------------------------------------
    def alias(self, var: Var, target) -> bool:
        """Drop `var = target`, making uses of var read target; False when that would break scoping."""
        if not isinstance(target, Var):
            self.sub[var] = target
            return True
        if target.struct_info != var.struct_info:
            return False
        if isinstance(var, DataflowVar) or not isinstance(target, DataflowVar):
            self.sub[var] = target
            return True
        # An output var aliasing a dataflow var of this block: bind the output var in its place.
        pos = self.position.get(target)
        if pos is None or target in self.promoted:
            return False
        old = self.out[pos]
        self.out[pos] = VarBinding(var, old.value, span=old.span)
        del self.position[target]
        self.position[var] = pos
        self.defs[var] = old.value
        self.promoted[target] = var
        self.sub[target] = var
        return True

    # -- patterns ------------------------------------------------------------------
    def rewrite(self, var: Var, value):
        if isinstance(value, TupleGetItem):
            tup = value.tuple_value
            known = tup if isinstance(tup, Tuple) else self.defs.get(tup)
            if isinstance(known, Tuple):
                return self.resolve(known.fields[value.index])
            return value
        if _op_name(value) == _PERMUTE:
            return self.permute(var, value)
        return value

    def permute(self, var: Var, call: Call):
        axes = _axes(call)
        if axes is None:
            return call
        if axes == tuple(range(len(axes))):
            return call.args[0]
        src = call.args[0]
        inner = self.defs.get(src)
        if _op_name(inner) == _PERMUTE:
            inner_axes = _axes(inner)
            if inner_axes is not None:
                composed = tuple(inner_axes[a] for a in axes)
                base = self.resolve(inner.args[0])
                if composed == tuple(range(len(composed))):
                    return base
                return Call(call.op, (base,), {**call.attrs, "axes": composed}, call.struct_info, span=call.span)
        if _op_name(inner) == _MATMUL and _swaps_last_two(axes) and self.uses.get(src, 0) == 1:
            return self.matmul_transpose(call, inner) or call
        return call

    def matmul_transpose(self, call: Call, mm: Call):
        """permute(matmul(a, b)) -> matmul(permute(b), permute(a)), when a transpose cancels on the way."""
        a, b = (self.resolve(x) for x in mm.args)
        sa, sb = a.struct_info, b.struct_info
        if not (isinstance(sa, TensorStructInfo) and isinstance(sb, TensorStructInfo)) or sa.ndim < 2 or sb.ndim < 2:
            return None
        ta, tb = self.transposed_source(a), self.transposed_source(b)
        if ta is None and tb is None:
            return None
        new_b = tb if tb is not None else self.emit_transpose(b)
        new_a = ta if ta is not None else self.emit_transpose(a)
        return Call(mm.op, (new_b, new_a), dict(mm.attrs), call.struct_info, span=call.span)

    def transposed_source(self, x):
        """y when x = permute_dims(y) swapping the last two axes."""
        d = self.defs.get(x)
        if _op_name(d) == _PERMUTE and _swaps_last_two(_axes(d)):
            return self.resolve(d.args[0])
        return None

    def emit_transpose(self, x):
        n = x.struct_info.ndim
        call = self.bb.normalize(get_op(_PERMUTE)(x, axes=list(range(n - 2)) + [n - 1, n - 2]))
        cls = DataflowVar if isinstance(x, DataflowVar) or self.dataflow else Var
        var = cls("lv", call.struct_info)
        self.emit(VarBinding(var, call))
        return var


def _count_uses(func: Function) -> dict:
    uses: dict = {}
    reads: list = []
    stack = [func.body]
    while stack:
        seq = stack.pop()
        for block in seq.blocks:
            for b in block.bindings:
                if isinstance(b.value, If):
                    stack.extend((b.value.true_branch, b.value.false_branch))
                    reads.clear()
                    read_vars(b.value.cond, reads)
                else:
                    reads.clear()
                    read_vars(b.value, reads)
                for v in reads:
                    uses[v] = uses.get(v, 0) + 1
        reads.clear()
        read_vars(seq.body, reads)
        for v in reads:
            uses[v] = uses.get(v, 0) + 1
    return uses


def _reads_any(value, names: dict) -> bool:
    reads: list = []
    read_vars(value, reads)
    return any(v in names for v in reads)


def _rename(value, vmap: dict):
    return substitute(value, vmap)


def _demote(seq: SeqExpr) -> SeqExpr:
    """Make block outputs that nothing after their dataflow block reads into dataflow vars again."""
    reads: list = []
    read_vars(seq.body, reads)
    later = set(reads)
    blocks = list(seq.blocks)
    changed = False
    for k in range(len(blocks) - 1, -1, -1):
        block = blocks[k]
        if isinstance(block, DataflowBlock):
            vmap = {
                b.var: DataflowVar(b.var.name_hint, b.var.struct_info, span=b.var.span)
                for b in block.bindings
                if not isinstance(b.var, DataflowVar) and b.var not in later
            }
            if vmap:
                block = DataflowBlock(
                    tuple(VarBinding(vmap.get(b.var, b.var), substitute(b.value, vmap), span=b.span) for b in block.bindings),
                    span=block.span,
                )
                blocks[k] = block
                changed = True
        for b in block.bindings:
            reads.clear()
            read_vars(b.value, reads)
            later.update(reads)
    if not changed:
        return seq
    return SeqExpr(tuple(blocks), seq.body, seq.struct_info, span=seq.span)


def simplify_function(func: Function) -> Function:
    """`func` with trivial bindings removed, transpose patterns simplified, and block outputs nothing
    reads after their block turned back into dataflow vars (run DCE afterwards)."""
    body = _demote(_Simplifier(func).seq(func.body))
    if body is func.body:
        return func
    return attrs.evolve(func, body=body)


@function_pass(name="simplify")
class Simplify:
    """Remove var-to-var and tuple-projection bindings, cancel transposes, rewrite transposed matmuls."""

    def transform_function(self, func: Function, mod: IRModule, ctx) -> Function:
        return simplify_function(func)
