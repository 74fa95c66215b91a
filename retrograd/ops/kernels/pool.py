"""Max and average 2-D pooling, forward and backward: separable passes over cache-sized chunks of planes."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import Window2d, check_float, check_ndim, plane_chunks, to_layout


def _setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout):
    data = np.asarray(data)
    check_float(op, "data", data)
    x = to_layout(op, data, layout, "NCHW")
    return x, Window2d(op, x.shape[2:], pool_size, strides, padding, dilation, ceil_mode)


def _finish(op, y, n, c, layout, out_layout):
    y = y.reshape(n, c, *y.shape[1:])
    return np.ascontiguousarray(to_layout(op, y, "NCHW", out_layout or layout))


def _grad_planes(op, output_grad, layout, x, win):
    """output_grad (laid out as `layout`) as (N*C, OH, OW) planes of the data's dtype, shape-checked."""
    g = to_layout(op, np.asarray(output_grad), layout, "NCHW")
    expect = (x.shape[0], x.shape[1], win.oh, win.ow)
    if g.shape != expect:
        raise KernelError(f"{op}: output_grad has shape {g.shape} in NCHW order, expected {expect}")
    return _planes(g.astype(x.dtype, copy=False))


class _PaddedChunks:
    """Copies chunks of planes into one reused buffer whose border holds `fill` (padding, ceil_mode overhang)."""

    def __init__(self, planes, win, fill):
        self.planes, self.win = planes, win
        hn, wn = win.padded_hw
        self.direct = win.unpadded
        self.chunks = list(plane_chunks(planes.shape[0], hn * wn * planes.itemsize))
        self.size = self.chunks[0].stop - self.chunks[0].start if self.chunks else 0
        if not self.direct:
            self.buf = np.full((self.size, hn, wn), fill, planes.dtype)

    def __iter__(self):
        w = self.win
        for sl in self.chunks:
            if self.direct:
                yield sl, self.planes[sl]
            else:
                b = self.buf[: sl.stop - sl.start]
                b[:, w.pt : w.pt + w.h, w.pl : w.pl + w.w] = self.planes[sl]
                yield sl, b


def _planes(x):
    n, c, h, w = x.shape
    return x.reshape(n * c, h, w)


def max_pool2d(
    data,
    *,
    pool_size=(1, 1),
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    ceil_mode=False,
    count_include_pad=False,
    layout="NCHW",
    out_layout=None,
):
    """Max over each window; padding and ceil_mode overhang hold -inf, so they never win."""
    op = "max_pool2d"
    x, win = _setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    n, c = x.shape[:2]
    out = np.empty((n * c, win.oh, win.ow), x.dtype)
    rows_taps, col_taps = win.row_taps(), win.col_taps()
    chunks = _PaddedChunks(_planes(x), win, -np.inf)
    rows_buf = np.empty((chunks.size, win.padded_hw[0], win.ow), x.dtype)
    for sl, b in chunks:
        # Separable: a max along W over all padded rows, then along H.
        rows = rows_buf[: sl.stop - sl.start]
        rows[...] = b[:, :, col_taps[0]]
        for cs in col_taps[1:]:
            np.maximum(rows, b[:, :, cs], out=rows)
        o = out[sl]
        o[...] = rows[:, rows_taps[0]]
        for rs in rows_taps[1:]:
            np.maximum(o, rows[:, rs], out=o)
    return _finish(op, out, n, c, layout, out_layout)


def max_pool2d_backward(
    output_grad,
    data,
    *,
    pool_size=(1, 1),
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    ceil_mode=False,
    count_include_pad=False,
    layout="NCHW",
    out_layout=None,
):
    """Each window's gradient goes to its first maximum in row-major order; overlapping windows accumulate."""
    op = "max_pool2d_backward"
    x, win = _setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    g = _grad_planes(op, output_grad, out_layout or layout, x, win)
    n, c, h, w = x.shape
    hn, wn = win.padded_hw
    dx = np.empty((n * c, h, w), x.dtype)
    rows_taps, col_taps = win.row_taps(), win.col_taps()
    itype = np.uint8 if win.kh * win.kw < 256 else np.int32
    chunks = _PaddedChunks(_planes(x), win, -np.inf)
    p0 = chunks.size
    # Temporaries reused across chunks (allocation of fresh pages costs more than the work).
    m1 = np.empty((p0, hn, win.ow), x.dtype)
    j1 = np.empty((p0, hn, win.ow), itype)
    m2 = np.empty((p0, win.oh, win.ow), x.dtype)
    k2 = np.empty((p0, win.oh, win.ow), itype)
    better = np.empty((p0, hn, win.ow), bool)
    dbuf = None if win.unpadded else np.empty((p0, hn, wn), x.dtype)
    for sl, b in chunks:
        p = sl.stop - sl.start
        m, j, mm, kk, bt = m1[:p], j1[:p], m2[:p], k2[:p], better[:p]
        # Along W: running max and the first column offset reaching it (strict > keeps the first).
        m[...] = b[:, :, col_taps[0]]
        j.fill(0)
        for jj, cs in enumerate(col_taps[1:], 1):
            v = b[:, :, cs]
            np.greater(v, m, out=bt)
            np.copyto(m, v, where=bt)
            np.copyto(j, jj, where=bt)
        # Along H: the first row offset reaching the max; the winner's column offset rides along.
        bt2 = bt[:, : win.oh]
        mm[...] = m[:, rows_taps[0]]
        kk[...] = j[:, rows_taps[0]]
        for ii, rs in enumerate(rows_taps[1:], 1):
            v = m[:, rs]
            np.greater(v, mm, out=bt2)
            np.copyto(mm, v, where=bt2)
            np.copyto(kk, j[:, rs] + ii * win.kw, where=bt2)
        gs = g[sl]
        d = dx[sl] if dbuf is None else dbuf[:p]
        d.fill(0)
        for ii, rs in enumerate(rows_taps):
            for jj, cs in enumerate(col_taps):
                view = d[:, rs, cs]
                np.add(view, gs, out=view, where=kk == ii * win.kw + jj)
        if dbuf is not None:
            dx[sl] = d[:, win.pt : win.pt + h, win.pl : win.pl + w]
    return _finish(op, dx, n, c, layout, layout)


@lru_cache(maxsize=256)
def _avg_matrix(size, k, s, p0, p1, d, n_out, include_pad, dtype):
    """(n_out, size) averaging matrix along one axis: 1/count at each in-bounds tap of each window."""
    starts = np.arange(n_out) * s - p0
    taps = starts[:, None] + np.arange(k) * d
    inside = (taps >= 0) & (taps < size)
    a = np.zeros((n_out, size))
    rows = np.broadcast_to(np.arange(n_out)[:, None], taps.shape)
    a[rows[inside], taps[inside]] = 1.0
    # The divisor is separable: per axis, taps inside the padded input (or inside the input).
    count = ((taps >= -p0) & (taps < size + p1)).sum(1) if include_pad else inside.sum(1)
    a /= np.maximum(count, 1)[:, None]
    a = a.astype(dtype)
    a.flags.writeable = False
    return a


def _avg_matrices(win, count_include_pad, dtype):
    ah = _avg_matrix(win.h, win.kh, win.sh, win.pt, win.pb, win.dh, win.oh, bool(count_include_pad), np.dtype(dtype))
    aw = _avg_matrix(win.w, win.kw, win.sw, win.pl, win.pr, win.dw, win.ow, bool(count_include_pad), np.dtype(dtype))
    return ah, aw


def _separable(planes, left, right, out_hw):
    """left @ plane @ right.T for every plane, in cache-sized chunks, as two BLAS matmuls per chunk."""
    n, h, w = planes.shape
    oh, ow = out_hw
    out = np.empty((n, oh, ow), planes.dtype)
    rt = np.ascontiguousarray(right.T)
    for sl in plane_chunks(n, h * w * planes.itemsize):
        p = sl.stop - sl.start
        t = np.matmul(planes[sl].reshape(p * h, w), rt).reshape(p, h, ow)
        np.matmul(left, t, out=out[sl])
    return out


def avg_pool2d(
    data,
    *,
    pool_size=(1, 1),
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    ceil_mode=False,
    count_include_pad=False,
    layout="NCHW",
    out_layout=None,
):
    """Mean over each window; the divisor counts padding only when count_include_pad, never ceil_mode overhang."""
    op = "avg_pool2d"
    x, win = _setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    n, c = x.shape[:2]
    ah, aw = _avg_matrices(win, count_include_pad, x.dtype)
    out = _separable(_planes(x), ah, aw, (win.oh, win.ow))
    return _finish(op, out, n, c, layout, out_layout)


def avg_pool2d_backward(
    output_grad,
    data,
    *,
    pool_size=(1, 1),
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    ceil_mode=False,
    count_include_pad=False,
    layout="NCHW",
    out_layout=None,
):
    """The exact derivative of avg_pool2d (a linear map): the transposed averaging matrices."""
    op = "avg_pool2d_backward"
    x, win = _setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    g = _grad_planes(op, output_grad, out_layout or layout, x, win)
    n, c, h, w = x.shape
    ah, aw = _avg_matrices(win, count_include_pad, x.dtype)
    dx = _separable(g, ah.T, aw.T, (h, w))
    return _finish(op, dx, n, c, layout, layout)
