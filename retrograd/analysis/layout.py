"""What each op's kernel hands back, memory-wise: a fresh C-contiguous buffer, an input itself, or a
view of one, by the op's own view rule (ops/views.py)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.ops.views import FRESH, Fresh, Layout, Same, View, c_strides

__all__ = ["FRESH", "Fresh", "Layout", "Same", "View", "c_layout", "results"]


def c_layout(shape, dtype: str) -> tuple[int, Layout]:
    """(nbytes, layout) of a new C-order array."""
    size = np.dtype(dtype).itemsize
    return math.prod(shape) * size, Layout(shape, dtype, c_strides(shape, size))


def results(op, attrs: dict, args: list, outs: list) -> list:
    """Fresh | Same | View for each output of a call of `op` (args: argument layouts, None for
    non-arrays; outs: output shapes). Ops declaring no view rule make fresh buffers."""
    view = getattr(op, "view", None)
    if view is None:
        return [FRESH] * len(outs)
    return view(attrs, args, outs)
