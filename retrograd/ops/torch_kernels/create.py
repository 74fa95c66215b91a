"""Torch kernels of the creation family (ops/create.py)."""

from __future__ import annotations

import math

import torch

from retrograd.ops.torch_kernels import device, tdtype
from retrograd.ops.torch_kernels.select import select


def _dev(*tensors):
    for t in tensors:
        if isinstance(t, torch.Tensor):
            return t.device
    return device()


def full(shape, fill_value, dtype=None):
    dt = tdtype(dtype) if dtype else fill_value.dtype
    return torch.full(tuple(shape), 0, dtype=dt, device=_dev(fill_value)).copy_(fill_value) if isinstance(fill_value, torch.Tensor) \
        else torch.full(tuple(shape), fill_value, dtype=dt, device=device())


def full_like(x, fill_value, dtype=None):
    out = torch.empty(x.shape, dtype=tdtype(dtype) if dtype else x.dtype, device=x.device)
    return out.copy_(fill_value) if isinstance(fill_value, torch.Tensor) else out.fill_(fill_value)


def _is_int(v) -> bool:
    return isinstance(v, int) or (hasattr(v, "dtype") and getattr(v.dtype, "kind", "f") in "iu")


def arange(start, end=None, step=None, dtype=None):
    if end is None:
        start, end = 0, start
    step = 1 if step is None else step
    if dtype is None:
        dtype = "int64" if all(_is_int(v) for v in (start, end, step)) else "float32"
    start, end, step = (v.item() if hasattr(v, "item") else v for v in (start, end, step))
    # NumPy's arange: ceil((end - start) / step) values start + i * step, computed in float64.
    n = max(0, math.ceil((end - start) / step))
    if dtype.startswith("float"):
        return (torch.arange(n, dtype=torch.float64, device=device()) * step + start).to(tdtype(dtype))
    return torch.arange(start, end, step, dtype=tdtype(dtype), device=device())


def eye(n, m=None, k=None, dtype="float32"):
    return _eye(n, n if m is None else m, 0 if k is None else k, tdtype(dtype), device())


def _eye(n, m, k, dt, dev):
    rows = torch.arange(n, device=dev).unsqueeze(1)
    cols = torch.arange(m, device=dev).unsqueeze(0)
    return (cols - rows == k).to(dt)


def eye_like(x, k=None, dtype=None):
    return _eye(x.shape[0], x.shape[1], 0 if k is None else k, tdtype(dtype) if dtype else x.dtype, x.device)


def hamming_window(window_size, periodic, alpha, beta, dtype):
    if window_size == 1:
        return torch.ones(1, dtype=tdtype(dtype), device=device())
    n = window_size + 1 if periodic else window_size
    w = alpha - beta * torch.cos(2 * math.pi * torch.arange(n, dtype=torch.float64, device=device()) / (n - 1))
    return w[:window_size].to(tdtype(dtype))


def meshgrid(tensors, indexing="ij"):
    return tuple(g.clone(memory_format=torch.contiguous_format) for g in torch.meshgrid(*tensors, indexing=indexing))


def _prim_dtype(v):
    if isinstance(v, bool):
        return torch.bool
    if isinstance(v, int):
        return torch.int64
    if isinstance(v, float):
        return torch.float64
    return tdtype(str(v.dtype))


def one_hot(indices, on_value, off_value, depth, axis=-1):
    axis %= indices.ndim + 1
    positions = torch.arange(depth, device=indices.device).reshape((depth,) + (1,) * (indices.ndim - axis))
    hot = indices.unsqueeze(axis) == positions
    dt = _prim_dtype(on_value)
    on = torch.tensor(on_value.item() if hasattr(on_value, "item") else on_value, dtype=dt, device=indices.device)
    off = torch.tensor(off_value.item() if hasattr(off_value, "item") else off_value, device=indices.device).to(dt)
    return select(hot, on, off)


KERNELS = {
    "relax.zeros": lambda shape, dtype: torch.zeros(tuple(shape), dtype=tdtype(dtype), device=device()),
    "relax.ones": lambda shape, dtype: torch.ones(tuple(shape), dtype=tdtype(dtype), device=device()),
    "relax.full": full,
    "relax.zeros_like": lambda x, dtype=None: torch.zeros(x.shape, dtype=tdtype(dtype) if dtype else x.dtype, device=x.device),
    "relax.ones_like": lambda x, dtype=None: torch.ones(x.shape, dtype=tdtype(dtype) if dtype else x.dtype, device=x.device),
    "relax.full_like": full_like,
    "relax.arange": arange,
    "relax.eye": eye,
    "relax.eye_like": eye_like,
    "relax.hamming_window": hamming_window,
    "relax.meshgrid": meshgrid,
    "relax.one_hot": one_hot,
}
