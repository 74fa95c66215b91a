"""Elementwise selects on CPU without torch.where, which this CPU build runs as a scalar loop (a (64, 64,
24, 24) float select: 9-15 ms against 0.7 ms for an add). Bit for bit torch.where's result: the chosen
value's bits are copied (NaN payloads, signed zeros), never computed."""

from __future__ import annotations

import torch

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _plain(a, b) -> bool:
    """torch.where itself: off the CPU, under torch.compile (which fuses its own select), or mixed dtypes."""
    return (not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.device.type != "cpu"
            or a.dtype != b.dtype or a.dtype == torch.bool or a.is_complex() or torch.compiler.is_compiling())


def select(c, a, b):
    """torch.where(c, a, b) for tensors of one dtype (broadcast together): on CPU a bit blend,
    b ^ ((a ^ b) & -c), four vectorized passes."""
    if c.dtype != torch.bool:
        c = c.to(torch.bool)
    if _plain(a, b):
        return torch.where(c, a, b)
    bits = _BITS[a.element_size()]
    ai, bi = a.view(bits), b.view(bits)
    mask = c.to(bits).neg_()  # all ones where c
    out = torch.bitwise_and(torch.bitwise_xor(ai, bi), mask)  # the shape of all three: b's broadcasts into it
    return out.bitwise_xor_(bi).view(a.dtype)


def keep(c, x):
    """x where c, else +0, for a float x: one aten.threshold_backward over the condition's bytes (+0 where
    the uint8 view is 0, else x itself), the result broadcast from c and x."""
    if c.dtype != torch.bool:
        c = c.to(torch.bool)
    if _plain(x, x) or not x.dtype.is_floating_point:
        return torch.where(c, x, torch.zeros((), dtype=x.dtype, device=x.device))
    return torch.ops.aten.threshold_backward(x, c.view(torch.uint8), 0)
