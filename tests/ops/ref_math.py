"""Naive references for the ops of cases_math: Python's math module element by element, loops over
indices, and PyTorch where a loop would be long; independent of the kernels under test."""

from __future__ import annotations

import math

import numpy as np


def _elementwise(fn, out_dtype=None):
    """fn on Python scalars, element by element, broadcasting the arguments like NumPy."""

    def ref(*arrays):
        arrays = [np.asarray(a) for a in arrays]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        wide = [np.broadcast_to(a, shape) for a in arrays]
        dtype = out_dtype or arrays[0].dtype
        out = np.empty(shape, dtype)
        for idx in np.ndindex(shape):
            out[idx] = fn(*(w[idx].item() for w in wide))
        return out

    return ref


def _round_half_even(v):
    return float(round(v)) if isinstance(v, float) else v


def _c_mod(a, b):
    return math.fmod(a, b) if isinstance(a, float) else int(math.fmod(a, b))


def _floor_div(a, b):
    return math.floor(a / b) if isinstance(a, float) else a // b


def _sign(v):
    return (v > 0) - (v < 0)


def _log_add_exp(a, b):
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def _clip(x, lo, hi):
    lo, hi = np.asarray(lo).astype(x.dtype).item(), np.asarray(hi).astype(x.dtype).item()
    return _elementwise(lambda v: min(max(v, lo), hi))(x)


def _shift(fn):
    def ref(a, b):
        bits = a.dtype.itemsize * 8
        mask = (1 << bits) - 1
        signed = a.dtype.kind == "i"

        def one(x, s):
            r = fn(x, s) & mask
            return r - (1 << bits) if signed and r >> (bits - 1) else r

        return _elementwise(one)(a, b)

    return ref


REFERENCES = {
    "acos": _elementwise(math.acos), "acosh": _elementwise(math.acosh), "asin": _elementwise(math.asin),
    "asinh": _elementwise(math.asinh), "atan": _elementwise(math.atan), "atanh": _elementwise(math.atanh),
    "cosh": _elementwise(math.cosh), "sinh": _elementwise(math.sinh), "tan": _elementwise(math.tan),
    "rsqrt": _elementwise(lambda v: 1 / math.sqrt(v)), "square": _elementwise(lambda v: v * v),
    "ceil": _elementwise(math.ceil), "floor": _elementwise(math.floor), "trunc": _elementwise(math.trunc),
    "round": _elementwise(_round_half_even), "sign": _elementwise(_sign),
    "isfinite": _elementwise(math.isfinite, "bool"), "isinf": _elementwise(math.isinf, "bool"),
    "isnan": _elementwise(math.isnan, "bool"),
    "clip": _clip,
    "atan2": _elementwise(math.atan2), "floor_divide": _elementwise(_floor_div), "mod": _elementwise(_c_mod),
    "floor_mod": _elementwise(lambda a, b: a - _floor_div(a, b) * b), "log_add_exp": _elementwise(_log_add_exp),
    "ewise_fma": _elementwise(lambda a, b, c: a * b + c),
    "logical_and": _elementwise(lambda a, b: bool(a) and bool(b)), "logical_or": _elementwise(lambda a, b: bool(a) or bool(b)),
    "logical_xor": _elementwise(lambda a, b: bool(a) != bool(b)), "logical_not": _elementwise(lambda a: not a),
    "bitwise_and": _elementwise(lambda a, b: a & b), "bitwise_or": _elementwise(lambda a, b: a | b),
    "bitwise_xor": _elementwise(lambda a, b: a ^ b),
    "bitwise_not": lambda a: _elementwise(lambda v: (not v) if a.dtype == bool else ~v & ((1 << a.dtype.itemsize * 8) - 1) if a.dtype.kind == "u" else ~v)(a),
    "left_shift": _shift(lambda a, s: a << s), "right_shift": _shift(lambda a, s: a >> s),
}  # fmt: skip
