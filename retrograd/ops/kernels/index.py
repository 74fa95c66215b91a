"""take and take_backward (gathering rows along an axis, scattering gradients back with duplicates summed), and where."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError

_MODES = ("fast", "clip", "wrap", "nan")
# A duplicate round cheaper than the tail's sort-and-reduce needs about this many rows.
_MIN_ROUND_ROWS = 256


def _source(op, x, axis):
    """x as the array the indices address (flattened when axis is None) and the normalized axis."""
    x = np.asarray(x)
    if axis is None:
        return x.reshape(-1), 0
    if not isinstance(axis, (int, np.integer)) or not -x.ndim <= axis < x.ndim:
        raise KernelError(f"{op}: axis {axis!r} out of range for an array of {x.ndim} dimensions")
    return x, int(axis) % x.ndim


def checked_indices(op, indices, size, mode, axis):
    """Indices as intp in [0, size) under `mode`, and the mask of the ones mode 'nan' drops (or None)."""
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise KernelError(f"{op}: indices must have an integer dtype, got {idx.dtype}")
    if mode not in _MODES:
        raise KernelError(f"{op}: mode must be one of {_MODES}, got {mode!r}")
    if idx.dtype.kind == "u" and idx.dtype.itemsize >= np.dtype(np.intp).itemsize:
        # uint64 beyond intp would wrap to negative (and read from the end): settle them unsigned first.
        if mode == "wrap":
            idx = np.mod(idx, max(size, 1))
        elif mode == "fast" and (idx >= size).any():
            raise KernelError(f"{op}: index {idx[idx >= size][0]} out of range for axis {axis} of size {size}")
        else:
            idx = np.minimum(idx, size)  # still out of range: clipped by clip, dropped by nan
    idx = idx.astype(np.intp, copy=False)
    if idx.size and size == 0:
        raise KernelError(f"{op}: cannot take indices from axis {axis} of size 0")
    if mode == "clip":
        return np.clip(idx, 0, max(size - 1, 0)), None
    if mode == "wrap":
        return np.mod(idx, max(size, 1)), None
    if mode == "nan":
        bad = (idx < 0) | (idx >= size)
        return np.where(bad, 0, idx), bad
    # fast: negative indices count from the end, as in NumPy; anything else out of range is an error.
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        raise KernelError(f"{op}: index {idx[bad][0]} out of range for axis {axis} of size {size}")
    return np.where(idx < 0, idx + size, idx) if (idx < 0).any() else idx, None


def take(x, indices, *, axis=None, mode="fast"):
    """Elements of x at `indices` along `axis` (of the flattened x when axis is None)."""
    op = "take"
    src, ax = _source(op, x, axis)
    idx, dropped = checked_indices(op, indices, src.shape[ax], mode, axis)
    out = src[idx] if ax == 0 else np.take(src, idx, axis=ax)
    if dropped is not None and dropped.any():
        if src.dtype.kind not in "fc":
            raise KernelError(f"{op}: mode 'nan' needs a float array, got {src.dtype}")
        mask = dropped.reshape((1,) * ax + idx.shape + (1,) * (src.ndim - ax - 1))
        out = np.where(mask, np.nan, out)
    return out


def take_backward(output_grad, x, indices, *, axis=None, mode="fast"):
    """Gradient of take w.r.t. x: zeros like x with the rows of output_grad added at `indices`
    (duplicates accumulate; indices mode 'nan' dropped contribute nothing)."""
    op = "take_backward"
    x = np.asarray(x)
    src, ax = _source(op, x, axis)
    idx, dropped = checked_indices(op, indices, src.shape[ax], mode, axis)
    g = np.asarray(output_grad)
    expect = src.shape[:ax] + idx.shape + src.shape[ax + 1 :]
    if g.shape != expect:
        raise KernelError(f"{op}: output_grad has shape {g.shape}, expected {expect}")
    pre, post = int(np.prod(src.shape[:ax])), int(np.prod(src.shape[ax + 1 :]))
    dx = np.zeros(src.shape, x.dtype)
    rows = idx.reshape(-1)
    g3 = g.reshape(pre, rows.size, post).astype(x.dtype, copy=False)
    if dropped is not None:
        keep = ~dropped.reshape(-1)
        rows, g3 = rows[keep], g3[:, keep]
    _scatter_sum(dx.reshape(pre, src.shape[ax], post), rows, g3)
    return dx.reshape(x.shape)


def _scatter_sum(dst, rows, src):
    """dst[:, rows[k]] += src[:, k] for all k into an all-zero dst, duplicates summed.

    A stable sort gives each index its occurrence rank; round r adds the rank-r rows, whose targets are
    distinct, so a plain fancy-index add is exact; round 0 lands on zeros, so it is a store (2x
    cheaper). Rounds too small to pay for themselves (heavy duplicates) are summed per index with one
    reduceat instead.
    """
    k = rows.size
    if k == 0:
        return
    order = np.argsort(rows, kind="stable")
    srt = rows[order]
    first = np.empty(k, bool)
    first[0] = True
    np.not_equal(srt[1:], srt[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    if starts.size == k:  # all distinct: a single round
        dst[:, rows] = src
        return
    rank = np.arange(k) - np.repeat(starts, np.diff(np.append(starts, k)))
    counts = np.bincount(rank)
    by_rank = order[np.argsort(rank, kind="stable")]
    offsets = np.concatenate(([0], np.cumsum(counts)))
    sel = by_rank[: counts[0]]
    dst[:, rows[sel]] = src[:, sel]
    r = 1
    while r < counts.size and counts[r] >= _MIN_ROUND_ROWS:
        sel = by_rank[offsets[r] : offsets[r + 1]]
        dst[:, rows[sel]] += src[:, sel]
        r += 1
    if r == counts.size:
        return
    # The tail: rows of rank >= r, in sorted-index order, summed per index and added once.
    tail = rank >= r
    tail_rows = srt[tail]
    heads = np.flatnonzero(np.r_[True, tail_rows[1:] != tail_rows[:-1]])
    dst[:, tail_rows[heads]] += np.add.reduceat(src[:, order[tail]], heads, axis=1)


def where(condition, x1, x2):
    """np.where as a bitwise select (see `where_into`); other dtypes take np.where."""
    c, a, b = np.asarray(condition), np.asarray(x1), np.asarray(x2)
    if c.dtype != np.bool_ or a.dtype != b.dtype or a.dtype.itemsize not in (1, 2, 4, 8) or a.dtype.kind not in "biufc":
        return np.asarray(np.where(c, a, b), order="C")
    return where_into(c, a, b, out=np.empty(np.broadcast_shapes(c.shape, a.shape, b.shape), a.dtype))


def negative_into(x, out):
    """np.negative written over `out`. NumPy 2.4's negative loop reads a strided input wrongly when it writes
    over that input (a column of a float32 (n, 4) or float64 (n, 8) array, negated in place, gets values
    from the first row): such an input is negated aside, then copied over."""
    if not (x.flags.c_contiguous or x.flags.f_contiguous) and np.may_share_memory(x, out):
        np.copyto(out, np.negative(x))
        return out
    return np.negative(x, out=out)


def where_into(condition, x1, x2, out):
    """x2 ^ ((x1 ^ x2) & mask) into `out` (a bool condition, x1, x2 and out of one dtype): a
    data-dependent condition (a relu's mask) makes np.where's per-element branch mispredict, which
    measured 20-40x slower than these four passes. Bit-exact (NaN payloads and signed zeros kept)."""
    c, a, b = np.asarray(condition), np.asarray(x1), np.asarray(x2)
    bits = np.dtype(f"i{a.dtype.itemsize}")
    o, ai, bi = out.view(bits), a.view(bits), b.view(bits)
    # All ones where true, zero where false. A plain widening copy, then a negation in place: negating
    # straight from int8 into the wider type runs NumPy's buffered casting loop (28 vs 15 µs a where
    # on 65k float32).
    np.copyto(o, c.view(np.int8), casting="unsafe")
    negative_into(o, out=o)
    if b.ndim == 0 and not bi.any():  # a +0 else-branch (a relu backward): one pass fewer
        np.bitwise_and(o, ai, out=o)
        return out
    np.bitwise_and(o, np.bitwise_xor(ai, bi), out=o)
    np.bitwise_xor(o, bi, out=o)
    return out
