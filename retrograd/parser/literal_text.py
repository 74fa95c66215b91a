"""Script text of literals: floats (non-finite ones as TVM spells them) and `R.const` arrays."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.dtypes import is_float_array_dtype
from retrograd.ir.strings import quote as _quote

__all__ = ["const_text", "float_text"]


def float_text(x: float) -> str:
    if math.isfinite(x):
        return repr(float(x))
    if math.isnan(x):
        return 'float("nan")'
    return 'float("inf")' if x > 0 else '-float("inf")'


def _element_texts(flat: np.ndarray) -> list[str]:
    """Shortest text per element that reads back to the same value of the array's dtype."""
    kind = flat.dtype.kind
    if kind == "b":
        return ["True" if x else "False" for x in flat.tolist()]
    if kind in "iu":
        return [str(x) for x in flat.tolist()]
    if not is_float_array_dtype(flat.dtype):
        raise UnsupportedError(f"cannot print a constant of dtype {flat.dtype}")
    # numpy's str() of a float32/float16 scalar is the shortest text for that precision; reading it
    # back through float64 may round differently, so check all at once and fall back to the exact text.
    texts = [str(x) for x in flat] if flat.dtype != np.float64 else [repr(x) for x in flat.tolist()]
    finite = np.isfinite(flat)
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            texts[i] = float_text(float(flat[i]))
    if flat.dtype != np.float64:
        idx = np.flatnonzero(finite)
        if idx.size:
            back = np.array([texts[i] for i in idx.tolist()], dtype=np.float64).astype(flat.dtype)
            bad = idx[back != flat[idx]]
            for i in bad.tolist():
                texts[i] = repr(float(flat[i]))
    return texts


def _nested(texts: list[str], shape: tuple) -> str:
    if not shape:
        return texts[0]
    if len(shape) == 1:
        return "[" + ", ".join(texts) + "]"
    step = len(texts) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nested(texts[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def const_text(data: np.ndarray) -> str:
    """`R.const(value, "dtype")` with nested lists for arrays."""
    data = np.asarray(data)
    texts = _element_texts(data.reshape(-1))
    return f"R.const({_nested(texts, data.shape)}, {_quote(str(data.dtype))})"
