"""Element and N-d gathers and scatters (ONNX conventions, as TVM's topi): coordinates built with
NumPy broadcasting, duplicate targets reduced with ufunc.at, never a Python loop over elements."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.index import checked_indices

_AT = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _element_coords(op, shape, indices, axis):
    """Full coordinates into an array of `shape` for each element of `indices` (which address `axis`)."""
    idx, _ = checked_indices(op, indices, shape[axis], "fast", axis)
    if idx.ndim != len(shape) or any(i > s for a, (i, s) in enumerate(zip(idx.shape, shape)) if a != axis):
        raise KernelError(f"{op}: indices of shape {idx.shape} exceed the data's {shape} off axis {axis}")
    coords = [np.broadcast_to(c, idx.shape) for c in np.indices(idx.shape, sparse=True)]
    coords[axis] = idx
    return tuple(coords)


def _nd_coords(op, shape, indices, batch_dims=0):
    """Coordinates of gather_nd/scatter_nd: the last axis of indices lists positions in dims batch_dims.."""
    idx = np.asarray(indices)
    lead = idx.shape[:-1]
    coords = []
    if tuple(shape[:batch_dims]) != tuple(lead[:batch_dims]):
        raise KernelError(f"{op}: the batch dims of indices {lead[:batch_dims]} and data {tuple(shape[:batch_dims])} differ")
    for b in range(batch_dims):
        grid = np.arange(shape[b]).reshape((-1,) + (1,) * (len(lead) - b - 1))
        coords.append(np.broadcast_to(grid, lead))
    for i in range(idx.shape[-1]):
        coords.append(checked_indices(op, idx[..., i], shape[batch_dims + i], "fast", batch_dims + i)[0])
    return tuple(coords)


def _halving_mean(out, coords, updates):
    """TVM's reduction "mean" folds each update in as (old + update) / 2, in index order along the
    scatter axis: process duplicates rank by rank (one vectorized step per rank, not per element)."""
    flat_out = out.reshape(-1)
    target = np.ravel_multi_index(coords, out.shape).reshape(-1)
    values = np.asarray(updates).reshape(-1)
    order = np.argsort(target, kind="stable")
    sorted_t = target[order]
    starts = np.r_[0, np.flatnonzero(sorted_t[1:] != sorted_t[:-1]) + 1] if sorted_t.size else np.zeros(0, int)
    rank = np.arange(sorted_t.size) - np.repeat(starts, np.diff(np.r_[starts, sorted_t.size]))
    for r in range(int(rank.max()) + 1 if rank.size else 0):
        pick = order[rank == r]
        total = flat_out[target[pick]] + values[pick]
        if out.dtype.kind in "iu":
            half = np.where(total < 0, -((-total) // 2), total // 2)  # TIR integer division truncates
        else:
            half = total / 2
        flat_out[target[pick]] = half
    return out


def _scatter_add(out, coords, updates):
    """out[coords] += updates with duplicates summed: bincount over flat positions (ufunc.at is ~10x
    slower); integers keep ufunc.at, where float64 weights could round."""
    if out.dtype.kind != "f":
        np.add.at(out, coords, updates)
        return
    flat = np.ravel_multi_index(coords, out.shape[: len(coords)]).reshape(-1)
    if flat.size == 0 or out.size == 0:
        return
    weights = np.broadcast_to(updates, np.broadcast_shapes(*(np.shape(c) for c in coords)) + out.shape[len(coords) :])
    if len(coords) < out.ndim:
        # Whole blocks per index (scatter_nd): sum blocks per target row, then add the rows.
        block = int(np.prod(out.shape[len(coords) :]))
        rows = out.reshape(-1, block)
        order = np.argsort(flat, kind="stable")
        targets, starts = np.unique(flat[order], return_index=True)
        rows[targets] += np.add.reduceat(weights.reshape(-1, block)[order], starts, axis=0).astype(out.dtype)
        return
    out.reshape(-1)[:] += np.bincount(flat, weights.reshape(-1), minlength=out.size).astype(out.dtype)


def _scatter(op, out, coords, updates, reduction):
    if reduction == "update":
        out[coords] = updates
    elif reduction == "add":
        _scatter_add(out, coords, updates)
    elif reduction == "mean":
        _halving_mean(out, coords, updates)
    elif reduction in _AT:
        _AT[reduction].at(out, coords, updates)
    else:
        raise KernelError(f"{op}: unknown reduction {reduction!r}")
    return out


def gather_elements(data, indices, axis=0):
    axis = axis % data.ndim
    return np.asarray(data[_element_coords("R.gather_elements", data.shape, indices, axis)])


def scatter_elements(data, indices, updates, axis=0, reduction="update"):
    axis = axis % data.ndim
    coords = _element_coords("R.scatter_elements", data.shape, indices, axis)
    return _scatter("R.scatter_elements", data.copy(), coords, updates, reduction)


def gather_nd(data, indices, batch_dims=0):
    coords = _nd_coords("R.gather_nd", data.shape, indices, batch_dims)
    return np.array(data[coords]) if coords else data.copy()


def scatter_nd(data, indices, updates, reduction="update"):
    coords = _nd_coords("R.scatter_nd", data.shape, indices)
    if reduction == "mean":
        raise KernelError("R.scatter_nd: reduction 'mean' is not supported (TVM: update, add, mul, min, max)")
    return _scatter("R.scatter_nd", data.copy(), coords, updates, reduction)
