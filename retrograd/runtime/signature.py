"""Call-time argument checks against a function's signature; binds and evaluates symbolic dims."""

from __future__ import annotations

import ast
import operator
import re
from typing import Callable

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.nested import depth, fold, preorder
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    tuple_fields,
)
from retrograd.ir.text import format_sinfo

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ndarray = np.ndarray

# Dim expressions are TVMScript (Python-syntax) integer arithmetic; ast.parse reads them without running
# anything, and only these operators are accepted.
_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class Mismatch(Exception):
    """An argument does not fit its parameter; the caller turns it into an ExecutionError."""

    def __init__(self, path: str, expected: str, got: str, detail: str = ""):
        super().__init__(path)
        self.path, self.expected, self.got, self.detail = path, expected, got, detail

    def __str__(self) -> str:
        detail = f" ({self.detail})" if self.detail else ""
        return f"'{self.path}' expects {self.expected}, got {self.got}{detail}"


def _parse_dim(text: str) -> ast.expr:
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        raise UnsupportedError(f"cannot evaluate symbolic dim {text!r}") from None


def compile_dim(dim) -> Callable[[dict], int]:
    """A function of the dim environment giving the dim's value (names must be bound)."""
    if isinstance(dim, int):
        return lambda env: dim
    if _IDENT.match(dim):
        return operator.itemgetter(dim)
    return _compile_node(_parse_dim(dim), dim)


def _compile_node(node: ast.expr, text: str) -> Callable[[dict], int]:
    if isinstance(node, ast.Name):
        return operator.itemgetter(node.id)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        value = node.value
        return lambda env: value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _compile_node(node.operand, text)
        return lambda env: -inner(env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        fn, lhs, rhs = _BINOPS[type(node.op)], _compile_node(node.left, text), _compile_node(node.right, text)
        return lambda env: fn(lhs(env), rhs(env))
    raise UnsupportedError(f"cannot evaluate symbolic dim {text!r}: only + - * // % on names and integers")


def bindable_names(sinfo: StructInfo) -> set[str]:
    """Names a parameter binds by itself: bare identifiers among its dims."""
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
        return {d for d in sinfo.shape if isinstance(d, str) and _IDENT.match(d)}
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        return {d for d in sinfo.values if isinstance(d, str) and _IDENT.match(d)}
    if isinstance(sinfo, TupleStructInfo):
        # A stack: tuples nest to any depth.
        names: set[str] = set()
        for s in preorder(sinfo, tuple_fields):
            if not isinstance(s, TupleStructInfo):
                names |= bindable_names(s)
        return names
    return set()


def describe_value(value) -> str:
    """How an argument is shown in messages: `array of shape (3, 4) float32`, `tuple of 2 values`."""
    if isinstance(value, np.ma.MaskedArray):
        return f"masked array of shape {tuple(value.shape)} {value.dtype} (pass its .filled(...) values)"
    if isinstance(value, _ndarray):
        return f"array of shape {tuple(value.shape)} {value.dtype}"
    if isinstance(value, np.generic):
        return f"NumPy scalar {value.dtype}"
    if isinstance(value, tuple | list):
        return f"{type(value).__name__} of {len(value)} values"
    if isinstance(value, bool | int | float):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


class _Binder:
    """The per-call state of a signature check: dims bound so far and where, deferred expression dims."""

    __slots__ = ("env", "origin", "deferred")

    def __init__(self):
        self.env: dict[str, int] = {}
        self.origin: dict[str, str] = {}
        # (fn, actual, path, expected-text, dim-text) for dims that are expressions of names.
        self.deferred: list = []


def compile_checker(sinfo: StructInfo, path: str, build_error) -> Callable:
    """checker(value, binder) -> value (Python scalars become 0-d arrays); raises Mismatch."""
    if isinstance(sinfo, TupleStructInfo) and depth(sinfo, tuple_fields) > _NESTED_CLOSURES:
        return _nest_checker(sinfo, path, build_error)
    expected = format_sinfo(sinfo, brief=True)
    if isinstance(sinfo, ObjectStructInfo):
        return lambda value, binder: value
    if isinstance(sinfo, TensorStructInfo):
        return _tensor_checker(sinfo, path, expected)
    if isinstance(sinfo, TupleStructInfo):
        fields = [compile_checker(f, f"{path}[{i}]", build_error) for i, f in enumerate(sinfo.fields)]
        n = len(fields)

        def check_tuple(value, binder):
            if not isinstance(value, tuple | list) or len(value) != n:
                raise Mismatch(path, expected, describe_value(value))
            return tuple(chk(v, binder) for chk, v in zip(fields, value))

        return check_tuple
    if isinstance(sinfo, ShapeStructInfo):
        return _shape_checker(sinfo, path)
    if isinstance(sinfo, PrimStructInfo):
        return _prim_checker(sinfo, path)
    if isinstance(sinfo, FuncStructInfo):
        raise build_error(f"parameter {path} is a function; the executor takes no function arguments")
    raise build_error(f"parameter {path} has unsupported struct info {type(sinfo).__name__}")


# Tuple parameters up to this deep are checked by nested closures (the fastest); deeper ones by a loop.
_NESTED_CLOSURES = 32


def _nest_checker(sinfo: TupleStructInfo, path: str, build_error) -> Callable:
    """A checker of a tuple nest of any depth: one loop over (value, struct info) pairs. Each node's
    path and expected text are made only on a mismatch (made for each level, they would be quadratic)."""
    leaf_checks: dict[int, Callable] = {}
    for s in preorder(sinfo, tuple_fields):
        if not isinstance(s, TupleStructInfo) and id(s) not in leaf_checks:
            leaf_checks[id(s)] = compile_checker(s, "?", build_error)

    def check_nest(value, binder):
        def combine(item, fields):
            v, s, where = item
            if not isinstance(s, TupleStructInfo):
                try:
                    return leaf_checks[id(s)](v, binder)
                except Mismatch as err:
                    raise Mismatch(_nest_path(path, where), err.expected, err.got, err.detail) from None
            return tuple(fields)

        def fields_of(item):
            v, s, where = item
            if not isinstance(s, TupleStructInfo):
                return ()
            if not isinstance(v, tuple | list) or len(v) != len(s.fields):
                raise Mismatch(_nest_path(path, where), format_sinfo(s, brief=True), describe_value(v))
            return [(x, f, (where, i)) for i, (x, f) in enumerate(zip(v, s.fields))]

        return fold((value, sinfo, None), fields_of, combine, shared=False)

    return check_nest


def _nest_path(path: str, where) -> str:
    """`path[i][j]...` of a linked index path (parent, index)."""
    indices = []
    while where is not None:
        where, i = where
        indices.append(f"[{i}]")
    return path + "".join(reversed(indices))


def _dtype_ok_for_scalar(value, dtype: str) -> bool:
    if dtype == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if dtype.startswith(("int", "uint")):
        # In range too: NumPy would raise OverflowError, and a prim would carry a value no int32 holds.
        info = np.iinfo(dtype)
        return isinstance(value, int) and info.min <= value <= info.max
    return isinstance(value, int | float)


def _tensor_checker(sinfo: TensorStructInfo, path: str, expected: str):
    dtype = numpy_dtype(sinfo.dtype) if sinfo.dtype else None
    ndim = sinfo.ndim
    shape = sinfo.shape
    scalar_ok = ndim == 0

    def coerce(value):
        # An ndarray subclass runs as a plain array: np.matrix would keep its own reshape and sum
        # semantics inside the kernels; a masked array's mask would be silently dropped, so it is refused.
        if isinstance(value, _ndarray) and not isinstance(value, np.ma.MaskedArray):
            return value.view(_ndarray)
        # Python scalars (and NumPy scalars) are accepted for 0-d parameters.
        if scalar_ok and isinstance(value, bool | int | float) and (dtype is None or _dtype_ok_for_scalar(value, sinfo.dtype)):
            return np.asarray(value, dtype=dtype)
        if scalar_ok and isinstance(value, np.generic):
            return np.asarray(value)
        raise Mismatch(path, expected, describe_value(value))

    if shape is not None and all(isinstance(d, int) for d in shape):
        # Static shape: the common case, kept to one comparison of each property.
        def check_static(value, binder):
            if type(value) is not _ndarray:
                value = coerce(value)
            if value.shape != shape or (dtype is not None and value.dtype != dtype):
                raise Mismatch(path, expected, describe_value(value))
            return value

        return check_static

    dims = []  # (axis, name-or-None, fn-or-None, text)
    if shape is not None:
        for axis, d in enumerate(shape):
            if isinstance(d, int):
                dims.append((axis, None, d, None))
            elif _IDENT.match(d):
                dims.append((axis, d, None, d))
            else:
                dims.append((axis, None, compile_dim(d), d))

    def check_symbolic(value, binder):
        if type(value) is not _ndarray:
            value = coerce(value)
        if (dtype is not None and value.dtype != dtype) or (ndim != -1 and value.ndim != ndim):
            raise Mismatch(path, expected, describe_value(value))
        got = value.shape
        for axis, name, static, text in dims:
            size = got[axis]
            if name is None and text is None:
                if size != static:
                    raise Mismatch(path, expected, describe_value(value))
            elif name is not None:
                bound = binder.env.get(name)
                if bound is None:
                    binder.env[name] = size
                    binder.origin[name] = path
                elif bound != size:
                    raise Mismatch(
                        path,
                        expected,
                        describe_value(value),
                        f"{name} = {bound} from {binder.origin[name]}, but dimension {axis} is {size}",
                    )
            else:
                binder.deferred.append((static, size, path, expected, describe_value(value), text, axis))
        return value

    return check_symbolic


def _shape_checker(sinfo: ShapeStructInfo, path: str):
    expected = format_sinfo(sinfo, brief=True)
    values = sinfo.values
    ndim = sinfo.ndim

    def check_shape(value, binder):
        if isinstance(value, _ndarray) and value.ndim == 1 and value.dtype.kind in "iu":
            value = tuple(int(v) for v in value)
        if not isinstance(value, tuple | list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise Mismatch(path, expected, describe_value(value))
        value = tuple(value)
        if ndim != -1 and len(value) != ndim:
            raise Mismatch(path, expected, f"a shape of {len(value)} values")
        if values is not None:
            for axis, (d, v) in enumerate(zip(values, value)):
                if isinstance(d, int):
                    if d != v:
                        raise Mismatch(path, expected, f"shape {value}")
                elif _IDENT.match(d):
                    bound = binder.env.setdefault(d, v)
                    binder.origin.setdefault(d, path)
                    if bound != v:
                        raise Mismatch(path, expected, f"shape {value}", f"{d} = {bound} from {binder.origin[d]}, but value {axis} is {v}")
                else:
                    binder.deferred.append((compile_dim(d), v, path, expected, f"shape {value}", d, axis))
        return value

    return check_shape


def _prim_checker(sinfo: PrimStructInfo, path: str):
    expected = format_sinfo(sinfo, brief=True)

    def check_prim(value, binder):
        if isinstance(value, _ndarray | np.generic) and np.ndim(value) == 0:
            value = value.item()
        if not isinstance(value, bool | int | float) or not _dtype_ok_for_scalar(value, sinfo.dtype):
            raise Mismatch(path, expected, describe_value(value))
        if sinfo.value is not None and value != sinfo.value:
            raise Mismatch(path, f"Prim({sinfo.dtype}) equal to {sinfo.value}", describe_value(value))
        return value

    return check_prim


def check_deferred(binder: _Binder) -> None:
    """Dims written as expressions (`n + 1`) are checked once every name is bound."""
    for fn, size, path, expected, got, text, axis in binder.deferred:
        want = fn(binder.env)
        if want != size:
            raise Mismatch(path, expected, got, f"{text} = {want}, but dimension {axis} is {size}")


Binder = _Binder
