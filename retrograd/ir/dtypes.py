"""Storage dtypes NumPy lacks (bfloat16, float8): their NumPy types come from the optional `ml_dtypes`.

TVM Relax types and runs them; NumPy has no such dtypes, so retrograd takes `ml_dtypes`' (the NumPy
extension types JAX and TensorFlow use), imported only when a module holds one of them. Kernels on
them compute in float32 and round the result to the storage dtype (retrograd/ops/storage.py).
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError

# Storage dtype -> bytes per element (known without importing ml_dtypes, for the memory model).
EXTENSION_DTYPES = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}
# Their largest finite values (ml_dtypes.finfo(...).max), for range checks made without ml_dtypes.
_MAX = {"bfloat16": 3.3895313892515355e38, "float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}

INSTALL_HINT = 'pip install ml_dtypes (or pip install "retrograd[bf16]")'


def is_extension(dtype) -> bool:
    """Whether a dtype (name or NumPy dtype) is one of EXTENSION_DTYPES."""
    return str(dtype) in EXTENSION_DTYPES


def require_extension(dtype: str) -> None:
    """Import ml_dtypes, which registers the extension dtypes with NumPy; a clear error without it."""
    try:
        import ml_dtypes  # noqa: F401 - registers bfloat16 / float8 with NumPy
    except ImportError:
        raise UnsupportedError(
            f"{dtype} tensors need the ml_dtypes package (NumPy, which runs retrograd's kernels, has no {dtype}): "
            f"{INSTALL_HINT}"
        ) from None


def numpy_dtype(dtype: str) -> np.dtype:
    """The NumPy dtype of a Relax dtype name; the extension dtypes through ml_dtypes."""
    if dtype in EXTENSION_DTYPES:
        require_extension(dtype)
    return np.dtype(dtype)


def itemsize(dtype: str) -> int:
    """Bytes per element of a Relax dtype (without importing ml_dtypes)."""
    size = EXTENSION_DTYPES.get(dtype)
    return size if size is not None else np.dtype(dtype).itemsize


def float_max(dtype: str) -> float:
    """The largest finite value of a float dtype."""
    return _MAX[dtype] if dtype in _MAX else float(np.finfo(dtype).max)


def reduction_identity(kind: str, dtype: str):
    """The identity element of max / min over dtype: what an empty reduction gives, and the fill that never
    wins against a value."""
    if dtype == "bool":
        return kind == "min"
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return info.min if kind == "max" else info.max
    return -np.inf if kind == "max" else np.inf


def is_float_array_dtype(dtype: np.dtype) -> bool:
    """Float dtypes of NumPy and the extension ones (ml_dtypes' report kind "V" for some)."""
    return dtype.kind == "f" or str(dtype) in EXTENSION_DTYPES


def prim_scalar(expr):
    """A prim value (PrimValue, StringImm) as kernels receive it: a Python number, or a NumPy scalar when
    its dtype is one a Python number does not carry (T.float32(1.0) stays float32 for R.one_hot's result
    dtype)."""
    dtype = getattr(expr, "dtype", None)  # a StringImm has none
    if dtype is not None and dtype not in ("int64", "float64", "bool"):
        try:
            return np.dtype(dtype).type(expr.value)
        except TypeError:  # bfloat16: no NumPy dtype
            pass
    return expr.value
