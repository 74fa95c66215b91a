"""What computing one op call costs (FLOPs-like, from static struct info): the `cost` property of an OpDef.

An op declares `register(..., cost=Cost(kind, flops))`; without one it gets DEFAULT (kind "other", one
unit per output element). Only ratios matter to the checkpoint planner: a matmul or a conv dwarfs a
pointwise op of the same output size, so plans never recompute one to save recomputing the other.
Unknown (symbolic) shapes count zero elements.
"""

from __future__ import annotations

from math import prod
from typing import Callable

import attrs

from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo

# Op classes the planner's policies tell apart: heavy kinds (matmul, conv, pool) are recomputed only
# when nothing else meets the budget, cheap ones (elementwise, view, reduce) by the `cheap` policy.
KINDS = ("matmul", "conv", "pool", "elementwise", "view", "reduce", "other")


def elements(sinfo) -> int:
    """Number of elements of a static tensor (sum over tuple fields); 0 for non-tensors or unknown shapes."""
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None or not all(isinstance(d, int) for d in sinfo.shape):
            return 0
        return prod(sinfo.shape)
    if isinstance(sinfo, TupleStructInfo):
        return sum(elements(f) for f in sinfo.fields)
    return 0


def _shape(expr) -> tuple:
    s = getattr(expr, "struct_info", None)
    if isinstance(s, TensorStructInfo) and s.shape is not None and all(isinstance(d, int) for d in s.shape):
        return tuple(s.shape)
    return ()


def out_elements(call, out) -> float:
    return float(elements(out))


def input_elements(call, out) -> float:
    return float(sum(elements(a.struct_info) for a in call.args))


def zero(call, out) -> float:
    return 0.0


def times(k: float, per=out_elements) -> Callable:
    """k units per element counted by `per`."""
    return lambda call, out: k * per(call, out)


@attrs.frozen
class Cost:
    """kind: one of KINDS; flops(call, out_sinfo) -> float, the cost of computing the call once."""

    kind: str = "other"
    flops: Callable = out_elements

    def __attrs_post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown cost kind {self.kind!r} (one of {', '.join(KINDS)})")

    def __call__(self, call, out) -> float:
        return float(self.flops(call, out))


def matmul_flops(call, out) -> float:
    """2·M·N·K: each output element is a K-long dot product (batch dimensions in the output)."""
    a = _shape(call.args[0])
    return 2.0 * elements(out) * (a[-1] if a else 1)


def conv_flops(call, out) -> float:
    """2 · output elements · (in-channels / groups) · kernel window, from the weight's shape."""
    w = _shape(call.args[1])
    layout = call.attrs.get("kernel_layout") or "OIHW"
    if not w or len(w) != len(layout) or "O" not in layout:
        return 2.0 * elements(out)
    return 2.0 * elements(out) * prod(w) / max(1, w[layout.index("O")])


def conv_transpose_flops(call, out) -> float:
    """Each input element is scattered into (out-channels / groups) · kernel window outputs."""
    w = _shape(call.args[1])
    layout = call.attrs.get("kernel_layout") or "IOHW"
    if not w or len(w) != len(layout) or "I" not in layout:
        return 2.0 * elements(out)
    return 2.0 * elements(call.args[0].struct_info) * prod(w) / max(1, w[layout.index("I")])


def _window(call) -> int:
    return prod(call.attrs.get("pool_size") or (1,))


def pool_flops(call, out) -> float:
    """One unit per output element and window position."""
    return float(elements(out) * _window(call))


def pool_backward_flops(call, out) -> float:
    """One unit per element of the first argument (the pooled gradient) and window position."""
    return float(elements(call.args[0].struct_info) * _window(call))


DEFAULT = Cost()
ELEMENTWISE = Cost("elementwise")
VIEW = Cost("view", zero)
REDUCE = Cost("reduce", input_elements)
MATMUL = Cost("matmul", matmul_flops)
CONV = Cost("conv", conv_flops)
CONV_TRANSPOSE = Cost("conv", conv_transpose_flops)
POOL = Cost("pool", pool_flops)
POOL_BACKWARD = Cost("pool", pool_backward_flops)
