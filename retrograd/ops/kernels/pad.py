"""nn.pad (constant, reflect, replicate, circular; negative widths crop) and its adjoint, by index maps."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import all_finite

# TVM's modes and NumPy's names for them.
_NUMPY_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _widths(op, x_ndim, pad_width):
    w = [int(v) for v in pad_width]
    if len(w) != 2 * x_ndim:
        raise KernelError(f"{op}: pad_width needs 2 entries per axis ({2 * x_ndim}), got {len(w)}")
    return list(zip(w[0::2], w[1::2]))


def source_index(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of the padded axis, the input position it reads (-1: the constant)."""
    if mode not in _NUMPY_MODE:
        raise KernelError(f"pad: pad_mode must be one of {', '.join(_NUMPY_MODE)}, got {mode!r}")
    if mode == "constant":
        # Output position j reads j - before: negative widths shift or shorten, and may also drop the
        # padding on the other side when they remove more than the data (n=0, (1, -1) gives nothing).
        j = np.arange(n + before + after) - before
        return np.where((j >= 0) & (j < n), j, -1)
    idx = np.arange(n)[max(0, -before) : n - max(0, -after)]
    b, a = max(0, before), max(0, after)
    if idx.size == 0 or (mode == "reflect" and idx.size < 2 and (b or a)):
        raise KernelError(f"pad: cannot {mode}-pad an axis of {idx.size} element(s)")
    return np.pad(idx, (b, a), mode=_NUMPY_MODE[mode])


def pad(data, *, pad_width, pad_value=0.0, pad_mode="constant"):
    """data widened by (before, after) per axis; negative widths remove elements."""
    x = np.asarray(data)
    widths = _widths("pad", x.ndim, pad_width)
    if pad_mode == "constant" and any(max(0, -b) + max(0, -a) > n for n, (b, a) in zip(x.shape, widths)):
        out = np.full(tuple(n + b + a for n, (b, a) in zip(x.shape, widths)), pad_value, x.dtype)
        idx = [source_index(n, b, a, pad_mode) for n, (b, a) in zip(x.shape, widths)]
        out[np.ix_(*[np.flatnonzero(i >= 0) for i in idx])] = x[np.ix_(*[i[i >= 0] for i in idx])]
        return out
    if pad_mode == "constant":
        crop = tuple(slice(max(0, -b), x.shape[i] - max(0, -a)) for i, (b, a) in enumerate(widths))
        out = np.pad(x[crop], [(max(0, b), max(0, a)) for b, a in widths], constant_values=x.dtype.type(pad_value))
        return np.ascontiguousarray(out)
    out = x
    for axis, (b, a) in enumerate(widths):
        if b or a:
            out = np.take(out, source_index(x.shape[axis], b, a, pad_mode), axis=axis)
    return np.ascontiguousarray(out) if out is not x else np.array(x, order="C", copy=True)


def pad_backward(output_grad, data, *, pad_width, pad_value=0.0, pad_mode="constant"):
    """The adjoint of pad: each input position sums the gradient of every padded position reading it."""
    x = np.asarray(data)
    widths = _widths("pad_backward", x.ndim, pad_width)
    g = np.asarray(output_grad).astype(x.dtype, copy=False)
    expect = tuple(n + b + a for n, (b, a) in zip(x.shape, widths))
    if g.shape != expect:
        raise KernelError(f"pad_backward: output_grad has shape {g.shape}, expected {expect}")
    for axis, (b, a) in enumerate(widths):
        idx = source_index(x.shape[axis], b, a, pad_mode)
        if pad_mode == "constant" or (b <= 0 and a <= 0) or not all_finite(g):
            # Every input position read at most once: a slice (and zeros where cropped away). Read more often,
            # by a reflection with a NaN or infinity in the gradient: a scatter-add, as the fold matrix's
            # zeros would spread it over the axis.
            keep = idx >= 0
            out = np.zeros(g.shape[:axis] + (x.shape[axis],) + g.shape[axis + 1 :], g.dtype)
            sl = (slice(None),) * axis
            if pad_mode == "constant" or (b <= 0 and a <= 0):
                out[sl + (idx[keep],)] = g[sl + (np.flatnonzero(keep),)]
            else:
                np.add.at(out, sl + (idx[keep],), g[sl + (np.flatnonzero(keep),)])
            g = out
            continue
        # A 0/1 matrix maps padded positions to sources: one matmul per axis.
        fold = np.zeros((x.shape[axis], idx.size), g.dtype)
        fold[idx, np.arange(idx.size)] = 1
        g = np.moveaxis(np.tensordot(fold, g, axes=([1], [axis])), 0, axis)
    return np.ascontiguousarray(g)
