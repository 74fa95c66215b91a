"""ExprVisitor / ExprMutator: memoized, iterative over bindings, rebuilding only what changed."""

from __future__ import annotations

import contextlib
import sys

import attrs

from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
    Expr,
    Function,
    GlobalVar,
    If,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    map_tuple_nest,
)

_METHOD = {
    Var: "visit_var",
    DataflowVar: "visit_var",
    GlobalVar: "visit_global_var",
    Constant: "visit_constant",
    ShapeExpr: "visit_shape_expr",
    PrimValue: "visit_prim_value",
    StringImm: "visit_string_imm",
    Tuple: "visit_tuple",
    TupleGetItem: "visit_tuple_getitem",
    Call: "visit_call",
    If: "visit_if",
    SeqExpr: "visit_seq_expr",
    Function: "visit_function",
}


class ExprVisitor:
    """Walks an expression; override visit_* methods. Each node is visited once. A tuple's nested
    tuples are walked by its visit_tuple (with a stack: they nest to any depth), not through visit_expr."""

    def __init__(self):
        self._seen: set[int] = set()

    def visit_expr(self, expr: Expr) -> None:
        key = id(expr)
        if key in self._seen and not isinstance(expr, Var):
            return
        self._seen.add(key)
        getattr(self, _METHOD[type(expr)])(expr)

    def visit_var(self, var: Var) -> None:
        pass

    def visit_var_def(self, var: Var) -> None:
        pass

    def visit_global_var(self, gv: GlobalVar) -> None:
        pass

    def visit_constant(self, c: Constant) -> None:
        pass

    def visit_shape_expr(self, s: ShapeExpr) -> None:
        pass

    def visit_prim_value(self, p: PrimValue) -> None:
        pass

    def visit_string_imm(self, s: StringImm) -> None:
        pass

    def visit_tuple(self, t: Tuple) -> None:
        # Nested tuples are walked here, with a stack (they nest to any depth); each is visited once.
        stack = list(reversed(t.fields))
        while stack:
            f = stack.pop()
            if f.__class__ is Tuple:
                if id(f) not in self._seen:
                    self._seen.add(id(f))
                    stack.extend(reversed(f.fields))
            else:
                self.visit_expr(f)

    def visit_tuple_getitem(self, t: TupleGetItem) -> None:
        self.visit_expr(t.tuple_value)

    def visit_call(self, call: Call) -> None:
        if isinstance(call.op, GlobalVar):
            self.visit_expr(call.op)
        for a in call.args:
            self.visit_expr(a)

    def visit_if(self, node: If) -> None:
        self.visit_expr(node.cond)
        self.visit_expr(node.true_branch)
        self.visit_expr(node.false_branch)

    def visit_seq_expr(self, seq: SeqExpr) -> None:
        for block in seq.blocks:
            self.visit_block(block)
        self.visit_expr(seq.body)

    def visit_block(self, block: BindingBlock) -> None:
        for binding in block.bindings:
            self.visit_binding(binding)

    def visit_binding(self, binding: VarBinding) -> None:
        self.visit_expr(binding.value)
        self.visit_var_def(binding.var)

    def visit_function(self, func: Function) -> None:
        for p in func.params:
            self.visit_var_def(p)
        self.visit_expr(func.body)


class ExprMutator:
    """Rewrites an expression through a BlockBuilder, so every new node is typed and in normal form.

    The per-binding hook is `rewrite_binding(binding)`: return the new value (the same object if
    unchanged), or None to drop the binding (set `var_remap[binding.var]` to what its uses read
    instead). It may emit bindings before the current one with `self.builder.emit`, and sees the
    open block's emitted bindings through `self.builder.current_bindings()`; `finish_block()` runs
    before each block closes. A binding whose new value has other struct info gets a fresh var and
    its uses are remapped. Nodes that did not change are returned as is.
    """

    def __init__(self, mod=None):
        self.mod = mod
        self.builder = BlockBuilder(mod)
        self.var_remap: dict[Var, Expr] = {}
        self._memo: dict[int, tuple[Expr, Expr]] = {}
        self._nest_memo: dict = {}  # see visit_tuple
        self._nest_memo_size = 0
        # Without a visit_var override, a variable is looked up in var_remap inline (the hot path).
        self._remap_inline = type(self).visit_var is ExprMutator.visit_var

    def visit_expr(self, expr: Expr) -> Expr:
        if isinstance(expr, Var):
            return self.visit_var(expr)
        hit = self._memo.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        out = getattr(self, _METHOD[type(expr)])(expr)
        self._memo[id(expr)] = (expr, out)
        return out

    def visit_var(self, var: Var) -> Expr:
        return self.var_remap.get(var, var)

    def visit_global_var(self, gv: GlobalVar) -> Expr:
        return gv

    def visit_constant(self, c: Constant) -> Expr:
        return c

    def visit_shape_expr(self, s: ShapeExpr) -> Expr:
        return s

    def visit_prim_value(self, p: PrimValue) -> Expr:
        return p

    def visit_string_imm(self, s: StringImm) -> Expr:
        return s

    def visit_tuple(self, t: Tuple) -> Expr:
        if not any(f.__class__ is Tuple for f in t.fields):
            fields = self._visit_all(t.fields)
            if fields is None:
                return t
            return self.builder.normalize(Tuple(fields, span=t.span))
        # A nest of tuples (any depth): rebuilt without recursion, then normalized at once. Results are
        # kept by node while var_remap is unchanged (it only grows): bindings may share the levels of
        # one deep nest, and rebuilding each afresh would be quadratic.
        if len(self.var_remap) != self._nest_memo_size:
            self._nest_memo, self._nest_memo_size = {}, len(self.var_remap)
        out = map_tuple_nest(t, self.visit_expr, _rebuild_untyped, self._nest_memo)
        return t if out is t else self.builder.normalize(out)

    def visit_tuple_getitem(self, t: TupleGetItem) -> Expr:
        tup = self.visit_expr(t.tuple_value)
        if tup is t.tuple_value:
            return t
        return self.builder.normalize(TupleGetItem(tup, t.index, span=t.span))

    def visit_call(self, call: Call) -> Expr:
        op = self.visit_expr(call.op) if isinstance(call.op, GlobalVar) else call.op
        args = self._visit_all(call.args)
        if op is call.op and args is None:
            return call
        return self.builder.normalize(Call(op, call.args if args is None else args, call.attrs, span=call.span))

    def _visit_all(self, items: tuple) -> tuple | None:
        """The visited items, or None when every one came back unchanged (the common case, kept cheap)."""
        out = None
        remap = self.var_remap if self._remap_inline else None
        for i, a in enumerate(items):
            b = remap.get(a, a) if remap is not None and isinstance(a, Var) else self.visit_expr(a)
            if b is not a:
                if out is None:
                    out = list(items)
                out[i] = b
        return None if out is None else tuple(out)

    def visit_if(self, node: If) -> Expr:
        cond = self.visit_expr(node.cond)
        tb = self.visit_expr(node.true_branch)
        fb = self.visit_expr(node.false_branch)
        if cond is node.cond and tb is node.true_branch and fb is node.false_branch:
            return node
        return self.builder.normalize(If(cond, tb, fb, span=node.span))

    def visit_seq_expr(self, seq: SeqExpr) -> Expr:
        bb = self.builder
        bb.begin_scope()
        changed = False
        for block in seq.blocks:
            changed |= self.visit_block(block)
        body = self.visit_expr(seq.body)
        new = bb.end_scope(body)
        if not changed and body is seq.body and len(new.blocks) == len(seq.blocks):
            return seq
        return new

    def visit_block(self, block: BindingBlock) -> bool:
        """Re-emit the block's bindings; True if anything changed."""
        bb = self.builder
        bb.begin_block(dataflow=isinstance(block, DataflowBlock))
        emitted = bb.current_bindings()
        changed = False
        for binding in block.bindings:
            changed |= self.visit_binding(binding)
        changed |= self.finish_block()
        if len(emitted) != len(block.bindings):
            changed = True
        bb.end_block()
        return changed

    def finish_block(self) -> bool:
        """Called before the open block closes (its bindings: `builder.current_bindings()`); True if it changed them."""
        return False

    def visit_binding(self, binding: VarBinding) -> bool:
        """Emit the rewritten binding; True if it changed."""
        value = self.rewrite_binding(binding)
        if value is binding.value:
            # The open block's list, appended to directly: this is the no-op walk's hot path.
            self.builder.current_bindings().append(binding)
            return False
        if value is None:  # dropped
            return True
        self.emit_rewritten(binding, self.builder.normalize(value))
        return True

    def emit_rewritten(self, binding: VarBinding, value: Expr) -> Var:
        """Emit `binding` with a new, normalized value; a var of other struct info is replaced and remapped."""
        var = binding.var
        if value.struct_info != var.struct_info:
            var = type(var)(var.name_hint, value.struct_info, span=var.span)
            self.var_remap[binding.var] = var
        self.builder.emit_binding(VarBinding(var, value, span=binding.span))
        return var

    def rewrite_binding(self, binding: VarBinding) -> Expr | None:
        """The new value of a binding (the same object if unchanged, None to drop it)."""
        value = binding.value
        if isinstance(value, Var):
            return self.visit_var(value)
        # No memo here: in normal form a bound value is not shared, and the lookup would cost a
        # third of the no-op walk.
        return getattr(self, _METHOD[type(value)])(value)

    def visit_function(self, func: Function) -> Expr:
        with stack_room(if_depth(func)):
            body = self.visit_expr(func.body)
        params = self._visit_all(func.params)
        if body is func.body and params is None:
            return func
        if params is None:
            return attrs.evolve(func, body=body, attrs=dict(func.attrs))
        # New parameters may have other struct info: let the signature be recomputed.
        return attrs.evolve(func, params=params, body=body, attrs=dict(func.attrs), struct_info=None)


def _rebuild_untyped(node: Tuple | TupleGetItem, kids) -> Expr:
    """A rebuilt node of a tuple nest, its struct info left for the builder to infer."""
    if isinstance(node, Tuple):
        return Tuple(kids, span=node.span)
    return TupleGetItem(kids[0], node.index, span=node.span)


def if_depth(func: Function) -> int:
    """How deeply Ifs nest in `func`'s body (0 without any), found without recursion."""
    return seq_if_depth(func.body)


def seq_if_depth(seq: SeqExpr) -> int:
    """How deeply Ifs nest in `seq` (0 without any), found without recursion."""
    deepest = 0
    stack = [(seq, 0)]
    while stack:
        seq, depth = stack.pop()
        deepest = max(deepest, depth)
        for block in seq.blocks:
            for b in block.bindings:
                if isinstance(b.value, If):
                    stack.append((b.value.true_branch, depth + 1))
                    stack.append((b.value.false_branch, depth + 1))
    return deepest


def module_if_depth(mod) -> int:
    """The deepest If nest of any function of `mod`."""
    return max((if_depth(f) for f in mod.functions().values() if isinstance(f, Function)), default=0)


# ExprMutator recurses once per nested If (a dozen frames a level, with subclass hooks); bindings are
# iterated. So do the printer, the parser's conversion, analyses, lowering and the executor (3-6
# frames a level). Python 3.11+ runs Python-to-Python calls without C recursion, so a raised limit
# costs no C stack as long as no C function sits in the cycle (tuple(generator) and all(generator)
# did, in ir/copy.py and passes/dce.py): every path runs a 1000-deep nest in a 64 KiB thread. The
# parser reads nests up to MAX_INDENTS (parser/lexer.py) deep; tests/passes/test_deep_if.py.
_FRAMES_PER_IF = 16
# What any caller is assumed to have spare: shallower nests leave the limit alone.
_SPARE_FRAMES = 200


class _Room:
    """Python's recursion limit raised by `need` frames while inside."""

    __slots__ = ("need", "old")

    def __init__(self, need: int):
        self.need = need

    def __enter__(self):
        self.old = sys.getrecursionlimit()
        sys.setrecursionlimit(self.old + self.need)

    def __exit__(self, *exc):
        sys.setrecursionlimit(self.old)


_NO_ROOM = contextlib.nullcontext()  # reusable: shallow nests (every call of a hot path) enter nothing


def stack_room(if_levels: int):
    """A context raising Python's recursion limit by what `if_levels` nested Ifs need, for the duration."""
    need = if_levels * _FRAMES_PER_IF
    return _Room(need) if need > _SPARE_FRAMES else _NO_ROOM
