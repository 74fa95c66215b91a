"""Expressions: immutable nodes compared by identity; programs are compared with structural_equal."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from retrograd.errors import Span
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.nested import fold
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
)

# eq=False: nodes compare and hash by identity (fast memo tables); programs compare structurally.
_node = attrs.frozen(eq=False, repr=False)
_span = attrs.field(default=None, kw_only=True)


class Expr:
    """Base of all expressions. `struct_info` is None until the BlockBuilder normalizes the node."""

    __slots__ = ()

    def __repr__(self) -> str:
        name = getattr(self, "name_hint", None)
        label = f" {name!r}" if name is not None else ""
        return f"<{type(self).__name__}{label} at {id(self):#x}: {getattr(self, 'struct_info', None)}>"


class Op:
    """An operator (`relax.add`); the ops package subclasses it with the full definition."""

    name: str

    def infer_struct_info(self, call: "Call", ctx) -> StructInfo:  # pragma: no cover - overridden
        raise NotImplementedError


@_node
class Var(Expr):
    """A variable bound by a binding or a function parameter; identity is the variable."""

    name_hint: str
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class DataflowVar(Var):
    """A variable local to a dataflow block."""


@_node
class GlobalVar(Expr):
    """A reference to a function of the module, by name."""

    name_hint: str
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class Constant(Expr):
    """A tensor literal."""

    data: np.ndarray
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class ShapeExpr(Expr):
    """A shape value `R.shape([2, n])`."""

    values: tuple = attrs.field(converter=tuple)
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class PrimValue(Expr):
    """A scalar primitive value `R.prim_value(1)`."""

    value: int | float | bool
    dtype: str = "int64"
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class StringImm(Expr):
    """A string literal `R.str("...")`."""

    value: str
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class Tuple(Expr):
    """A tuple of expressions."""

    fields: tuple = attrs.field(converter=tuple)
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class TupleGetItem(Expr):
    """`t[i]`."""

    tuple_value: Expr
    index: int
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class Call(Expr):
    """A call of an Op (with attributes) or of a module function (a GlobalVar)."""

    op: Any  # Op | GlobalVar
    args: tuple = attrs.field(converter=tuple)
    attrs: dict = attrs.field(factory=dict)
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class SeqExpr(Expr):
    """Binding blocks followed by a result expression."""

    blocks: tuple = attrs.field(converter=tuple)
    body: Expr
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class If(Expr):
    """A conditional; each branch is a SeqExpr."""

    cond: Expr
    true_branch: SeqExpr
    false_branch: SeqExpr
    struct_info: StructInfo | None = None
    span: Span | None = _span


@_node
class Function(Expr):
    """A Relax function. attrs holds e.g. {"global_symbol": "main"}; `private`/`pure` are fields."""

    params: tuple = attrs.field(converter=tuple)
    body: SeqExpr
    ret_struct_info: StructInfo | None = None
    is_pure: bool = True
    private: bool = False
    attrs: dict = attrs.field(factory=dict)
    struct_info: StructInfo | None = None
    span: Span | None = _span

    def __attrs_post_init__(self):
        # An unannotated function returns what its body computes; filling it keeps printing lossless.
        if self.ret_struct_info is None and self.body.struct_info is not None:
            object.__setattr__(self, "ret_struct_info", self.body.struct_info)
        if self.struct_info is None and all(p.struct_info is not None for p in self.params):
            ret = self.ret_struct_info or self.body.struct_info or ObjectStructInfo()
            sinfo = FuncStructInfo(tuple(p.struct_info for p in self.params), ret, self.is_pure)
            object.__setattr__(self, "struct_info", sinfo)

    def script(self, name: str | None = None) -> str:
        """The function as a script of its own, `@R.function def name(...)` (TVM's `func.script()`);
        named `name`, else its `global_symbol`, else its name in the module it was last put in."""
        from retrograd.ir.module import function_script  # module.py imports this file

        return function_script(self, name)

    def show(self, file=None) -> None:
        """Print `script()`, highlighted on a terminal when pygments is installed."""
        from retrograd.ir.module import show

        show(self.script(), file)


LEAF_TYPES = (Var, GlobalVar, Constant, ShapeExpr, PrimValue, StringImm)
# The exact classes of leaves, for `cls in LEAF_CLASSES` and `LEAF_CLASSES.issuperset(map(type, args))`.
LEAF_CLASSES = frozenset(LEAF_TYPES) | {DataflowVar}


def is_leaf(expr: Expr) -> bool:
    """Leaves may appear as call arguments in normal form; so may tuples of leaves (nested to any depth:
    walked with a stack)."""
    if isinstance(expr, LEAF_TYPES):
        return True
    if not isinstance(expr, Tuple):
        return False
    stack = [expr]
    while stack:
        for f in stack.pop().fields:
            if isinstance(f, Tuple):
                stack.append(f)
            elif not isinstance(f, LEAF_TYPES):
                return False
    return True


def tuple_fields_of(expr: Expr) -> tuple:
    """The children of an expression in a nest of tuples: a tuple's fields, nothing for any other."""
    return expr.fields if expr.__class__ is Tuple else ()


def tuple_parts(expr: Expr) -> tuple:
    """The children of an expression in a nest of tuples and getitems: a tuple's fields, a getitem's
    tuple, nothing for any other expression (those are the nest's leaves)."""
    cls = expr.__class__
    if cls is Tuple:
        return expr.fields
    if cls is TupleGetItem:
        return (expr.tuple_value,)
    return ()


def map_tuple_nest(expr: Expr, leaf, rebuild, memo: dict | None = None) -> Expr:
    """`expr` with `leaf(e)` in place of every leaf of its nest of tuples and getitems, without
    recursion (tuples nest to any depth). A tuple or getitem whose children all came back unchanged is
    kept; others become `rebuild(node, children)`. `memo`: results by id, kept across calls."""
    if expr.__class__ is not Tuple and expr.__class__ is not TupleGetItem:
        return leaf(expr)

    def combine(e, kids):
        if e.__class__ is Tuple or e.__class__ is TupleGetItem:
            old = tuple_parts(e)
            return e if all(a is b for a, b in zip(kids, old)) else rebuild(e, kids)
        return leaf(e)

    return fold(expr, tuple_parts, combine, memo=memo)


_CONSTANTS: dict = {}  # see const
_CONSTANTS_SIZE = 4096


def const(value, dtype: str | None = None) -> Constant:
    """A constant with struct info; scalars default to int32 / float32 like R.const. A Python scalar's
    constant is made once and shared (constants are immutable leaves): gradient rules ask for the same
    zeros and ones at every binding."""
    cls = value.__class__
    if (cls is float or cls is int or cls is bool) and (dtype is None or dtype.__class__ is str):
        # repr tells -0.0 from 0.0 (equal keys otherwise) and makes NaN a key equal to itself.
        key = (cls, repr(value), dtype)
        hit = _CONSTANTS.get(key)
        if hit is None:
            if len(_CONSTANTS) >= _CONSTANTS_SIZE:
                _CONSTANTS.clear()
            hit = _CONSTANTS[key] = _new_const(value, dtype)
        return hit
    return _new_const(value, dtype)


def _new_const(value, dtype: str | None) -> Constant:
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32"
        elif isinstance(value, float):
            dtype = "float32"
    arr = np.asarray(value, dtype=None if dtype is None else numpy_dtype(dtype))  # bfloat16 / float8 via ml_dtypes
    arr.setflags(write=False)
    return Constant(arr, TensorStructInfo(arr.shape, str(arr.dtype)))


def prim_value(value, dtype: str | None = None) -> PrimValue:
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
    return PrimValue(value, dtype, PrimStructInfo(dtype, value))


def shape_expr(values) -> ShapeExpr:
    values = tuple(v if isinstance(v, str) else int(v) for v in values)
    return ShapeExpr(values, ShapeStructInfo(values))


# Constructors for the hot paths of passes that build thousands of nodes (Gradient's replayed rules, the
# clean-up): attrs' generated __init__ of a frozen class sets each field through a bound setattr and runs
# the converters; these set the slots directly (half the time) and take what the converters would give.
_new = object.__new__
_call_op, _call_args, _call_attrs, _call_sinfo, _call_span = (
    getattr(Call, f).__set__ for f in ("op", "args", "attrs", "struct_info", "span")
)
_var_name, _var_sinfo, _var_span = (getattr(Var, f).__set__ for f in ("name_hint", "struct_info", "span"))


def new_call(op, args: tuple, attrs: dict, struct_info, span=None) -> Call:
    """`Call(op, args, attrs, struct_info, span=span)`, `args` a tuple already."""
    call = _new(Call)
    _call_op(call, op)
    _call_args(call, args)
    _call_attrs(call, attrs)
    _call_sinfo(call, struct_info)
    _call_span(call, span)
    return call


def new_var(cls: type, name_hint: str, struct_info, span=None) -> Var:
    """`cls(name_hint, struct_info, span=span)` for cls Var or DataflowVar."""
    var = _new(cls)
    _var_name(var, name_hint)
    _var_sinfo(var, struct_info)
    _var_span(var, span)
    return var
