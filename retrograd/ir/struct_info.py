"""Struct info: the static type of a value (tensor shape + dtype, tuple, shape, prim, object, function)."""

from __future__ import annotations

import ast
import re
from typing import Union

import attrs

from retrograd.errors import UnsupportedError
from retrograd.ir.nested import all_pairs, fold, joined, render

# A dimension is a static int or a symbolic expression kept as TVMScript text ("n", "n + m").
Dim = Union[int, str]


def _dims(value) -> tuple | None:
    if value is None:
        return None
    if value.__class__ is tuple:  # already canonical (the usual case: shapes built from shapes)
        for d in value:
            if d.__class__ is not int and d.__class__ is not str:
                break
        else:
            return value
    return tuple(int(d) if not isinstance(d, str) else d for d in value)


class StructInfo:
    """Base of all struct infos; compared by value."""

    __slots__ = ()


@attrs.frozen
class ObjectStructInfo(StructInfo):
    """Any value: the top of the struct-info lattice."""


@attrs.frozen(cache_hash=True)  # hashed by every inference memo lookup
class PrimStructInfo(StructInfo):
    """A scalar of a primitive dtype, optionally with a known value."""

    dtype: str
    value: int | float | None = None


@attrs.frozen(cache_hash=True)  # hashed by every inference memo lookup
class ShapeStructInfo(StructInfo):
    """A shape value; `values` known or only `ndim` (-1: unknown)."""

    values: tuple[Dim, ...] | None = attrs.field(default=None, converter=_dims)
    ndim: int = attrs.field(default=-1)

    def __attrs_post_init__(self):
        if self.values is not None and self.ndim != len(self.values):
            object.__setattr__(self, "ndim", len(self.values))


@attrs.frozen(cache_hash=True)  # hashed by every inference memo lookup
class TensorStructInfo(StructInfo):
    """A tensor: shape known (dims static or symbolic), or only ndim (-1: unknown); dtype "" if unknown."""

    shape: tuple[Dim, ...] | None = attrs.field(default=None, converter=_dims)
    dtype: str = ""
    ndim: int = -1

    def __attrs_post_init__(self):
        if self.shape is not None and self.ndim != len(self.shape):
            object.__setattr__(self, "ndim", len(self.shape))
        elif self.shape is None and self.ndim == 0:
            # A 0-d tensor's shape is always (): full reductions of unknown-shape tensors are scalars.
            object.__setattr__(self, "shape", ())

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def is_float(self) -> bool:
        return is_float_dtype(self.dtype)


@attrs.frozen(eq=False, repr=False)
class TupleStructInfo(StructInfo):
    """A tuple of values, each with its own struct info. Compared, hashed and shown without recursion
    (attrs' would recurse once per level): tuples may nest thousands deep."""

    fields: tuple[StructInfo, ...] = attrs.field(converter=tuple)

    def __eq__(self, other):
        if other.__class__ is not TupleStructInfo:
            return NotImplemented
        return self is other or all_pairs(self, other, _same_step)

    def __hash__(self):
        return fold(self, tuple_fields, _hash_step)

    def __repr__(self):
        return render(self, _repr_parts)


def tuple_fields(s) -> tuple:
    """The children of a struct info in a tuple nest: a tuple's fields, nothing for any other."""
    return s.fields if s.__class__ is TupleStructInfo else ()


def _same_step(x, y):
    if x is y:
        return True
    if x.__class__ is TupleStructInfo and y.__class__ is TupleStructInfo:
        return len(x.fields) == len(y.fields) and list(zip(x.fields, y.fields))
    return x == y


def _hash_step(s, field_hashes) -> int:
    return hash((TupleStructInfo, tuple(field_hashes))) if s.__class__ is TupleStructInfo else hash(s)


def _repr_parts(s) -> list:
    if s.__class__ is not TupleStructInfo:
        return [repr(s)]
    return ["TupleStructInfo(fields=(", *joined(s.fields), ",))" if len(s.fields) == 1 else "))"]


@attrs.frozen
class FuncStructInfo(StructInfo):
    """A function's signature."""

    params: tuple[StructInfo, ...] = attrs.field(converter=tuple)
    ret: StructInfo
    purity: bool = True


FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")
INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def is_float_dtype(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_int_dtype(dtype: str) -> bool:
    return dtype in INT_DTYPES


def tensor(shape, dtype: str = "float32") -> TensorStructInfo:
    """Shorthand used by op definitions and tests."""
    return TensorStructInfo(tuple(shape), dtype)


def sinfo_of_value(value) -> StructInfo:
    """Struct info of a runtime value (NumPy array, or nested tuple of them)."""
    import numpy as np

    def combine(v, fields):
        if isinstance(v, tuple | list):
            return TupleStructInfo(fields)
        arr = np.asarray(v)
        return TensorStructInfo(arr.shape, str(arr.dtype))

    return fold(value, lambda v: v if isinstance(v, tuple | list) else (), combine)


def is_base_of(base: StructInfo, derived: StructInfo) -> bool:
    """True when every value described by `derived` is also described by `base` (annotation check)."""
    return all_pairs(base, derived, _base_step)


def _base_step(base: StructInfo, derived: StructInfo):
    """is_base_of for one pair: a bool, or the pairs of tuple fields still to check."""
    if base is derived or isinstance(base, ObjectStructInfo):
        return True
    if isinstance(base, TensorStructInfo):
        if not isinstance(derived, TensorStructInfo):
            return False
        if base.dtype and base.dtype != derived.dtype:
            return False
        if base.ndim != -1 and base.ndim != derived.ndim:
            return False
        if base.shape is not None:
            if derived.shape is None:
                return False
            for a, b in zip(base.shape, derived.shape):
                # A symbolic dim in the annotation may stand for any size; a static one must match.
                if isinstance(a, int) and a != b:
                    return False
                if isinstance(a, str) and isinstance(b, str) and a != b:
                    return False
        return True
    if isinstance(base, TupleStructInfo):
        return (
            isinstance(derived, TupleStructInfo)
            and len(base.fields) == len(derived.fields)
            and list(zip(base.fields, derived.fields))
        )
    if isinstance(base, ShapeStructInfo):
        if not isinstance(derived, ShapeStructInfo):
            return False
        if base.ndim != -1 and base.ndim != derived.ndim:
            return False
        if base.values is not None:
            return derived.values is not None and all(
                not isinstance(a, int) or a == b for a, b in zip(base.values, derived.values)
            )
        return True
    if isinstance(base, PrimStructInfo):
        return isinstance(derived, PrimStructInfo) and base.dtype == derived.dtype
    if isinstance(base, FuncStructInfo):
        return isinstance(derived, FuncStructInfo)
    return base == derived


def unify(a: StructInfo, b: StructInfo) -> StructInfo:
    """The least struct info describing both (used for the two branches of an If)."""
    if a.__class__ is not TupleStructInfo or b.__class__ is not TupleStructInfo:
        return _unify_one(a, b, None)
    return fold((a, b), _tuple_pairs, lambda pair, fields: _unify_one(*pair, fields), shared=False)


def _tuple_pairs(pair) -> list:
    a, b = pair
    if a.__class__ is TupleStructInfo and b.__class__ is TupleStructInfo and len(a.fields) == len(b.fields):
        return list(zip(a.fields, b.fields))
    return []


def _unify_one(a: StructInfo, b: StructInfo, fields) -> StructInfo:
    """unify of one pair, given the unified fields of two tuples of one length."""
    if fields:
        return a if all(x is y for x, y in zip(fields, a.fields)) else TupleStructInfo(fields)
    if a == b:
        return a
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else ""
        if a.ndim == b.ndim and a.ndim != -1:
            if a.shape is not None and b.shape is not None:
                dims = tuple(x if x == y else None for x, y in zip(a.shape, b.shape))
                if None not in dims:
                    return TensorStructInfo(dims, dtype)
            return TensorStructInfo(None, dtype, a.ndim)
        return TensorStructInfo(None, dtype, -1)
    if isinstance(a, ShapeStructInfo) and isinstance(b, ShapeStructInfo):
        return ShapeStructInfo(None, a.ndim if a.ndim == b.ndim else -1)
    return ObjectStructInfo()


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def dim_names(dim) -> set[str]:
    """The symbolic names a dim refers to (`T` of `T.min(3, n)` is not one)."""
    if isinstance(dim, int):
        return set()
    if _IDENT.match(dim):
        return {dim}
    try:
        tree = ast.parse(dim, mode="eval")
    except SyntaxError:
        raise UnsupportedError(f"cannot evaluate symbolic dim {dim!r}") from None
    nodes = list(ast.walk(tree))
    bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    return {n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in bases}


def all_dim_names(sinfo: StructInfo) -> set[str]:
    """Every symbolic name the dims of a struct info (tuples and function signatures included) refer to."""
    if sinfo.__class__ is TensorStructInfo:  # the common case, without the walk (printing calls it per binding)
        shape = sinfo.shape
        if shape is None:
            return set()
        for d in shape:
            if d.__class__ is not int:
                break
        else:
            return set()
    out: set[str] = set()
    stack = [sinfo]
    while stack:
        s = stack.pop()
        dims = ()
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            dims = s.shape
        elif isinstance(s, ShapeStructInfo) and s.values is not None:
            dims = s.values
        elif isinstance(s, TupleStructInfo):
            stack.extend(s.fields)
        elif isinstance(s, FuncStructInfo):
            stack.extend(s.params)
            if s.ret is not None:
                stack.append(s.ret)
        for d in dims:
            if d.__class__ is not int:  # static dims name nothing: skip the call (tuples of thousands)
                out |= dim_names(d)
    return out


def erase_undefined_dims(sinfo: StructInfo, defined: set[str]) -> StructInfo:
    """`sinfo` with every shape that uses a name outside `defined` forgotten (its rank kept): what a
    function's result may say about dims bound only inside its body (TVM's EraseToWellDefined)."""

    def erase(s):
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            if any(dim_names(d) - defined for d in s.shape):
                return TensorStructInfo(None, s.dtype, len(s.shape))
        elif isinstance(s, ShapeStructInfo) and s.values is not None:
            if any(dim_names(d) - defined for d in s.values):
                return ShapeStructInfo(None, len(s.values))
        return s

    return map_leaves(sinfo, erase)


def annotation_form(sinfo: StructInfo) -> StructInfo:
    """What a parameter annotation can say of `sinfo`: a prim's known value dropped (TVM's `R.Prim` takes
    a dtype only), so that a parameter a pass makes from an inferred struct info prints and parses back."""
    return map_leaves(sinfo, lambda s: PrimStructInfo(s.dtype) if isinstance(s, PrimStructInfo) and s.value is not None else s)


def map_leaves(sinfo: StructInfo, leaf) -> StructInfo:
    """`sinfo` with `leaf` applied to every struct info of its tuple nest that is not a tuple; tuples
    are rebuilt only where something changed (an unchanged one is returned as is)."""
    if sinfo.__class__ is not TupleStructInfo:
        return leaf(sinfo)
    return fold(sinfo, tuple_fields, lambda s, fields: _rebuilt(s, fields) if s.__class__ is TupleStructInfo else leaf(s))


def _rebuilt(s: TupleStructInfo, fields) -> TupleStructInfo:
    return s if all(a is b for a, b in zip(fields, s.fields)) else TupleStructInfo(fields)
