"""TVM objects read generically: type keys, fields under either of their spellings, struct info and dims."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

# TVM 0.27 renamed much of Relax's Python surface (struct_info -> ty, relax.Constant -> ir.GenericConst,
# PrimValue -> a bare IntImm/FloatImm); every read goes through these helpers so both spellings work.
_MISSING = object()


def kind(obj) -> str:
    """The last part of the object's FFI type key: "Call", "DataflowVar", "TensorType", ..."""
    info = getattr(type(obj), "__tvm_ffi_type_info__", None)
    key = info.type_key if info is not None else getattr(type(obj), "_type_key", type(obj).__name__)
    return key.rsplit(".", 1)[-1]


def field(obj, *names, default=_MISSING):
    """The first of `names` the object has (older and newer TVM spell fields differently)."""
    for name in names:
        try:
            return getattr(obj, name)
        except AttributeError:
            continue
    if default is _MISSING:
        raise UnsupportedError(f"from_tvm: a TVM {kind(obj)} has none of the fields {', '.join(names)}")
    return default


def type_of(expr):
    """The struct info (TVM 0.27: the type) TVM gives an expression."""
    return field(expr, "ty", "struct_info", default=None)


def attr_fields(attrs, skip=()) -> dict:
    """A TVM attrs object (op attributes, a function's DictAttrs) as {name: Python value}, leaving
    out the keys in `skip` (unconverted: a frontend's weights)."""
    if attrs is None:
        return {}
    info = getattr(type(attrs), "__tvm_ffi_type_info__", None)
    if kind(attrs) == "DictAttrs" or info is None or not info.fields:
        try:
            items = dict(attrs).items()
        except TypeError:
            return {}
        return {str(k): to_python(v) for k, v in items if str(k) not in skip}
    return {f.name: to_python(getattr(attrs, f.name)) for f in info.fields if f.name not in skip}


def to_python(value):
    """TVM attribute values (IntImm, Array, Map, dtype, String) as plain Python; tensors as NumPy."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, np.dtype):
        return str(value)
    k = kind(value)
    if k in ("IntImm", "FloatImm"):
        v = value.value
        dtype = str(field(value, "dtype", default="") or getattr(type_of(value), "dtype", ""))
        return bool(v) if dtype == "bool" else v
    if k == "StringImm":
        return str(value.value)
    if k in ("Tensor", "NDArray"):
        return value.numpy()
    if k in ("dtype", "DataType") or type(value).__name__ == "dtype":
        return str(value)
    if k == "IndexMap":  # layout_transform's map: its printed lambda, read (never run) by the script parser
        from retrograd.parser.literals import parse_index_map

        return parse_index_map(str(value))
    if hasattr(value, "items"):
        return {str(a): to_python(b) for a, b in value.items()}
    if hasattr(value, "__len__") and hasattr(value, "__getitem__"):
        return tuple(to_python(v) for v in value)
    return str(value)


# -- symbolic dims ----------------------------------------------------------------------------

_BINARY = {"Add": ("+", 1), "Sub": ("-", 1), "Mul": ("*", 2), "FloorDiv": ("//", 2), "FloorMod": ("%", 2)}
_CALLS = {"Min": "T.min", "Max": "T.max", "Div": "T.truncdiv", "Mod": "T.truncmod"}


def dim(expr):
    """A TIR dim as retrograd's Dim: an int, or the canonical text retrograd's parser gives it."""
    text, _ = _dim_text(expr)
    return int(text) if text.lstrip("-").isdigit() else text


def _dim_text(expr) -> tuple[str, int]:
    # Dims are shallow expressions (n * 4 + 1): recursion depth is their nesting, not program size.
    if isinstance(expr, int):
        return str(expr), 4
    k = kind(expr)
    if k == "IntImm":
        return str(int(expr.value)), 4 if expr.value >= 0 else 3
    if k in ("Var", "SizeVar"):
        return str(field(expr, "name", "name_hint")), 4
    if k in _BINARY:
        op, prec = _BINARY[k]
        lt, lp = _dim_text(expr.a)
        rt, rp = _dim_text(expr.b)
        lt = f"({lt})" if lp < prec else lt
        rt = f"({rt})" if rp <= prec else rt
        return f"{lt} {op} {rt}", prec
    if k in _CALLS:
        return f"{_CALLS[k]}({_dim_text(expr.a)[0]}, {_dim_text(expr.b)[0]})", 4
    raise UnsupportedError(f"from_tvm: cannot read the symbolic dimension {expr} ({k})")


def shape_values(shape) -> tuple | None:
    """The dims of a TVM ShapeExpr (or a plain sequence of dims); None when unknown."""
    if shape is None:
        return None
    values = field(shape, "values", default=shape)
    return tuple(dim(d) for d in values)


# -- struct info ------------------------------------------------------------------------------


def _dtype(value) -> str:
    text = "" if value is None else str(value)
    return "" if text in ("void", "") else text


def to_sinfo(ty) -> StructInfo:
    """Retrograd's struct info for a TVM type / struct info (TensorType, TupleType, ShapeType, ...)."""
    if ty is None:
        return ObjectStructInfo()
    k = kind(ty)
    if k in ("TensorType", "TensorStructInfo"):
        shape = field(ty, "shape", default=None)
        ndim = int(field(ty, "ndim", default=-1))
        if shape is not None and kind(shape) == "ShapeExpr":
            return TensorStructInfo(shape_values(shape), _dtype(ty.dtype))
        return TensorStructInfo(None, _dtype(ty.dtype), ndim)
    if k in ("TupleType", "TupleStructInfo"):
        return TupleStructInfo(tuple(to_sinfo(f) for f in ty.fields))
    if k in ("ShapeType", "ShapeStructInfo"):
        values = field(ty, "values", default=None)
        if values is not None:
            return ShapeStructInfo(tuple(dim(d) for d in values))
        return ShapeStructInfo(None, int(field(ty, "ndim", default=-1)))
    if k in ("PrimType", "PrimStructInfo"):
        value = field(ty, "value", default=None)
        known = None if value is None or kind(value) not in ("IntImm", "FloatImm") else value.value
        return PrimStructInfo(_dtype(field(ty, "dtype")), known)
    if k in ("FuncType", "FuncStructInfo"):
        params = field(ty, "params", default=None)
        if params is None:
            raise UnsupportedError("from_tvm: an opaque function type (no parameter list) is not supported")
        return FuncStructInfo(tuple(to_sinfo(p) for p in params), to_sinfo(ty.ret), bool(field(ty, "purity", default=True)))
    if k in ("ObjectType", "ObjectStructInfo", "AnyType", "StringType"):
        return ObjectStructInfo()
    raise UnsupportedError(f"from_tvm: the TVM type {ty} ({k}) has no retrograd struct info")


def constant_data(const) -> np.ndarray:
    """A TVM constant's tensor as a read-only NumPy array."""
    value = field(const, "data", "value")
    arr = np.array(value.numpy(), copy=True)
    arr.setflags(write=False)
    return arr
