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
from retrograd.ops.registry import attrs_key, typed_key
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
        return ("prim", arg.dtype, typed_key(arg.value))  # 0.0 and -0.0 are equal but not the same
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
        # A barrier call is unique by definition: merging two recomputations would keep one alive (see _head).
        head = _head(value.op, value.attrs)
        if head is None:
            return None
        return (head[0], tuple([a if isinstance(a, Var) else _arg_key(a) for a in value.args]), head[1])
    if isinstance(value, TupleGetItem) and isinstance(value.tuple_value, Var):
        return ("getitem", value.tuple_value, value.index)
    return None


_PLAIN_VALUES = frozenset({type(None), str, bool, int})


class AttrKeys:
    """`attrs_key` of many attribute dicts, remembered by identity (the replayed calls of a gradient share
    their dicts, the dicts kept alive here) and, for dicts of plain values (None, strings, bools, ints:
    equal with equal types only when their typed keys are), by content (each parsed call has its own).
    `shared` gives one dict for all dicts of equal key, for copies to share."""

    def __init__(self):
        self.by_id: dict = {}  # id(dict) -> (the dict, (the first dict of its key, the key))
        self.by_content: dict = {}  # (items, value types) -> (the first dict, the key)
        self.by_key: dict = {}  # key -> (the first dict, the key), for other dicts
        self.empty: dict | None = None  # the first empty dict seen

    def __call__(self, given: dict):
        return self._entry(given)[1]

    def shared(self, given: dict) -> dict:
        """The first dict seen of given's key (given itself for a dict of unhashable values)."""
        if not given:  # the attributes of most ops: no key to build
            empty = self.empty
            if empty is None:
                empty = self.empty = self._entry(given)[0]
            return empty
        types = tuple(map(type, given.values()))
        if _PLAIN_VALUES.issuperset(types):  # _entry's content lookup: the usual hit, without the id table
            entry = self.by_content.get((tuple(given.items()), types))
            if entry is not None:
                return entry[0]
        return self._entry(given)[0]

    def _entry(self, given: dict) -> tuple:
        hit = self.by_id.get(id(given))
        if hit is not None and hit[0] is given:
            return hit[1]
        types = tuple(map(type, given.values()))
        if _PLAIN_VALUES.issuperset(types):
            content = (tuple(given.items()), types)
            entry = self.by_content.get(content)
            if entry is None:
                entry = self.by_content[content] = (given, attrs_key(given))
        else:
            key = attrs_key(given)
            entry = (given, None) if key is None else self.by_key.setdefault(key, (given, key))
        self.by_id[id(given)] = (given, entry)
        return entry


class CallKeys:
    """`value_key` for many values, remembering what calls share: each op and attribute dict's part of
    the key (as a number: (op name, attribute items) interned) and each non-variable argument's key (by
    identity, the objects kept alive here). The gradient's replayed rules share these objects across
    thousands of calls. Keys of calls are (head number, argument keys): equal exactly when value_key's are."""

    def __init__(self):
        self.heads: dict = {}  # id(attrs dict) -> (the dict, the op, its head number or None), the latest op
        # (id(attrs dict), op) -> the same, for every op: ops without attributes share one empty dict (see
        # AttrKeys.shared), and the calls of a network alternate between them.
        self.pairs: dict = {}
        self.numbers: dict = {}  # (op name, attribute items) -> head number
        self.leaves: dict = {}  # id(argument) -> (the argument, its key)
        self.attr_keys = AttrKeys()

    def key(self, value: Expr):
        """value_key(value), in its own form for calls."""
        if value.__class__ is not Call:
            return value_key(value)
        op, attrs = value.op, value.attrs
        hit = self.heads.get(id(attrs))
        head = hit[2] if hit is not None and hit[0] is attrs and hit[1] is op else self.head(op, attrs)
        if head is None:
            return None
        return (head, self.arg_keys(value.args))

    def arg_keys(self, args: tuple) -> tuple:
        """The arguments' part of a call's key."""
        leaves = self.leaves
        parts = []
        for a in args:
            cls = a.__class__
            if cls is Var or cls is DataflowVar:
                parts.append(a)
                continue
            known = leaves.get(id(a))
            if known is None or known[0] is not a:
                known = leaves[id(a)] = (a, a if isinstance(a, Var) else _arg_key(a))
            parts.append(known[1])
        return tuple(parts)

    def head(self, op, attrs: dict):
        """The head number of calls of `op` with `attrs` (None: such calls get no key): the lookup behind
        `heads`, which holds each dict's latest op only."""
        hit = self.pairs.get((id(attrs), op))
        if hit is None or hit[0] is not attrs:
            hit = self.pairs[id(attrs), op] = (attrs, op, self._number(op, attrs))
        self.heads[id(attrs)] = hit
        return hit[2]

    def _number(self, op, attrs: dict):
        head = _head(op, attrs, self.attr_keys)
        if head is None:
            return None
        return self.numbers.setdefault(head, len(self.numbers))


def _head(op, attrs: dict, attr_keys=attrs_key):
    """(the op's name, the attributes' typed items) of value_key, or None when a call gets no key: a call of a
    function, an impure op or a barrier, or unhashable attributes."""
    if not isinstance(op, Op) or not getattr(op, "pure", True) or getattr(op, "name", None) in BARRIER_OPS:
        return None
    items = attr_keys(attrs)  # typed: 0.0 and -0.0, or 1 and 1.0, compute different things
    if items is None:
        return None
    return op.name, items


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
