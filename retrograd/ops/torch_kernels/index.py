"""Torch kernels of gathers, scatters and indexing (ops/index/take_slice.py take, ops/search.py where, ops/index/gather_scatter.py,
ops/index/advanced.py, grad.take_backward, grad.merge_sparse_rows). Duplicate targets are settled as the
NumPy kernels settle them (the last write wins, sums in index order), never left to the device."""

from __future__ import annotations

import torch

from retrograd.errors import KernelError
from retrograd.ops.torch_kernels.select import keep, select

_MODES = ("fast", "clip", "wrap", "nan")


def checked_indices(op, idx, size, mode, axis):
    """Indices as int64 in [0, size) under `mode`, and the mask of the ones mode 'nan' drops (or None)."""
    if idx.dtype.is_floating_point or idx.dtype == torch.bool:
        raise KernelError(f"{op}: indices must have an integer dtype, got {str(idx.dtype).replace('torch.', '')}")
    if mode not in _MODES:
        raise KernelError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    idx = idx.to(torch.int64)
    if idx.numel() and size == 0:
        raise KernelError(f"{op}: cannot take indices from axis {axis} of size 0")
    if mode == "clip":
        return torch.clamp(idx, 0, max(size - 1, 0)), None
    if mode == "wrap":
        return torch.remainder(idx, max(size, 1)), None
    if mode == "nan":
        bad = (idx < 0) | (idx >= size)
        return select(bad, torch.zeros((), dtype=idx.dtype, device=idx.device), idx), bad
    bad = (idx < -size) | (idx >= size)
    if bool(bad.any()):
        raise KernelError(f"{op}: index {int(idx[bad][0])} out of range for axis {axis} of size {size}")
    return select(idx < 0, idx + size, idx), None


def _source(op, x, axis):
    if axis is None:
        return x.reshape(-1), 0
    if not -x.ndim <= axis < x.ndim:
        raise KernelError(f"{op}: axis {axis!r} out of range for an array of {x.ndim} dimensions")
    return x, axis % x.ndim


def take(x, indices, axis=None, mode="fast"):
    src, ax = _source("take", x, axis)
    idx, dropped = checked_indices("take", indices, src.shape[ax], mode, axis)
    out = torch.index_select(src, ax, idx.reshape(-1)).reshape(src.shape[:ax] + idx.shape + src.shape[ax + 1:])
    if dropped is not None and bool(dropped.any()):
        if not src.dtype.is_floating_point:
            raise KernelError(f"take: mode 'nan' needs a float array, got {src.dtype}")
        mask = dropped.reshape((1,) * ax + idx.shape + (1,) * (src.ndim - ax - 1))
        out = select(mask, torch.tensor(torch.nan, dtype=out.dtype, device=out.device), out)
    return out


def take_backward(output_grad, x, indices, axis=None, mode=""):
    op = "take_backward"
    if output_grad.dtype == torch.bool:
        raise KernelError("R.grad.take_backward: bool gradients cannot be summed")
    src, ax = _source(op, x, axis)
    idx, dropped = checked_indices(op, indices, src.shape[ax], mode or "fast", axis)
    expect = src.shape[:ax] + idx.shape + src.shape[ax + 1:]
    if tuple(output_grad.shape) != tuple(expect):
        raise KernelError(f"{op}: output_grad has shape {tuple(output_grad.shape)}, expected {tuple(expect)}")
    g = output_grad.to(x.dtype).reshape(src.shape[:ax] + (idx.numel(),) + src.shape[ax + 1:])
    rows = idx.reshape(-1)
    if dropped is not None:
        kept = ~dropped.reshape(-1)
        rows, g = rows[kept], g.index_select(ax, kept.nonzero().reshape(-1))
    dx = torch.zeros(src.shape, dtype=x.dtype, device=x.device)
    dx.index_add_(ax, rows, g)
    return dx.reshape(x.shape)


def where(condition, x1, x2):
    c = condition.to(torch.bool) if condition.dtype != torch.bool else condition
    if (isinstance(x1, torch.Tensor) and isinstance(x2, torch.Tensor) and c.device.type == "cpu" and x1.dtype == x2.dtype
            and x1.dtype.is_floating_point and not torch.compiler.is_compiling()):  # compiled code fuses its own select
        # A select against a +0 scalar (a relu's or a where's gradient) as one threshold_backward pass.
        if _plus_zero(x2):
            return keep(c, x1)
        if _plus_zero(x1):
            return keep(torch.logical_not(c), x2)
    return select(c, x1, x2)


def _plus_zero(t) -> bool:
    return t.ndim == 0 and t.device.type == "cpu" and bool(t == 0) and not bool(torch.signbit(t))


def _element_coords(op, data, indices, axis):
    idx, _ = checked_indices(op, indices, data.shape[axis], "fast", axis)
    if idx.ndim != data.ndim or any(i > s for a, (i, s) in enumerate(zip(idx.shape, data.shape)) if a != axis):
        raise KernelError(f"{op}: indices of shape {tuple(idx.shape)} exceed the data's {tuple(data.shape)} off axis {axis}")
    return idx


def gather_elements(data, indices, axis=0):
    axis %= data.ndim
    return torch.gather(data, axis, _element_coords("R.gather_elements", data, indices, axis))


def _flat_targets(shape, coords):
    flat = torch.zeros_like(coords[0])
    for c, s in zip(coords, shape):
        flat = flat * s + c
    return flat


def _last_wins(flat):
    """Positions (in the flattened coordinates) of the last write to each target, as NumPy stores."""
    order = torch.sort(flat, stable=True).indices
    sorted_t = flat[order]
    last = torch.ones_like(sorted_t, dtype=torch.bool)
    if sorted_t.numel() > 1:
        last[:-1] = sorted_t[1:] != sorted_t[:-1]
    return order[last]


def _scatter(op, data, coords, updates, reduction):
    """data with updates written at coords (full coordinates over the leading len(coords) axes)."""
    out = data.clone()
    k = len(coords)
    block = out.shape[k:]
    shape = torch.broadcast_shapes(*(c.shape for c in coords))
    coords = [c.expand(shape).reshape(-1) for c in coords]
    flat = _flat_targets(out.shape[:k], coords) if coords else torch.zeros(1, dtype=torch.int64, device=out.device)
    upd = torch.broadcast_to(updates, tuple(shape) + tuple(block)).reshape((flat.numel(),) + tuple(block)).to(out.dtype)
    rows = out.view((-1,) + tuple(block))
    if reduction == "update":
        pick = _last_wins(flat)
        rows[flat[pick]] = upd[pick]
    elif reduction == "add":
        rows.index_add_(0, flat, upd)
    elif reduction in ("mul", "min", "max"):
        reduce = {"mul": "prod", "min": "amin", "max": "amax"}[reduction]
        idx = flat.reshape((-1,) + (1,) * len(block)).expand(upd.shape)
        rows.scatter_reduce_(0, idx, upd, reduce, include_self=True)
    elif reduction == "mean":
        order = torch.sort(flat, stable=True).indices
        sorted_t = flat[order]
        new = torch.ones_like(sorted_t, dtype=torch.bool)
        new[1:] = sorted_t[1:] != sorted_t[:-1]
        group_start = torch.cummax(torch.where(new, torch.arange(sorted_t.numel(), device=out.device), 0), 0).values
        rank = torch.arange(sorted_t.numel(), device=out.device) - group_start
        for r in range(int(rank.max()) + 1 if rank.numel() else 0):
            pick = order[rank == r]
            total = rows[flat[pick]] + upd[pick]
            half = torch.div(total, 2, rounding_mode="trunc") if not out.dtype.is_floating_point and out.dtype != torch.bool else total / 2
            rows[flat[pick]] = half.to(out.dtype)  # bool: (a or b) / 2 nonzero, as NumPy stores it
    else:
        raise KernelError(f"{op}: unknown reduction {reduction!r}")
    return out


def scatter_elements(data, indices, updates, axis=0, reduction="update"):
    axis %= data.ndim
    idx = _element_coords("R.scatter_elements", data, indices, axis)
    coords = [torch.arange(n, device=data.device).reshape((-1,) + (1,) * (idx.ndim - a - 1)) for a, n in enumerate(idx.shape)]
    coords[axis] = idx
    return _scatter("R.scatter_elements", data, coords, updates, reduction)


def _nd_coords(op, data, indices, batch_dims=0):
    lead = tuple(indices.shape[:-1])
    if tuple(data.shape[:batch_dims]) != lead[:batch_dims]:
        raise KernelError(f"{op}: the batch dims of indices {lead[:batch_dims]} and data {tuple(data.shape[:batch_dims])} differ")
    coords = []
    for b in range(batch_dims):
        coords.append(torch.arange(data.shape[b], device=data.device).reshape((-1,) + (1,) * (len(lead) - b - 1)).expand(lead))
    for i in range(indices.shape[-1]):
        coords.append(checked_indices(op, indices[..., i], data.shape[batch_dims + i], "fast", batch_dims + i)[0])
    return coords


def gather_nd(data, indices, batch_dims=0):
    coords = _nd_coords("R.gather_nd", data, indices, batch_dims)
    return data[tuple(coords)].clone() if coords else data.clone()


def scatter_nd(data, indices, updates, reduction="update"):
    if reduction == "mean":
        raise KernelError("R.scatter_nd: reduction 'mean' is not supported (TVM: update, add, mul, min, max)")
    return _scatter("R.scatter_nd", data, _nd_coords("R.scatter_nd", data, indices), updates, reduction)


def _coords(op, data, indices):
    indices = indices if isinstance(indices, tuple) else (indices,)
    return [checked_indices(op, idx, data.shape[a], "fast", a)[0] for a, idx in enumerate(indices)]


def index_put(data, indices, values, accumulate=False):
    return _scatter("R.index_put", data, _coords("R.index_put", data, indices), values, "add" if accumulate else "update")


def slice_scatter(input_tensor, src, start, end, step, axis=0):
    axis %= input_tensor.ndim
    if not 0 <= start <= end <= input_tensor.shape[axis]:
        raise KernelError(f"R.slice_scatter: slice {start}:{end} out of range for axis {axis} of size {input_tensor.shape[axis]}")
    out = input_tensor.clone()
    out[(slice(None),) * axis + (slice(start, end, step),)] = src
    return out


def _slices(begin, end, strides, who):
    b, e, s = (t.tolist() for t in (begin, end, strides))
    if any(v == 0 for v in s):
        raise KernelError(f"{who}: strides must be non-zero")
    return [slice(int(x), int(y), int(z)) for x, y, z in zip(b, e, s)]


def _sliced(x, slices):
    """x[slices] with NumPy's semantics for negative steps (torch slices take positive steps only)."""
    from retrograd.ops.torch_kernels.shape import strided_slice

    axes = list(range(len(slices)))
    return strided_slice(x, axes, [s.start for s in slices], [s.stop for s in slices], [s.step for s in slices])


def dynamic_strided_slice(x, begin, end, strides):
    out = _sliced(x, _slices(begin, end, strides, "R.dynamic_strided_slice"))
    return out.clone() if out._base is not None or out.data_ptr() == x.data_ptr() else out


def dynamic_strided_slice_backward(output_grad, x, begin, end, strides):
    who = "R.grad.dynamic_strided_slice_backward"
    slices = _slices(begin, end, strides, who)
    positions = torch.arange(x.numel(), device=x.device).reshape(x.shape)
    target = _sliced(positions, slices)
    if tuple(target.shape) != tuple(output_grad.shape):
        raise KernelError(f"{who}: output_grad has shape {tuple(output_grad.shape)}, the slice {tuple(target.shape)}")
    out = torch.zeros(x.shape, dtype=x.dtype, device=x.device)
    out.view(-1)[target.reshape(-1)] = output_grad.reshape(-1).to(x.dtype)
    return out


def merge_sparse_rows(indices, values, num_rows):
    idx = indices.to(torch.int64).reshape(-1)
    bad = (idx < -num_rows) | (idx >= num_rows)
    if bool(bad.any()):
        raise KernelError(f"merge_sparse_grad: index {int(idx[bad][0])} out of range for {num_rows} rows")
    idx = select(idx < 0, idx + num_rows, idx)
    vals = values.reshape((idx.shape[0],) + tuple(values.shape[indices.ndim:]))
    unique, inverse = torch.unique(idx, sorted=True, return_inverse=True)
    merged = torch.zeros((unique.shape[0],) + tuple(vals.shape[1:]), dtype=vals.dtype, device=vals.device)
    merged.index_add_(0, inverse, vals)
    return unique, merged


KERNELS = {
    "relax.take": take,
    "relax.grad.take_backward": take_backward,
    "relax.where": where,
    "relax.gather_elements": gather_elements,
    "relax.scatter_elements": scatter_elements,
    "relax.gather_nd": gather_nd,
    "relax.scatter_nd": scatter_nd,
    "relax.index_tensor": lambda data, indices: data[tuple(_coords("R.index_tensor", data, indices))].clone(),
    "relax.index_put": index_put,
    "relax.slice_scatter": slice_scatter,
    "relax.dynamic_strided_slice": dynamic_strided_slice,
    "relax.grad.dynamic_strided_slice_backward": dynamic_strided_slice_backward,
    "relax.grad.merge_sparse_rows": merge_sparse_rows,
}
