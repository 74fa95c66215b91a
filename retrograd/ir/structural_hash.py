"""Structural hashing consistent with structural_equal, and the value and symbolic-dim comparisons both use."""

from __future__ import annotations

import functools
import math
import re

import numpy as np

from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.dtypes import is_extension
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
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
)
from retrograd.ir.module import IRModule
from retrograd.ir.nested import fold
from retrograd.ir.struct_info import (
    FuncStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

__all__ = ["structural_hash", "value_equal", "value_key", "array_equal", "array_key", "dim_tokens", "is_dim_name"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+|\S")


@functools.lru_cache(maxsize=4096)
def dim_tokens(dim: str) -> tuple[str, ...]:
    """A symbolic dim's names, numbers and operators (`n * 2` -> `n`, `*`, `2`)."""
    return tuple(_TOKEN.findall(dim))


def is_dim_name(dim: str) -> bool:
    """True for a plain symbolic name, not an expression."""
    return _IDENT.fullmatch(dim) is not None


# Work-item kinds of the explicit stacks (no recursion over bindings: 100,000-binding functions).
_NODE, _DEF, _SINFO, _BLOCK, _BINDING, _ENTER_FUNC, _EXIT_FUNC = range(7)


# -- attribute values -------------------------------------------------------


def value_equal(x, y) -> bool:
    """Attribute / literal values: bools differ from ints, NaN equals NaN, lists equal tuples.

    Iterative: an attribute may nest hundreds of levels deep."""
    stack = [(x, y)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, list | tuple) and isinstance(y, list | tuple):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y))
        elif isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif not _scalar_equal(x, y):
            return False
    return True


def _scalar_equal(x, y) -> bool:
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return array_equal(np.asarray(x), np.asarray(y))
    try:
        return bool(x == y)
    except Exception:  # noqa: BLE001 - exotic values: fall back to identity
        return x is y


def value_key(x):
    """A hashable key consistent with value_equal (built without recursion, as value_equal compares)."""
    out: list = []
    stack = [(x, False)]
    while stack:
        v, done = stack.pop()
        if isinstance(v, list | tuple):
            if done:
                items = out[len(out) - len(v) :]
                del out[len(out) - len(v) :]
                out.append(("seq",) + tuple(items))
            else:
                stack.append((v, True))
                stack.extend((c, False) for c in reversed(v))
        elif isinstance(v, dict):
            keys = sorted(v, key=str)
            if done:
                items = out[len(out) - len(keys) :]
                del out[len(out) - len(keys) :]
                out.append(("dict",) + tuple(zip((str(k) for k in keys), items)))
            else:
                stack.append((v, True))
                stack.extend((v[k], False) for k in reversed(keys))
        else:
            out.append(_scalar_key(v))
    return out[0]


def _scalar_key(x):
    if isinstance(x, bool):
        return ("bool", x)
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    if isinstance(x, np.ndarray):
        return array_key(x)
    try:
        return hash(x)
    except TypeError:
        return type(x).__name__


def _floats(a: np.ndarray) -> np.ndarray:
    """bfloat16 / float8 (ml_dtypes, NumPy kind 'V') as float32, exactly: NumPy's NaN handling knows only its own floats."""
    return a.astype(np.float32) if is_extension(a.dtype) else a


def array_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same dtype, shape and elements; NaN equals NaN."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc" or is_extension(a.dtype):
        return bool(np.array_equal(_floats(a), _floats(b), equal_nan=True))
    return bool(np.array_equal(a, b))


def array_key(a: np.ndarray):
    """A hashable key consistent with array_equal."""
    a = np.asarray(a)
    name = str(a.dtype)
    a = _floats(a)
    if a.dtype.kind in "fc":
        # Equal arrays must hash alike: one NaN pattern, and -0.0 folded into 0.0.
        a = np.where(np.isnan(a), np.nan, a + 0)
    return (name, a.shape, hash(np.ascontiguousarray(a).tobytes()))


# -- hashing ----------------------------------------------------------------


class _Hasher:
    """Mirrors structural._Comparer: vars hash by definition order, symbolic dim names by first appearance."""

    def __init__(self):
        self.vids: dict[Var, int] = {}
        self.dids: dict[str, int] = {}
        self.dim_scopes: list[dict] = []
        self.out: list = []
        self.sinfo_memo: dict = {}  # id -> key of nested struct infos, for the current function scope

    def var(self, v: Var) -> None:
        vid = self.vids.get(v)
        if vid is None:
            vid = self.vids[v] = len(self.vids)
        self.out.append(("v", vid))

    def dim(self, d):
        if not isinstance(d, str):
            return d
        parts = []
        for tok in dim_tokens(d):
            if is_dim_name(tok):
                did = self.dids.get(tok)
                if did is None:
                    did = self.dids[tok] = len(self.dids)
                parts.append(did)
            else:
                parts.append(tok)
        return ("d",) + tuple(parts)

    def dims(self, ds):
        return None if ds is None else tuple(self.dim(d) for d in ds)

    def sinfo_key(self, s):
        if s is None:
            return None
        if s.__class__ is TensorStructInfo:  # the common case, without the fold's set-up
            return ("T", s.dtype, s.ndim, self.dims(s.shape))
        # Bottom-up with a stack (tuple struct infos nest to any depth); a nested node's key is the
        # hash of its token and its children's keys, memoized by node for the current function scope
        # (dim numbers are fixed once seen): a chain of bindings each typed by the previous one's
        # tuple field shares its struct info, and keying each afresh would be quadratic.
        return fold(s, _sinfo_children, self._sinfo_token, memo=self.sinfo_memo)

    def _sinfo_token(self, s, kids):
        if isinstance(s, TensorStructInfo):
            return ("T", s.dtype, s.ndim, self.dims(s.shape))
        if isinstance(s, TupleStructInfo):
            return hash(("U", tuple(kids)))
        if isinstance(s, ShapeStructInfo):
            return ("S", s.ndim, self.dims(s.values))
        if isinstance(s, PrimStructInfo):
            return ("P", s.dtype, value_key(s.value))
        if isinstance(s, FuncStructInfo):
            return hash(("F", s.purity, tuple(kids)))
        return None if s is None else (type(s).__name__,)

    def run(self, root) -> int:
        out = self.out
        emit = out.append
        stack = [(_NODE, root)]
        push = stack.append
        while stack:
            kind, x = stack.pop()
            if kind == _DEF:
                self.var(x)
                emit(type(x) is DataflowVar)
                emit(self.sinfo_key(x.struct_info))
                continue
            if kind == _SINFO:
                emit(self.sinfo_key(x))
                continue
            if kind == _ENTER_FUNC:
                self.dim_scopes.append(dict(self.dids))
                self.sinfo_memo = {}
                continue
            if kind == _EXIT_FUNC:
                self.dids = self.dim_scopes.pop()
                self.sinfo_memo = {}
                continue
            if kind == _BLOCK:
                emit((type(x) is DataflowBlock, len(x.bindings)))
                for b in reversed(x.bindings):
                    push((_BINDING, b))
                continue
            if kind == _BINDING:
                push((_DEF, x.var))
                push((_NODE, x.value))
                continue
            tx = type(x)
            if tx is Var or tx is DataflowVar:
                emit(tx is DataflowVar)
                self.var(x)
            elif tx is Call:
                op = x.op
                if isinstance(op, GlobalVar):
                    emit(("gcall", op.name_hint, len(x.args)))
                elif isinstance(op, Var):
                    emit(("vcall", len(x.args)))
                    push((_NODE, op))
                else:
                    emit(("call", getattr(op, "name", repr(op)), len(x.args), value_key(x.attrs)))
                for a in reversed(x.args):
                    push((_NODE, a))
            elif tx is Tuple:
                emit(("tuple", len(x.fields)))
                for f in reversed(x.fields):
                    push((_NODE, f))
            elif tx is TupleGetItem:
                emit(("getitem", x.index))
                push((_NODE, x.tuple_value))
            elif tx is Constant:
                emit(("const",) + array_key(x.data))
            elif tx is GlobalVar:
                emit(("gvar", x.name_hint))
            elif tx is ShapeExpr:
                emit(("shape", self.dims(tuple(x.values))))
            elif tx is PrimValue:
                emit(("prim", x.dtype, value_key(x.value)))
            elif tx is StringImm:
                emit(("str", x.value))
            elif tx is SeqExpr:
                emit(("seq", len(x.blocks)))
                push((_NODE, x.body))
                for blk in reversed(x.blocks):
                    push((_BLOCK, blk))
            elif tx is If:
                emit("if")
                push((_NODE, x.false_branch))
                push((_NODE, x.true_branch))
                push((_NODE, x.cond))
            elif tx is Function:
                emit(("func", len(x.params), x.is_pure, x.private, value_key(x.attrs)))
                push((_EXIT_FUNC, None))
                push((_NODE, x.body))
                push((_SINFO, x.ret_struct_info))
                for prm in reversed(x.params):
                    push((_DEF, prm))
                push((_ENTER_FUNC, None))
            elif issubclass(tx, BindingBlock):
                push((_BLOCK, x))
            elif tx is VarBinding:
                push((_BINDING, x))
            elif isinstance(x, StructInfo):
                emit(self.sinfo_key(x))
            elif isinstance(x, list | tuple):
                emit(("items", len(x)))
                for item in reversed(x):
                    push((_NODE, item))
            else:
                emit(value_key(x))
        return hash(tuple(out))


def _sinfo_children(s) -> tuple:
    if isinstance(s, TupleStructInfo):
        return s.fields
    if isinstance(s, FuncStructInfo):
        return s.params + (s.ret,)
    return ()


def structural_hash(x) -> int:
    """A hash consistent with structural_equal (equal objects hash alike, for any map_free_vars)."""
    if isinstance(x, IRModule):
        # Order-insensitive over functions, as equality is; each function hashed on its own.
        parts = sorted((name, _Hasher().run(func)) for name, func in x.items())
        return hash(("module", tuple(parts), value_key(x.attrs), tuple(sorted(x.tir.items()))))
    return _Hasher().run(x)
