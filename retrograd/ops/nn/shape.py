"""Shape arithmetic of the nn ops: layouts as permutations, sliding-window and transposed output sizes."""

from __future__ import annotations

from retrograd.ir.struct_info import Dim, TensorStructInfo
from retrograd.ops.kernels.window import window_positions
from retrograd.ops.registry import InferCtx


def from_layout(shape: tuple[Dim, ...], layout: str, canonical: str) -> tuple[Dim, ...]:
    """The dims of `shape` (laid out as `layout`) in `canonical` order: ("N", "C", "H", "W")."""
    return tuple(shape[layout.index(c)] for c in canonical)


def to_layout(dims: tuple[Dim, ...], canonical: str, layout: str) -> tuple[Dim, ...]:
    """Inverse of from_layout: canonical-order dims rearranged as `layout`."""
    return tuple(dims[canonical.index(c)] for c in layout)


def check_4d(ctx: InferCtx, i: int, layout: str) -> TensorStructInfo:
    t = ctx.tensor(i)
    if t.ndim not in (-1, 4):
        raise ctx.error(f"expected a 4-D tensor in layout {layout}, got {t.ndim}-D", i)
    return t


def _wrap(d: str) -> str:
    return f"({d})" if any(c in d for c in " +-*/%") else d


def affine(d: Dim, mul: int, add: int) -> Dim:
    """d * mul + add, as text when d is symbolic (TVM's simplified spelling: `h * 2 + 1`)."""
    if isinstance(d, int):
        return d * mul + add
    text = d if mul == 1 else f"{_wrap(d)} * {mul}"
    if add > 0:
        return f"{text} + {add}"
    if add < 0:
        return f"{text} - {-add}"
    return text


def window_count(ctx: InferCtx, size: Dim, k: int, s: int, p0: int, p1: int, d: int, ceil_mode: bool = False) -> Dim | None:
    """Number of window positions along one axis (kernels.window.window_positions, symbolic dims
    spelled as TVM does); None when symbolic with ceil_mode. A misfit window is an inference error."""
    if isinstance(size, str):
        if ceil_mode:
            # TVM spells this dim with T.if_then_else, which our dims do not express.
            return None
        c = p0 + p1 - (d * (k - 1) + 1)
        if s == 1:
            return affine(size, 1, c + 1)
        return f"{_wrap(affine(size, 1, c))} // {s} + 1"
    try:
        return window_positions(size, k, s, p0, p1, d, ceil_mode)
    except ValueError as err:
        raise ctx.error(str(err)) from None


def transposed_size(size: Dim, k: int, s: int, p0: int, p1: int, d: int, output_padding: int) -> Dim:
    """Output extent of a transposed convolution along one axis."""
    return affine(size, s, -s - p0 - p1 + d * (k - 1) + 1 + output_padding)
