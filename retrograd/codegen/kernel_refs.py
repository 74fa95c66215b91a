"""How lowered source names things: an op's kernel (its public name in `retrograd.kernels`), values as literals, identifiers."""

from __future__ import annotations

import builtins
import keyword
import math

import numpy as np

import retrograd.kernels as public_kernels
from retrograd.errors import UnsupportedError
from retrograd.kernels import kernel_name


def literal(v) -> str:
    """Python source evaluating to `v` (numbers exactly, non-finite floats through np, NumPy scalars typed)."""
    if isinstance(v, bool) or v is None or isinstance(v, str | int):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "np.nan"
        if math.isinf(v):
            return "np.inf" if v > 0 else "-np.inf"
        return repr(v)
    if isinstance(v, np.generic):
        return f"np.{v.dtype.name}({literal(v.item())})"
    if isinstance(v, tuple):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    raise UnsupportedError(f"no Python source form for the value {v!r} (a {type(v).__name__})")


def safe_name(text: str, shadow_builtins: bool = False) -> str:
    """An identifier from `text` that is no keyword, not `np` and, unless allowed, shadows no builtin."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text) or "_"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name) or (not shadow_builtins and hasattr(builtins, name)) or name == "np":
        name += "_"
    return name


def kernel_ref(op) -> str:
    """The name `retrograd.kernels` exports `op`'s kernel under (raises UnsupportedError for an op the
    registry does not hold, whose kernel generated code could not import)."""
    name = kernel_name(op.name)
    if getattr(public_kernels, name, None) is not op.kernel:
        raise UnsupportedError(f"op {op.name} is not the registered op of that name, so lowered code cannot import its kernel")
    return name


def kernel_import(names: dict[str, str]) -> str:
    """`from retrograd.kernels import a, b as b_1, ...` for {kernel name: alias}, wrapped as black would."""
    items = sorted(name if name == alias else f"{name} as {alias}" for name, alias in names.items())
    line = f"from retrograd.kernels import {', '.join(items)}"
    if len(line) <= 100:
        return line
    return "from retrograd.kernels import (\n" + "".join(f"    {item},\n" for item in items) + ")"
