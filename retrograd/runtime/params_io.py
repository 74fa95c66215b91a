"""Parameters on disk: one `.npz` archive of named arrays (PyTorch's dotted names kept as they are),
read without unpickling anything. `ir_name` is the IR spelling of such a name, which is how
`retrograd run --inputs` matches an archive's arrays to a function's parameters."""

from __future__ import annotations

import os
import re
import zipfile

import numpy as np

from retrograd.errors import UsageError
from retrograd.ir.dtypes import is_extension, itemsize, numpy_dtype

_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


def ir_name(name: str) -> str:
    """A dotted parameter name (`transformer.h.0.attn.c_attn.weight`) as an IR identifier
    (`transformer_h_0_attn_c_attn_weight`)."""
    out = _NOT_IDENT.sub("_", name)
    return out if out and not out[0].isdigit() else "p_" + out


def view_raw(value, dtype: str):
    """An array NumPy stored as raw bytes (.npy / .npz keep bfloat16 and float8 arrays as void of their
    size) as the extension dtype `dtype` it holds; any other value as it is."""
    if (isinstance(value, np.ndarray) and value.dtype.kind == "V" and value.dtype.names is None
            and is_extension(dtype) and value.dtype.itemsize == itemsize(dtype)):
        return value.view(numpy_dtype(dtype))
    return value


def save_params(path, params: dict) -> str:
    """Write {name: array} to `path` (".npz" appended when missing, as NumPy does); returns the path."""
    path = os.fspath(path)
    path = path if path.endswith(".npz") else path + ".npz"
    arrays = {}
    for name, value in params.items():
        arr = np.asarray(value)
        if arr.dtype == object:
            raise UsageError(f"parameter '{name}' is not a numeric array")
        arrays[str(name)] = arr
    np.savez(path, **arrays)
    return path


def load_params(path) -> dict:
    """{name: array} from an archive written by `save_params` (or np.savez), in the archive's order.
    Pickled objects are refused, never loaded."""
    path = os.fspath(path)
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("an .npy holds one unnamed array; parameters are an .npz archive")
        with data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        text = str(err)
        if "allow_pickle" in text:
            text = "it holds Python objects, which are not read (save plain arrays)"
        raise UsageError(f"cannot read parameters from {path}: {text}") from None
