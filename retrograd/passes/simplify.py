"""Algebraic simplification and binding canonicalization: aliases, tuple projections, transposes, matmul transposes."""

from __future__ import annotations

import attrs

from retrograd.ir.vars import read_vars, use_counts, used_vars
from retrograd.ir.block import DataflowBlock, VarBinding, new_binding
from retrograd.ir.copy import substitute
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
    new_call,
    new_var,
)
from retrograd.ir.functor import ExprMutator
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import get as get_op
from retrograd.passes.infra import function_pass

PERMUTE = "relax.permute_dims"
MATMUL = "relax.matmul"


def _op_name(value) -> str | None:
    return getattr(value.op, "name", None) if isinstance(value, Call) else None


def permute_axes(call: Call) -> tuple | None:
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


def swaps_last_two(call: Call) -> bool:
    """Whether a permute_dims call swaps the last two axes of its argument and keeps the others."""
    return _swaps_last_two(permute_axes(call))


def transpose_parts(builder, x, cache: dict) -> tuple:
    """(op, attributes, struct info) of permute_dims(x) swapping x's last two axes, normalized by `builder`
    once per struct info object of x (kept in `cache`, by identity: inference depends on the argument's
    struct info alone, and the vars of a gradient's replayed rules share theirs)."""
    sinfo = x.struct_info
    known = cache.get(id(sinfo))
    if known is None or known[0] is not sinfo:
        n = sinfo.ndim
        call = builder.normalize(get_op(PERMUTE)(x, axes=list(range(n - 2)) + [n - 1, n - 2]))
        known = cache[id(sinfo)] = (sinfo, call.op, call.attrs, call.struct_info)
    return known[1:]


class Simplifier(ExprMutator):
    """One forward sweep. `var_remap` replaces removed variables by what they alias; `defs` gives the
    (rewritten) value of each remaining variable, for pattern matching."""

    def __init__(self, func: Function):
        super().__init__()
        self.init_tables(use_counts(func))

    def init_tables(self, uses: dict) -> None:
        """The sweep's tables; `uses` counts each variable's reads (cleanup's one walk counts them itself)."""
        self.defs: dict = {}
        self.uses: dict = uses
        self.position: dict = {}  # var -> index in the open block's bindings
        self.promoted: dict = {}  # dataflow var -> the output var now bound in its place
        self._resolved: dict = {}  # see resolve
        self._memo_size = 0
        self._transposes: dict = {}  # see transpose_parts
        self._axes: dict = {}  # see axes

    def resolve(self, expr):
        # Substitution keeps struct info as is: aliases have the struct info of what they replace.
        if not self.var_remap:
            return expr
        if not isinstance(expr, Tuple):
            return substitute(expr, self.var_remap)
        # Tuples are resolved with a memo while var_remap is unchanged (it only grows): the getitems of
        # a deep nest each resolve the next level, and resolving each afresh would be quadratic.
        if len(self.var_remap) != self._memo_size:
            self._resolved, self._memo_size = {}, len(self.var_remap)
        return substitute(expr, self.var_remap, self._resolved)

    def visit_block(self, block) -> bool:
        # If branches are simplified in the middle of their block: keep the outer block's state.
        saved = self.position, self.promoted
        self.position, self.promoted = {}, {}
        try:
            return super().visit_block(block)
        finally:
            self.position, self.promoted = saved

    def finish_block(self) -> bool:
        if not self.promoted:
            return False
        # Bindings emitted before a promotion still read the dataflow var: rename it (only
        # bindings after the first promoted one can read a promoted var).
        out = self.builder.current_bindings()
        promoted = self.promoted
        first = min(self.position[v] for v in promoted.values())
        disjoint = promoted.keys().isdisjoint
        for i in range(first + 1, len(out)):
            b = out[i]
            value = b.value
            # A call reading no promoted var directly nor through a tuple: most, found without a Python loop.
            if value.__class__ is Call and disjoint(value.args) and Tuple not in map(type, value.args):
                continue
            if _reads_any(value, promoted):
                out[i] = new_binding(b.var, substitute(value, promoted), b.span)
        return True

    def emit(self, binding: VarBinding) -> None:
        out = self.builder.current_bindings()
        self.position[binding.var] = len(out)
        out.append(binding)
        self.defs[binding.var] = binding.value

    def visit_binding(self, b: VarBinding) -> bool:
        """Emit the simplified binding; True if anything changed."""
        if isinstance(b.value, If):
            value = self.visit_if(b.value)
        else:
            value = self.rewrite(b.var, self.resolve(b.value))
            if not isinstance(value, Tuple) and is_leaf(value) and self.alias(b.var, value):
                return True
        if value is b.value:
            self.emit(b)
            return False
        self.emit(attrs.evolve(b, value=value))
        return True

    # -- aliases ----------------------------------------------------------------
    def alias(self, var: Var, target) -> bool:
        """Drop `var = target`, making uses of var read target; False when that would break scoping."""
        if not isinstance(target, Var):
            self.var_remap[var] = target
            return True
        if target.struct_info is not var.struct_info and target.struct_info != var.struct_info:
            return False
        if isinstance(var, DataflowVar) or not isinstance(target, DataflowVar):
            self.var_remap[var] = target
            return True
        return self.promote(var, target, self.builder.current_bindings())

    def promote(self, var: Var, target: DataflowVar, out: list) -> bool:
        """alias's last case: an output var aliasing a dataflow var of the open block (its bindings `out`)
        takes the dataflow var's binding; False when the block has none (or it was taken already)."""
        pos = self.position.get(target)
        if pos is None or target in self.promoted:
            return False
        old = out[pos]
        out[pos] = new_binding(var, old.value, old.span)
        del self.position[target]
        self.position[var] = pos
        self.defs[var] = old.value
        self.promoted[target] = var
        self.var_remap[target] = var
        return True

    # -- patterns ------------------------------------------------------------------
    def rewrite(self, var: Var, value):
        if isinstance(value, TupleGetItem):
            tup = value.tuple_value
            known = tup if isinstance(tup, Tuple) else self.defs.get(tup)
            if isinstance(known, Tuple):
                field = self.resolve(known.fields[value.index])
                # A tuple bound in a dataflow block may hold its dataflow vars: read outside, keep the getitem.
                reads: list = []
                read_vars(field, reads)
                if all(v.__class__ is not DataflowVar or v in self.position for v in reads):
                    return field
            return value
        if _op_name(value) == PERMUTE:
            return self.permute(var, value)
        return value

    def read_once(self, var) -> bool:
        """Whether one binding (or the result) reads `var`."""
        return self.uses.get(var, 0) == 1

    def permutation(self, call: Call) -> tuple:
        """(permute_axes(call), whether that is the identity, whether it swaps the last two axes), kept by
        attribute dict and rank (the replayed calls of a gradient share them); (None, False, False)
        when the rank is unknown."""
        attrs_, sinfo = call.attrs, call.struct_info
        ndim = sinfo.ndim if sinfo.__class__ is TensorStructInfo else None
        hit = self._axes.get(id(attrs_))
        if hit is not None and hit[0] is attrs_ and hit[1] == ndim:
            return hit[2]
        axes = permute_axes(call)
        info = (None, False, False) if axes is None else (axes, axes == tuple(range(len(axes))), _swaps_last_two(axes))
        self._axes[id(attrs_)] = (attrs_, ndim, info)
        return info

    def permute(self, var: Var, call: Call):
        axes, identity, swaps = self.permutation(call)
        if axes is None:
            return call
        if identity:
            return call.args[0]
        src = call.args[0]
        inner = self.defs.get(src)
        if inner.__class__ is not Call:
            return call
        name = getattr(inner.op, "name", None)
        if name == PERMUTE:
            inner_axes = self.permutation(inner)[0]
            if inner_axes is not None:
                composed = tuple(inner_axes[a] for a in axes)
                base = self.resolve(inner.args[0])
                if composed == tuple(range(len(composed))):
                    return base
                return attrs.evolve(call, args=(base,), attrs={**call.attrs, "axes": composed})
        elif name == MATMUL and swaps and self.read_once(src):
            return self.matmul_transpose(call, inner) or call
        return call

    def matmul_transpose(self, call: Call, mm: Call):
        """permute(matmul(a, b)) -> matmul(permute(b), permute(a)), when a transpose cancels on the way."""
        remap = self.var_remap
        a, b = (remap.get(x, x) if isinstance(x, Var) else self.resolve(x) for x in mm.args)
        sa, sb = a.struct_info, b.struct_info
        if not (isinstance(sa, TensorStructInfo) and isinstance(sb, TensorStructInfo)) or sa.ndim < 2 or sb.ndim < 2:
            return None
        ta, tb = self.transposed_source(a), self.transposed_source(b)
        if ta is None and tb is None:
            return None
        new_b = tb if tb is not None else self.emit_transpose(b)
        new_a = ta if ta is not None else self.emit_transpose(a)
        # mm's attribute dict itself (nodes never mutate theirs): CSE keys are remembered per dict.
        return new_call(mm.op, (new_b, new_a), mm.attrs, call.struct_info, call.span)

    def transposed_source(self, x):
        """y when x = permute_dims(y) swapping the last two axes."""
        d = self.defs.get(x)
        if _op_name(d) == PERMUTE and self.permutation(d)[2]:
            return self.resolve(d.args[0])
        return None

    def emit_transpose(self, x):
        op, attrs_, sinfo = transpose_parts(self.builder, x, self._transposes)
        call = new_call(op, (x,), attrs_, sinfo)
        var = new_var(DataflowVar if self.builder.in_dataflow else Var, "lv", call.struct_info)
        self.emit(new_binding(var, call))
        return var


def _flat_call(value) -> bool:
    """A call reading only leaves (no tuple argument): its reads are its Var arguments."""
    return value.__class__ is Call and not any(a.__class__ is Tuple for a in value.args)


def _reads_any(value, names: dict) -> bool:
    if _flat_call(value):  # the common case, without read_vars' walk
        return any(a in names for a in value.args)
    reads: list = []
    read_vars(value, reads)
    return any(v in names for v in reads)


def demotable_outputs(seq: SeqExpr) -> dict:
    """Block outputs that nothing after their dataflow block reads -> dataflow vars to bind instead."""
    later = used_vars(seq.body)
    reads: list = []
    memo: dict = {}  # see read_vars
    vmap: dict = {}
    for block in reversed(seq.blocks):
        if isinstance(block, DataflowBlock):
            for b in block.bindings:
                if not isinstance(b.var, DataflowVar) and b.var not in later:
                    vmap[b.var] = DataflowVar(b.var.name_hint, b.var.struct_info, span=b.var.span)
        for b in block.bindings:
            value = b.value
            if _flat_call(value):
                later.update(value.args)  # leaves that are not vars are never looked up: harmless
                continue
            reads.clear()
            read_vars(value, reads, memo)
            later.update(reads)
    return vmap


class _Demoter(ExprMutator):
    """Binds each demoted output var's value to its dataflow var; uses follow through var_remap."""

    def __init__(self, vmap: dict):
        super().__init__()
        self.demoted = vmap
        self.var_remap.update(vmap)

    def visit_binding(self, binding: VarBinding) -> bool:
        var = self.demoted.get(binding.var)
        if var is None:
            return super().visit_binding(binding)
        value = self.rewrite_binding(binding)
        self.builder.current_bindings().append(VarBinding(var, value, span=binding.span))
        return True


def simplify_function(func: Function) -> Function:
    """`func` with trivial bindings removed, transpose patterns simplified, and block outputs nothing
    reads after their block turned back into dataflow vars (run DCE afterwards)."""
    func = Simplifier(func).visit_expr(func)
    demoted = demotable_outputs(func.body)
    return _Demoter(demoted).visit_expr(func) if demoted else func


@function_pass(name="simplify")
class Simplify:
    """Remove var-to-var and tuple-projection bindings, cancel transposes, rewrite transposed matmuls."""

    def transform_function(self, func: Function, mod: IRModule, ctx) -> Function:
        return simplify_function(func)
