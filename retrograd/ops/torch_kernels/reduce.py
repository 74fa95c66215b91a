"""Torch kernels of the reductions, scans and sorts (ops/statistical.py, ops/sorting.py, ops/search.py)."""

from __future__ import annotations

import math

import torch

from retrograd.errors import KernelError
from retrograd.ops.torch_kernels import fresh, tdtype
from retrograd.ops.torch_kernels.elementwise import is_float


def _count(x, axis) -> int:
    return x.numel() if axis is None else math.prod(x.shape[a] for a in axis)


def _nonempty(name, x, axis):
    if _count(x, axis) == 0:
        raise KernelError(f"R.{name}: reduction over an empty axis of a tensor shaped {tuple(x.shape)}")


def _dims(x, axis):
    return tuple(range(x.ndim)) if axis is None else tuple(a % max(x.ndim, 1) for a in axis)


def _reduce(fn, x, axis, keepdims, **kw):
    dims = _dims(x, axis)
    if not dims:  # no axis reduced (a 0-d tensor, or axis=[]): torch would reduce them all
        return fn(x.unsqueeze(0), dim=0, keepdim=False, **kw)
    return fn(x, dim=dims, keepdim=keepdims, **kw)


def sum_(x, axis=None, keepdims=False):
    return _reduce(torch.sum, x, axis, keepdims, dtype=x.dtype)


def mean(x, axis=None, keepdims=False):
    count = _count(x, axis)
    if count == 0:
        raise KernelError(f"R.mean: mean over an empty axis of a tensor shaped {tuple(x.shape)}")
    if x.dtype == torch.bool:  # NumPy's kernel: the float mean, nonzero -> True
        return _reduce(torch.mean, x.double(), axis, keepdims).to(x.dtype)
    if not is_float(x):
        total = _reduce(torch.sum, x, axis, keepdims, dtype=torch.int64)
        return torch.trunc(total.double() / count).to(x.dtype)
    return _reduce(torch.mean, x, axis, keepdims)


def _on_float64(fn):
    """Integer and bool data through a float64 statistic, back in their dtype (NumPy's astype: truncation,
    nonzero -> True), as the NumPy kernels compute them; ATen's var and std take floats only."""

    def kernel(x, axis, keepdims, **kw):
        if is_float(x):
            return _reduce(fn, x, axis, keepdims, **kw)
        return _reduce(fn, x.double(), axis, keepdims, **kw).to(x.dtype)

    return kernel


_var, _std = _on_float64(torch.var), _on_float64(torch.std)


def variance(x, axis=None, keepdims=False):
    _nonempty("variance", x, axis)
    return _var(x, axis, keepdims, correction=0)


def std(x, axis=None, keepdims=False):
    _nonempty("std", x, axis)
    return _std(x, axis, keepdims, correction=0)


def _extremum(name, fn):
    def kernel(x, axis=None, keepdims=False):
        if any(x.shape[a] == 0 for a in _dims(x, axis)) or x.numel() == 0:
            raise KernelError(f"R.{name}: reduction over an empty axis of a tensor shaped {tuple(x.shape)}")
        return _reduce(fn, x, axis, keepdims)

    return kernel


def prod(x, axis=None, keepdims=False):
    dims = _dims(x, axis)
    out = x.to(x.dtype)
    for d in sorted(dims, reverse=True):
        out = torch.prod(out, dim=d, keepdim=keepdims, dtype=x.dtype)
    return out.clone() if not dims else out


def _scan(fn, one):
    def kernel(data, axis=None, dtype=None, exclusive=False):
        if axis is None:
            data, axis = data.reshape(-1), 0
        dt = tdtype(dtype) if dtype else data.dtype
        if dt == torch.bool:  # NumPy's bool sum / product is or / and: the int64 scan's nonzero entries
            out = fn(data, dim=axis, dtype=torch.int64).to(dt)
        else:
            out = fn(data, dim=axis, dtype=dt)
        if exclusive and out.shape[axis]:
            pad = torch.full_like(out.narrow(axis, 0, 1), one)
            out = torch.cat([pad, out.narrow(axis, 0, out.shape[axis] - 1)], dim=axis)
        return out

    return kernel


def median(x, axis=None, keepdims=False):
    _nonempty("median", x, axis)
    if axis is None or len(axis) != 1:
        axes = _dims(x, axis)
        rest = [a for a in range(x.ndim) if a not in axes]
        flat = x.permute(rest + list(axes)).reshape([x.shape[a] for a in rest] + [_count(x, axes)])
        k = (flat.shape[-1] - 1) // 2
        vals = torch.sort(flat, dim=-1, stable=True).values[..., k]
        if keepdims:
            for a in sorted(axes):
                vals = vals.unsqueeze(a)
        return fresh(vals.contiguous())
    (a,) = axis
    k = (x.shape[a] - 1) // 2
    order = torch.argsort(x, dim=a, stable=True)
    idx = order.narrow(a, k, 1)
    vals = torch.gather(x, a, idx)
    if not keepdims:
        idx, vals = idx.squeeze(a), vals.squeeze(a)
    return fresh(vals.contiguous()), fresh(idx.contiguous())


def order(x, axis, descending):
    """Stable order; descending keeps equal elements in index order (as ops/sorting.py)."""
    return torch.argsort(x, dim=axis, descending=descending, stable=True)


def sort(x, axis=-1, descending=False):
    return torch.gather(x, axis, order(x, axis, descending))


def argsort(data, axis=-1, descending=False, dtype="int32"):
    return order(data, axis, descending).to(tdtype(dtype) if dtype else data.dtype)


def topk(data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32"):
    axis %= data.ndim
    n = data.shape[axis]
    k = k if 0 < k < n else n
    idx = order(data, axis, largest).narrow(axis, 0, k)
    vals = torch.gather(data, axis, idx)
    idx = fresh(idx.to(tdtype(dtype) if dtype else data.dtype))
    return (vals, idx) if ret_type == "both" else vals if ret_type == "values" else idx


def _arg_extremum(name, fn):
    def kernel(x, axis=None, keepdims=False):
        if x.numel() == 0 or (axis is not None and x.shape[axis] == 0):
            raise KernelError(f"R.{name}: empty reduction over a tensor shaped {tuple(x.shape)}")
        if x.dtype == torch.bool:  # ATen's argmax / argmin refuse bool
            x = x.to(torch.uint8)
        if axis is None:
            out = fn(x.reshape(-1), dim=0)
            return out.reshape((1,) * x.ndim) if keepdims else out
        return fn(x, dim=axis, keepdim=keepdims)

    return kernel


def bucketize(input_tensor, boundaries, out_int32=False, right=False):
    return torch.bucketize(input_tensor, boundaries, out_int32=out_int32, right=right)


KERNELS = {
    "relax.sum": sum_,
    "relax.mean": mean,
    "relax.variance": variance,
    "relax.max": _extremum("max", torch.amax),
    "relax.min": _extremum("min", torch.amin),
    "relax.cumsum": _scan(torch.cumsum, 0),
    "relax.prod": prod,
    "relax.std": std,
    "relax.median": median,
    "relax.cumprod": _scan(torch.cumprod, 1),
    "relax.sort": sort,
    "relax.argsort": argsort,
    "relax.topk": topk,
    "relax.argmax": _arg_extremum("argmax", torch.argmax),
    "relax.argmin": _arg_extremum("argmin", torch.argmin),
    "relax.bucketize": bucketize,
}
