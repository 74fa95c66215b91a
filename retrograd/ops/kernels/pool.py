"""Max and average 2-D pooling, forward and backward, on stride-phase grids of cache-sized chunks of planes."""

from __future__ import annotations

import functools

import numpy as np

import retrograd.tuning as tuning
from retrograd.errors import KernelError
from retrograd.ops.kernels import parallel, window_gather
from retrograd.ops.kernels.phase import PhaseGrid
from retrograd.ops.kernels.pool_nan import nan_last
from retrograd.ops.kernels.tiles import merge_taps, split_taps
from retrograd.ops.kernels.window import CHUNK_BYTES, Window2d, check_float, plane_chunk_size, plane_chunks, to_layout

# Pure elementwise work on contiguous tap slices: no BLAS (whose threads stall on a busy machine), and
# every temporary is allocated once per call and reused across chunks (fresh pages cost more than
# the arithmetic on them).


class _Setup:
    """The data as (N*C, H, W) planes, the window, and (made when a kernel asks) its phase grid and the
    planes per chunk."""

    def __init__(self, op, data, pool_size, strides, padding, dilation, ceil_mode, layout):
        data = np.asarray(data)
        check_float(op, "data", data)
        x = to_layout(op, data, layout, "NCHW")
        self.op, self.nchw = op, x.shape
        n, c, h, w = x.shape
        self.planes = x.reshape(n * c, h, w)
        self.win = Window2d(op, (h, w), pool_size, strides, padding, dilation, ceil_mode)
        # Windows mostly of padding (or of more taps than the input has): gathered, not laid out.
        self.axes = window_gather.axes2d(self.win)
        self.gather = window_gather.degenerate(self.axes)

    @functools.cached_property
    def grid(self) -> PhaseGrid:
        return PhaseGrid(self.win)

    @functools.cached_property
    def size(self) -> int:
        """Planes per chunk."""
        return plane_chunk_size(self.grid.plane * self.win.sh * self.win.sw * self.planes.itemsize)

    def grad(self, output_grad, layout):
        """output_grad (laid out as `layout`) as (N*C, OH, OW) planes of the data's dtype."""
        g = to_layout(self.op, np.asarray(output_grad), layout, "NCHW")
        expect = self.nchw[:2] + (self.win.oh, self.win.ow)
        if g.shape != expect:
            raise KernelError(f"{self.op}: output_grad has shape {g.shape} in NCHW order, expected {expect}")
        return g.reshape(self.planes.shape[0], *expect[2:]).astype(self.planes.dtype, copy=False)

    def finish(self, planes, layout):
        """(N*C, h, w) planes as an array laid out as `layout`."""
        y = planes.reshape(*self.nchw[:2], *planes.shape[1:])
        return np.ascontiguousarray(to_layout(self.op, y, "NCHW", layout))


def _pool_ns(s) -> float:
    return s.planes.nbytes * len(s.grid.taps) / tuning.COPY_BYTES_PER_NS


def _pool(s, fill, ufunc, scale=None):
    """Reduce every window with `ufunc` (padding reads `fill`), then multiply by `scale` if given."""
    planes, win, grid, size = s.planes, s.win, s.grid, s.size
    out = np.empty((planes.shape[0], win.oh, win.ow), planes.dtype)

    def part(ps):
        src = grid.buffer(size, planes.dtype, fill)
        acc = np.empty((size, grid.length), planes.dtype)
        for sl in plane_chunks(ps.stop - ps.start, size, ps.start):
            p = sl.stop - sl.start
            grid.load(src, planes[sl])
            a = acc[:p]
            a[...] = grid.tap(src, 0, p)
            for k in range(1, len(grid.taps)):
                ufunc(a, grid.tap(src, k, p), out=a)
            if scale is not None:
                a *= scale
            out[sl] = a.reshape(p, win.oh, grid.wq)[:, :, : win.ow]

    parallel.run_parts(part, planes.shape[0], _pool_ns(s))
    return out


def _scatter(s, g, make_spread, rewrites: bool = False):
    """dx from output gradients: per chunk, `spread(p, sl, gf, taps_of_dst)` adds the gradient on the
    grid (0 in junk columns) into the tap slices of a zeroed grid, which is then cropped into dx.
    `make_spread()` gives each part of the planes its own `spread` (and scratch buffers). `rewrites`: the
    spread writes (not adds) the same cells for every chunk, so the grid is zeroed once, not per chunk."""
    planes, win, grid, size = s.planes, s.win, s.grid, s.size
    dx = np.empty(planes.shape, planes.dtype)

    def part(ps):
        spread = make_spread()
        dst = grid.buffer(size, planes.dtype, 0)
        gq = np.zeros((size, win.oh, grid.wq), planes.dtype)
        for sl in plane_chunks(ps.stop - ps.start, size, ps.start):
            p = sl.stop - sl.start
            gq[:p, :, : win.ow] = g[sl]
            if not rewrites:
                dst[:, :, :p].fill(0)
            spread(p, sl, gq[:p].reshape(p, grid.length), [grid.tap(dst, k, p) for k in range(len(grid.taps))])
            grid.store(dst, dx[sl])

    parallel.run_parts(part, planes.shape[0], 2 * _pool_ns(s))
    return dx


FLOAT64_EXACT = 2**53  # the integers a float64 holds exactly (the integer max pools' bound)


def on_integers(kernel):
    """A max pooling kernel that also takes integer data, as TVM and ONNX do: the max runs on float64 (exact
    up to 2**53 in magnitude; larger 64-bit values are refused), then back in the data's dtype, a window of
    padding alone giving the dtype's least value (what TVM pads integers with)."""

    @functools.wraps(kernel)
    def run(data, **attrs):
        x = np.asarray(data)
        if x.dtype.kind not in "iu":
            return kernel(data, **attrs)
        if x.size and x.dtype.itemsize == 8 and (int(x.max()) > FLOAT64_EXACT or int(x.min()) < -FLOAT64_EXACT):
            raise KernelError(f"{kernel.__name__}: {x.dtype} data beyond 2**53 in magnitude is not supported")
        y = kernel(x.astype(np.float64), **attrs)
        return np.where(np.isneginf(y), np.iinfo(x.dtype).min, y).astype(x.dtype)

    return run


@on_integers
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
    """Max over each window; padding and the ceil_mode overhang hold -inf, so they never win."""
    op = "max_pool2d"
    s = _Setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    if s.gather:
        return s.finish(window_gather.pool(s.planes, s.axes, "max"), out_layout or layout)
    if _small_tiling(s):
        return s.finish(_tiled_max(s.planes, s.win), out_layout or layout)
    return s.finish(_pool(s, -np.inf, np.maximum), out_layout or layout)


@nan_last(max_pool2d, "NCHW")
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
    """Each window's gradient goes to its first maximum in row-major window order (as in PyTorch; a window
    holding NaN: to its last NaN, see pool_nan.py);
    padding never wins; overlapping windows accumulate. Needs the data, not saved indices."""
    op = "max_pool2d_backward"
    s = _Setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    g = s.grad(output_grad, out_layout or layout)
    win = s.win
    if s.gather:
        return s.finish(window_gather.max_backward(s.planes, g, s.axes), layout)
    if _small_tiling(s):
        return s.finish(_max_backward_tiled(s.planes, g, win), layout)
    planes, grid, size = s.planes, s.grid, s.size
    # Each tap in a phase of its own (stride >= the window's reach): no two taps share a cell of the
    # grid, so a tap's gradient is written, not added, over the same cells for every chunk; the cells
    # no tap reaches keep the zeros the buffer starts with.
    own_phase = len({phase for phase, _ in grid.taps}) == len(grid.taps)

    def make_spread():
        src = grid.buffer(size, planes.dtype, -np.inf)
        top, contrib = (np.empty((size, grid.length), planes.dtype) for _ in range(2))
        hit, free = (np.empty((size, grid.length), bool) for _ in range(2))

        def spread(p, sl, gf, dst_taps):
            grid.load(src, planes[sl])
            taps = [grid.tap(src, k, p) for k in range(len(grid.taps))]
            m, e, f, t = top[:p], hit[:p], free[:p], contrib[:p]
            m[...] = taps[0]
            for v in taps[1:]:
                np.maximum(m, v, out=m)
            # Taps in row-major order; `f` marks windows whose maximum is not found yet (after the
            # first tap: those it does not hold; the last tap needs no update).
            last = len(taps) - 1
            for k, (v, d) in enumerate(zip(taps, dst_taps)):
                np.equal(v, m, out=e)
                if k == 0:
                    np.logical_not(e, out=f)
                else:
                    e &= f
                    if k < last:
                        f ^= e
                # Multiplying by the mask is 4x faster than np.where (a non-finite gradient smears nan).
                if own_phase:
                    np.multiply(gf, e, out=d)
                else:
                    np.multiply(gf, e, out=t)
                    d += t

        return spread

    return s.finish(_scatter(s, g, make_spread, rewrites=own_phase), layout)


def _small_tiling(s) -> bool:
    """Small data in windows that tile the plane (stride = pool size, no padding or dilation): the taps
    split apart (kernels/tiles.py) beat loading and storing phase grids (digits CNN, (32, 32, 8, 8):
    forward 0.06 ms, backward 0.13 ms; the phase grids took 0.9 ms backward, strided tap views 0.29);
    past a cache's worth the grids, split over the kernel threads, win (MNIST net at two threads:
    forward 1.2 vs 2.2 ms, backward 3.4 vs 5.8 ms)."""
    win = s.win
    return (win.kh, win.kw) == (win.sh, win.sw) and win.dh == win.dw == 1 and not any((win.pt, win.pl, win.pb, win.pr)) \
        and win.oh * win.kh <= win.h and win.ow * win.kw <= win.w and s.planes.nbytes <= CHUNK_BYTES


def _tap_max(planes, win):
    """(taps, maxima): the taps split into contiguous arrays (see kernels/tiles.py), and each tile's
    maximum, flat."""
    taps = split_taps(planes, win.kh, win.kw, win.oh, win.ow)
    flat = taps.reshape(win.kh * win.kw, -1)
    m = flat[0].copy()
    for t in flat[1:]:
        np.maximum(m, t, out=m)
    return taps, m


def _tiled_max(planes, win):
    """Each tile's maximum, as (planes, oh, ow)."""
    return _tap_max(planes, win)[1].reshape(planes.shape[0], win.oh, win.ow)


def _max_backward_tiled(planes, g, win):
    """Windows that tile the plane (stride = pool size, no padding; floor mode may leave rows and columns
    no window reads, which get 0), on the taps split into contiguous arrays."""
    taps, m = _tap_max(planes, win)
    flat = taps.reshape(win.kh * win.kw, -1)
    gf = g.reshape(-1)
    # Taps in row-major order; `f` marks windows whose maximum is not found yet. Each tap's slot takes
    # its gradient once its comparison is done.
    f, e = np.ones(m.shape, bool), np.empty(m.shape, bool)
    for t in flat:
        np.equal(t, m, out=e)
        e &= f
        f ^= e
        np.multiply(gf, e, out=t)
    dx = np.empty(planes.shape, planes.dtype)
    merge_taps(taps, dx)
    return dx


def _axis_counts(size, k, s, p0, p1, d, n_out, include_pad):
    """Per window along one axis, the taps the divisor counts: those inside the input, or inside the
    padded input when include_pad; never the ceil_mode overhang (as TVM and PyTorch do)."""
    taps = (np.arange(n_out) * s - p0)[:, None] + np.arange(k) * d
    lo, hi = (-p0, size + p1) if include_pad else (0, size)
    return ((taps >= lo) & (taps < hi)).sum(1)


def _avg_scale(win, grid, count_include_pad, dtype):
    """1/divisor on the phase grid, flattened; 0 in junk columns and for windows with nothing to count
    (so an all-padding window averages to 0, as in TVM)."""
    cip = bool(count_include_pad)
    counts = (
        _axis_counts(win.h, win.kh, win.sh, win.pt, win.pb, win.dh, win.oh, cip),
        _axis_counts(win.w, win.kw, win.sw, win.pl, win.pr, win.dw, win.ow, cip),
    )
    inv_h, inv_w = (np.where(c > 0, 1.0 / np.maximum(c, 1), 0.0) for c in counts)
    # The divisor is separable: the product of the per-axis counts.
    scale = np.zeros((win.oh, grid.wq))
    scale[:, : win.ow] = np.outer(inv_h, inv_w)
    return scale.reshape(-1).astype(dtype)


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
    """Mean over each window; the divisor counts padding only when count_include_pad, never the
    ceil_mode overhang."""
    op = "avg_pool2d"
    s = _Setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    if s.gather:
        return s.finish(window_gather.pool(s.planes, s.axes, "avg", bool(count_include_pad)), out_layout or layout)
    scale = _avg_scale(s.win, s.grid, count_include_pad, s.planes.dtype)
    return s.finish(_pool(s, 0, np.add, scale), out_layout or layout)


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
    """The exact derivative of avg_pool2d, ceil_mode included: each window spreads g / divisor over
    its in-bounds taps."""
    op = "avg_pool2d_backward"
    s = _Setup(op, data, pool_size, strides, padding, dilation, ceil_mode, layout)
    g = s.grad(output_grad, out_layout or layout)
    if s.gather:
        dx = window_gather.avg_backward(g, s.axes, s.planes.shape[1:], bool(count_include_pad))
        return s.finish(dx, layout)
    scale = _avg_scale(s.win, s.grid, count_include_pad, s.planes.dtype)

    def spread(p, sl, gf, dst_taps):
        gf *= scale
        for d in dst_taps:
            d += gf

    return s.finish(_scatter(s, g, lambda: spread), layout)
