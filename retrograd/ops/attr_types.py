"""Attribute converters shared by op definitions: each checks and canonicalizes one kind of value."""

from __future__ import annotations

from retrograd.ir.struct_info import FLOAT_DTYPES, INT_DTYPES

# Dtypes refused where a script names them, not deep in a kernel (bfloat16 / float8 run through
# ml_dtypes: retrograd/ir/dtypes.py).
UNSUPPORTED_DTYPES: dict[str, str] = {}
DTYPES = tuple(d for d in FLOAT_DTYPES + INT_DTYPES + ("bool",) if d not in UNSUPPORTED_DTYPES)


_INT64 = (-(2**63), 2**63 - 1)


def to_int(v) -> int:
    """An integer attribute: int64, as TVM stores them."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("expected an integer")
    if not _INT64[0] <= v <= _INT64[1]:
        raise ValueError("out of the int64 range")
    return v


def to_float(v) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise TypeError("expected a number")
    return float(v)


def to_bool(v) -> bool:
    if not isinstance(v, bool):
        raise TypeError("expected True or False")
    return v


def to_str(v) -> str:
    if not isinstance(v, str):
        raise TypeError("expected a string")
    return v


def to_ints(v) -> tuple[int, ...]:
    """A list of ints; a single int becomes a 1-tuple."""
    if isinstance(v, int) and not isinstance(v, bool):
        return (to_int(v),)
    if not isinstance(v, list | tuple):
        raise TypeError("expected a list of integers")
    return tuple(to_int(x) for x in v)


def to_opt_ints(v) -> tuple[int, ...] | None:
    return None if v is None else to_ints(v)


def to_opt_int(v) -> int | None:
    return None if v is None else to_int(v)


def to_opt_str(v) -> str | None:
    return None if v is None else to_str(v)


def to_dtype(v) -> str:
    if isinstance(v, str) and v in UNSUPPORTED_DTYPES:
        raise ValueError(UNSUPPORTED_DTYPES[v])
    if not isinstance(v, str) or v not in DTYPES:
        raise ValueError(f"expected a dtype among {', '.join(DTYPES)}")
    return v


def to_opt_dtype(v) -> str | None:
    """None and TVM's "void" both mean: keep the input dtype."""
    if v is None or v == "void" or v == "":
        return None
    return to_dtype(v)


def one_of(*choices):
    def convert(v):
        if v not in choices:
            raise ValueError(f"expected one of {', '.join(repr(c) for c in choices)}")
        return v

    return convert


def fixed_ints(n: int):
    """A list of exactly n ints; shorter forms are expanded the way TVM does (one value stands for all
    n; for 4 paddings, 2 values stand for (top, left) repeated)."""

    def convert(v):
        vals = to_ints(v)
        if len(vals) == n:
            return vals
        if len(vals) == 1:
            return vals * n
        if n == 4 and len(vals) == 2:
            return (vals[0], vals[1], vals[0], vals[1])
        counts = "1, 2 or 4" if n == 4 else f"1 or {n}"
        raise ValueError(f"expected {counts} integers, got {len(vals)}")

    return convert


def int_at_least(name: str, minimum: int):
    """One int >= minimum (a factor, a seed), the message naming the attribute."""

    def convert(v):
        r = to_int(v)
        if r < minimum:
            raise ValueError(f"{name} must be >= {minimum}, got {r}")
        return r

    return convert


def at_least(convert, minimum: int):
    """Wrap an int-list converter so every value is >= minimum (strides, dilation, padding)."""

    def check(v):
        vals = convert(v)
        if any(x < minimum for x in vals):
            raise ValueError(f"every value must be >= {minimum}")
        return vals

    return check


def layout(letters: str):
    """A layout: a permutation of `letters` (NHWC for NCHW); blocked layouts (NCHW4c) are not supported."""

    def convert(v):
        if not isinstance(v, str) or len(v) != len(letters) or sorted(v) != sorted(letters):
            raise ValueError(f"expected a permutation of {letters!r} (blocked layouts are not supported)")
        return v

    return convert


def opt_layout(letters: str):
    inner = layout(letters)
    return lambda v: None if v is None else inner(v)
