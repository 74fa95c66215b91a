"""Adaptive average pooling as separable averaging matrices, one contraction per spatial axis."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.resample import apply_axes
from retrograd.ops.kernels.window import all_finite, check_float, to_layout


def averaging_matrix(size: int, out: int, dtype="float64") -> np.ndarray:
    """(out, size): row i averages input [floor(i * size / out), ceil((i + 1) * size / out)) (TVM's bins)."""
    start, end = _bins(size, out)
    cols = np.arange(size)
    inside = (cols >= start[:, None]) & (cols < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


def _bins(size: int, out: int):
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)


def bin_means(y, axis: int, out: int) -> np.ndarray:
    """The mean of each of `out` bins along `axis`, summing only the positions a bin holds: where a NaN or
    infinity is, averaging_matrix's zeros would spread it over every bin (PyTorch's stays in its bins)."""
    start, end = _bins(y.shape[axis], out)
    n = end - start
    res = np.take(y, start, axis=axis)
    lead = (slice(None),) * axis
    for k in range(1, int(n.max())):
        keep = np.flatnonzero(n > k)
        res[lead + (keep,)] += np.take(y, start[keep] + k, axis=axis)
    shape = [1] * y.ndim
    shape[axis] = out
    return np.divide(res, n.reshape(shape).astype(res.dtype), out=res)


def adaptive_avg_pool(data, *, output_size=None, layout, out_layout=None, spatial):
    """Average over TVM's adaptive bins along the axes `spatial` (e.g. "HW") of `layout`."""
    op = f"adaptive_avg_pool{len(spatial)}d"
    x = np.asarray(data)
    check_float(op, "data", x)
    canon = "NC" + spatial
    y = to_layout(op, x, layout, canon)
    sizes = y.shape[2:] if output_size is None else tuple(int(v) for v in output_size)
    if len(sizes) == 1 and len(spatial) > 1:
        sizes = sizes * len(spatial)
    if len(sizes) != len(spatial) or min(sizes, default=1) < 1:
        raise KernelError(f"{op}: output_size must be {len(spatial)} positive ints, got {output_size!r}")
    if 0 in y.shape[2:] and y.shape[2:] != sizes:
        raise KernelError(f"{op}: cannot average an empty spatial axis (input {y.shape[2:]}) into {sizes} bins")
    # Equal sizes are identity bins: no contraction.
    if all_finite(y):
        y = apply_axes(y, [None if o == n else averaging_matrix(n, o, y.dtype) for n, o in zip(y.shape[2:], sizes)])
    else:
        for j, (n, o) in enumerate(zip(y.shape[2:], sizes)):
            y = y if o == n else bin_means(y, 2 + j, o)
    out = to_layout(op, y, canon, out_layout or layout)
    # Never the data itself (all bins the identity): the result owns its buffer.
    return np.array(out, order="C", copy=True) if np.shares_memory(out, x) else np.ascontiguousarray(out)
