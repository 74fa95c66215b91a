"""Common subexpression elimination: a pure op call computed twice in reach of the first is bound once."""

from __future__ import annotations

import numpy as np

from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
    Expr,
    Function,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    tuple_fields_of,
)
from retrograd.ir.functor import ExprMutator
from retrograd.ir.module import IRModule
from retrograd.ir.nested import preorder
from retrograd.passes.barriers import BARRIER_OPS
from retrograd.passes.infra import function_pass

# Constants larger than this are keyed by identity: hashing their bytes would cost more than it saves.
_SMALL_CONSTANT = 64


def _arg_key(arg: Expr):
    if isinstance(arg, Var):
        return arg
    if isinstance(arg, Constant):
        data = arg.data if arg.data.__class__ is np.ndarray else np.asarray(arg.data)
        if data.size <= _SMALL_CONSTANT:
            # The dtype object itself (hashable, compared by value): str(dtype) cost more than the rest.
            return ("const", data.dtype, data.shape, data.tobytes())
        return ("const-id", id(arg))
    if isinstance(arg, ShapeExpr):
        return ("shape", tuple(arg.values))
    if isinstance(arg, PrimValue):
        return ("prim", arg.dtype, arg.value)
    if isinstance(arg, StringImm):
        return ("str", arg.value)
    if isinstance(arg, Tuple):
        # Flat, each tuple as its arity before its fields: tuples nest to any depth, and building or
        # hashing a nested key would recurse.
        return ("tuple",) + tuple(("tuple", len(e.fields)) if isinstance(e, Tuple) else _arg_key(e) for e in preorder(arg, tuple_fields_of))
    return ("id", id(arg))


def value_key(value: Expr):
    """A hashable key equal for two values that compute the same thing, or None if not eligible."""
    if isinstance(value, Call):
        op = value.op
        # A barrier call is unique by definition: merging two recomputations would keep one alive.
        if not isinstance(op, Op) or not getattr(op, "pure", True) or getattr(op, "name", None) in BARRIER_OPS:
            return None
        try:
            attrs = tuple(value.attrs.items())
            hash(attrs)
        except TypeError:
            return None
        return (op.name, tuple([a if isinstance(a, Var) else _arg_key(a) for a in value.args]), attrs)
    if isinstance(value, TupleGetItem) and isinstance(value.tuple_value, Var):
        return ("getitem", value.tuple_value, value.index)
    return None


class CallKeys:
    """`value_key` for many values, remembering what calls share: each op's eligibility, each attribute
    dict's items and each non-variable argument's key (by identity, the objects kept alive here). The
    gradient's replayed rules share these objects across thousands of calls."""

    def __init__(self):
        self.ops: dict = {}  # op -> its name, or None when its calls get no key
        self.attrs: dict = {}  # id(attrs dict) -> (the dict, its items, or None when unhashable)
        self.leaves: dict = {}  # id(argument) -> (the argument, its key)

    def op_name(self, op):
        """The op's name when its calls may be keyed, else None."""
        try:
            return self.ops[op]
        except KeyError:
            ok = isinstance(op, Op) and getattr(op, "pure", True) and getattr(op, "name", None) not in BARRIER_OPS
            name = self.ops[op] = op.name if ok else None
            return name
        except TypeError:  # an unhashable op (not an Op)
            return None

    def key(self, value: Expr):
        """value_key(value)."""
        if value.__class__ is not Call:
            return value_key(value)
        name = self.op_name(value.op)
        if name is None:
            return None
        attrs = value.attrs
        hit = self.attrs.get(id(attrs))
        if hit is None or hit[0] is not attrs:
            items = tuple(attrs.items())
            try:
                hash(items)
            except TypeError:
                items = None
            hit = self.attrs[id(attrs)] = (attrs, items)
        if hit[1] is None:
            return None
        leaves = self.leaves
        parts = []
        for a in value.args:
            cls = a.__class__
            if cls is Var or cls is DataflowVar:
                parts.append(a)
                continue
            known = leaves.get(id(a))
            if known is None or known[0] is not a:
                known = leaves[id(a)] = (a, a if isinstance(a, Var) else _arg_key(a))
            parts.append(known[1])
        return (name, tuple(parts), hit[1])


class _Eliminator(ExprMutator):
    """Keeps one table per scope; entries bound to DataflowVars die with their block."""

    def __init__(self, mod: IRModule | None):
        super().__init__(mod)
        self.tables: list[dict] = [{}]

    def _find(self, key):
        for table in reversed(self.tables):
            var = table.get(key)
            if var is not None:
                return var
        return None

    def visit_seq_expr(self, seq: SeqExpr) -> Expr:
        self.tables.append({})
        try:
            return super().visit_seq_expr(seq)
        finally:
            self.tables.pop()

    def visit_block(self, block: BindingBlock) -> bool:
        changed = super().visit_block(block)
        if isinstance(block, DataflowBlock):
            top = self.tables[-1]
            for key in [k for k, v in top.items() if isinstance(v, DataflowVar)]:
                del top[key]
        return changed

    def visit_binding(self, binding: VarBinding) -> bool:
        # One method per binding (the mutator's rewrite, the lookup, the emission): this is the hot path.
        value = self.rewrite_binding(binding)
        key = value_key(value)
        var = binding.var
        if key is not None:
            first = self._find(key)
            # An output var cannot be replaced by a dataflow var: uses after the block could not see it.
            if first is not None and (isinstance(var, DataflowVar) or not isinstance(first, DataflowVar)):
                if first.struct_info == var.struct_info:
                    self.var_remap[var] = first
                    return True
        if value is binding.value:
            self.builder.current_bindings().append(binding)
            changed = False
        else:
            var = self.emit_rewritten(binding, self.builder.normalize(value))
            changed = True
        if key is not None:
            top = self.tables[-1]
            known = top.get(key)
            # Prefer an output var as the representative: it outlives the dataflow block.
            if known is None or (isinstance(known, DataflowVar) and not isinstance(var, DataflowVar)):
                top[key] = var
        return changed


def eliminate_common_subexpressions(func: Function, mod: IRModule | None = None) -> Function:
    """`func` with repeated pure computations bound once (If branches see the enclosing bindings)."""
    return _Eliminator(mod).visit_expr(func)


@function_pass(name="cse")
class CommonSubexprElimination:
    """Bind each repeated pure op call or tuple projection once, in every function."""

    def transform_function(self, func: Function, mod: IRModule, ctx) -> Function:
        return eliminate_common_subexpressions(func, mod)
