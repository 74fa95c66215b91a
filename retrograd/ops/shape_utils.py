"""Shape arithmetic shared by inference functions: broadcasting, axes, symbolic dims."""

from __future__ import annotations

import math
import re

from retrograd.ir.struct_info import Dim, TensorStructInfo


def broadcast_shapes(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """NumPy broadcasting; a symbolic dim against 1 or itself is kept. None if incompatible."""
    if a == b:  # equal shapes (most elementwise calls): nothing to broadcast
        return tuple(a)
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        elif isinstance(x, str) or isinstance(y, str):
            # Unknown at compile time: trust the static one, as TVM does.
            out.append(y if isinstance(x, str) else x)
        else:
            return None
    return tuple(reversed(out))


def normalize_axis(axis: int, ndim: int) -> int | None:
    """A non-negative axis, or None if out of range."""
    if -ndim <= axis < ndim:
        return axis % ndim if ndim else 0
    return None


def dim_mul(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return f"{_paren(a)} * {_paren(b)}"


def dim_add(a: Dim, b: Dim) -> Dim:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if a == 0:
        return b
    if b == 0:
        return a
    return f"{a} + {b}"


def _paren(d: Dim) -> str:
    s = str(d)
    return f"({s})" if any(c in s for c in "+-") else s


def same_dtype(a: TensorStructInfo, b: TensorStructInfo) -> str | None:
    """The common dtype, or None when they differ (unknown "" adopts the other)."""
    if not a.dtype:
        return b.dtype
    if not b.dtype or a.dtype == b.dtype:
        return a.dtype
    return None


_FACTOR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$|^\d+$")


def monomial(dim: Dim) -> tuple[int, tuple[str, ...]] | None:
    """dim as coefficient x sorted symbols ("4 * n" -> (4, ("n",))); None if it is not a plain product."""
    if isinstance(dim, int):
        return dim, ()
    parts = [p.strip() for p in dim.split("*")]
    if not all(_FACTOR.match(p) for p in parts):
        return None
    coef = math.prod(int(p) for p in parts if p.isdigit())
    return coef, tuple(sorted(p for p in parts if not p.isdigit()))


def from_monomial(coef: int, names: tuple[str, ...]) -> Dim:
    """The dim text TVM prints for a product: symbols first, the coefficient last ("n * 4")."""
    if not names or coef == 0:
        return coef
    return " * ".join(names + ((str(coef),) if coef != 1 else ()))


def dims_product(dims) -> Dim:
    """The number of elements of a shape, with products of symbols in TVM's canonical order."""
    size: Dim = 1
    for d in dims:
        size = dim_mul(size, d)
    m = monomial(size)
    return size if m is None else from_monomial(*m)


def axes_of(ctx, axes, ndim: int, arg: int = 0, what: str = "axis") -> tuple[int, ...]:
    """Normalize a list of axes against ndim: in range, no repeats; errors name the op and argument."""
    out = []
    for a in axes:
        n = normalize_axis(a, ndim)
        if n is None:
            raise ctx.error(f"{what} {a} is out of range for a tensor of ndim {ndim} (expected [{-ndim}, {ndim}))", arg)
        if n in out:
            raise ctx.error(f"{what} {a} is repeated in {list(axes)}", arg)
        out.append(n)
    return tuple(out)
