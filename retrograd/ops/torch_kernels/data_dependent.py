"""Torch kernels of ops/data_dependent.py (nonzero, unique), ops/quantize.py (quantize, dequantize,
multinomial_from_uniform) and ops/manipulate/layout.py (layout_transform), with the NumPy kernels' semantics."""

from __future__ import annotations

import numpy as np
import torch

from retrograd.errors import KernelError
from retrograd.ops.manipulate.layout import positions
from retrograd.ops.torch_kernels import tdtype
from retrograd.ops.torch_kernels.select import select

_FLOAT16_MAX = 65504.0


def nonzero(x):
    x = torch.atleast_1d(x)
    return torch.nonzero(x).T.contiguous().reshape(x.ndim, -1)


def unique(x, sorted=True, return_index=False, return_inverse=False, return_counts=False, axis=None):
    if axis is not None:
        if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
            raise KernelError(f"R.unique: axis {axis} is out of range for shape {tuple(x.shape)}")
        if x.shape[axis] == 0:
            raise KernelError(f"R.unique: axis {axis} of shape {tuple(x.shape)} is empty")
    source = torch.atleast_1d(x) if axis is None else x
    values, inverse, counts = torch.unique(source, sorted=True, return_inverse=True, return_counts=True,
                                           dim=axis)
    inverse = inverse.reshape(-1)
    # The first occurrence of each value: the least position mapped to it.
    positions = torch.arange(inverse.numel(), device=x.device)
    first = torch.full((counts.numel(),), inverse.numel(), dtype=torch.int64, device=x.device)
    first = first.scatter_reduce(0, inverse, positions, reduce="amin")
    if not sorted:
        order = torch.argsort(first, stable=True)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel(), device=x.device)
        values = torch.index_select(values, 0 if axis is None else axis, order)
        first, inverse, counts = first[order], rank[inverse], counts[order]
    out = [_exact(values)]
    for flag, v in zip((return_index, return_inverse, return_counts), (first, inverse, counts)):
        if flag:
            out.append(_exact(v.to(torch.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def _exact(t):
    """t in a storage of exactly its size (torch.unique returns some results in larger buffers, which the
    memory meter would count in full)."""
    t = t.contiguous()
    return t.clone() if t.untyped_storage().nbytes() != t.numel() * t.element_size() else t


def _along(p, x, axis):
    if p.ndim == 0 or x.ndim == 0:
        return p.reshape(())
    if p.ndim != 1 or p.shape[0] not in (1, x.shape[axis]):
        raise KernelError(f"scale / zero_point of shape {tuple(p.shape)} do not match data of shape {tuple(x.shape)} along axis {axis}")
    shape = [1] * x.ndim
    shape[axis] = p.shape[0]
    return p.reshape(shape)


def quantize(data, scale, zero_point, out_dtype="int8", axis=-1):
    if not data.dtype.is_floating_point:
        raise KernelError(f"R.quantize: data must be float16 or float32, got {str(data.dtype).replace('torch.', '')}")
    ax = axis % data.ndim if data.ndim else 0
    scaled = data / _along(scale, data, ax).to(data.dtype)
    target = tdtype(out_dtype)
    if not target.is_floating_point:
        scaled = torch.round(scaled)  # half to even, as np.rint
    v = scaled + _along(zero_point, data, ax).to(data.dtype)
    info = torch.finfo(target) if target.is_floating_point else torch.iinfo(target)
    hi = torch.tensor(info.max, dtype=v.dtype, device=v.device)
    lo = torch.tensor(info.min, dtype=v.dtype, device=v.device)
    v = select(v < hi, v, hi)  # NaN goes to the top, as TVM's min-then-max selects
    v = select(v > lo, v, lo)
    return v.to(target).contiguous()


def dequantize(data, scale, zero_point, out_dtype="float32", axis=-1):
    ax = axis % data.ndim if data.ndim else 0
    real = torch.float64 if out_dtype == "float64" else torch.float32
    work = real if data.dtype.is_floating_point else torch.int32
    sub = data.to(work) - _along(zero_point, data, ax).to(work)
    out = sub.to(real) * _along(scale, data, ax).to(real)
    if out_dtype != "float16":
        return out.contiguous()
    return torch.clamp(out, -_FLOAT16_MAX, _FLOAT16_MAX).to(torch.float16).contiguous()


def multinomial_from_uniform(prob, uniform_sample, sample_indices, dtype="int64"):
    batch, vocab = prob.shape
    rows = sample_indices.reshape(-1).to(torch.int64)
    if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= batch):
        raise KernelError(f"R.multinomial_from_uniform: sample_indices must lie in [0, {batch}), got "
                          f"{int(rows.min())}..{int(rows.max())}")
    if vocab == 0:
        raise KernelError("R.multinomial_from_uniform: the vocabulary (prob's second dimension) is empty")
    cumulative = torch.cumsum(prob, dim=1, dtype=prob.dtype)[rows]
    index = (cumulative[:, :-1] <= uniform_sample.reshape(-1, 1)).sum(dim=1)
    return index.to(tdtype(dtype)).reshape(-1, 1)


def layout_transform(x, index_map, pad_value=None):
    if x.numel() == 0:
        raise KernelError(f"R.layout_transform: the tensor of shape {tuple(x.shape)} is empty")
    pos, out_shape = positions(index_map, tuple(x.shape))
    out = torch.full(out_shape, 0 if pad_value is None else pad_value, dtype=x.dtype, device=x.device)
    out[tuple(torch.from_numpy(np.ascontiguousarray(p)).to(x.device) for p in pos)] = x
    return out


KERNELS = {
    "relax.nonzero": nonzero,
    "relax.unique": unique,
    "relax.quantize": quantize,
    "relax.dequantize": dequantize,
    "relax.multinomial_from_uniform": multinomial_from_uniform,
    "relax.layout_transform": layout_transform,
}
