"""2-D convolution and its adjoint (conv2d_transpose) as BLAS matmuls over shifted views of padded buffers."""

from __future__ import annotations

import numpy as np

import retrograd.tuning as tuning
from retrograd.errors import KernelError
from retrograd.ops.kernels import conv_gather, parallel, window_gather
from retrograd.ops.kernels.window import Window2d, check_float, padding4, pair, plane_chunks, to_layout

# Column buffers of about this size. Fewer, wider BLAS calls matter: OpenBLAS threads spin at every
# call's sync points, and on a busy machine small calls measured 2-5x slower.
_COLS_BYTES = 16 << 20


def result_dtype(op, out_dtype, *arrays):
    for name, a in zip(("data", "weight"), arrays):
        check_float(op, name, a)
    if out_dtype in (None, "", "void"):
        return np.result_type(*arrays)
    dt = np.dtype(out_dtype)
    if dt.kind != "f":
        raise KernelError(f"{op}: out_dtype must be a float dtype, got {out_dtype!r}")
    return dt


def _groups(op, groups, *named):
    if not isinstance(groups, (int, np.integer)) or isinstance(groups, bool) or groups < 1:
        raise KernelError(f"{op}: groups must be a positive int, got {groups!r}")
    for name, n in named:
        if n % groups:
            raise KernelError(f"{op}: {name} ({n}) not divisible by groups ({groups})")
    return int(groups)


def conv2d(
    data,
    weight,
    *,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    dilation=(1, 1),
    groups=1,
    data_layout="NCHW",
    kernel_layout="OIHW",
    out_layout=None,
    out_dtype=None,
):
    """Cross-correlation of data (N, C, H, W) with weight (O, C/groups, kh, kw), TVM Relax semantics.
    Other layouts are transposed views; TVM's weight gradient (CNHW data, IOHW kernel) is fast too."""
    op = "conv2d"
    x = to_layout(op, np.asarray(data), data_layout, "NCHW")
    w = to_layout(op, np.asarray(weight), kernel_layout, "OIHW")
    dtype = result_dtype(op, out_dtype, x, w)
    g = _groups(op, groups, ("input channels", x.shape[1]), ("output channels", w.shape[0]))
    if x.shape[1] != w.shape[1] * g:
        raise KernelError(f"{op}: data has {x.shape[1]} channels, weight expects {w.shape[1]} x {g} groups")
    win = Window2d(op, x.shape[2:], w.shape[2:], strides, padding, dilation, kernel_name="kernel size")
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    axes = window_gather.axes2d(win)
    if window_gather.degenerate(axes):  # windows mostly of padding: from the taps that meet the data
        return np.ascontiguousarray(to_layout(op, conv_gather.conv(x, w, axes, g), "NCHW", out_layout or data_layout))
    if g == 1 and (data_layout, kernel_layout, out_layout) == ("CNHW", "IOHW", "CNHW") and win.kh * win.kw > win.oh * win.ow:
        # TVM's weight gradient of conv2d(X, W): X is `data` and the output gradient is `weight`, both
        # NCHW in memory; the result, CNHW, is dW as OIHW. Computed directly as sum_n G_n @ im2col(X_n)^T.
        fwd = Window2d(op, x.shape[2:], (win.oh, win.ow), (win.dh, win.dw), padding, (win.sh, win.sw), kernel_name="kernel size")
        xs, gs = x.transpose(1, 0, 2, 3), w.transpose(1, 0, 2, 3)
        if (fwd.oh, fwd.ow) == gs.shape[2:]:
            if _wide(fwd, xs.shape[1]):
                return _weight_grad_wide(xs, gs, fwd)
            return _weight_grad_by_images(xs, gs, fwd)
    y = _conv(x, w, win, g)
    return np.ascontiguousarray(to_layout(op, y, "NCHW", out_layout or data_layout))


def _conv(x, w, win, g):
    """Pick the formulation: loop over whichever is fewer, kernel taps (the usual case) or output
    positions (a weight gradient, whose "kernel" is a whole output gradient)."""
    if win.kh * win.kw > win.oh * win.ow:
        return _conv_by_outputs(x, w, win, g)
    if g == 1:
        if _wide(win, x.shape[1]):
            return _conv_wide(x, w, win)
        return _conv_by_images(x, w, win)
    return _conv_by_taps(x, w, win, g)


def _wide(win, channels: int) -> bool:
    """Small planes at unit strides: their im2col rows are too short for NumPy's copies to stream.
    (One channel keeps the exact grid: its matmul is too small for the junk columns to pay.)"""
    return win.sh == win.sw == 1 and win.ow <= WIDE_MAX_WIDTH and channels > 1


# Widest output row computed on the padded grid (whose junk columns cost extra matmul work).
WIDE_MAX_WIDTH = 16


def _wide_grid(x, win):
    """(padded width, wide positions per image, flattened plane length) of the padded grid."""
    hp, wp = x.shape[2] + win.pt + win.pb, x.shape[3] + win.pl + win.pr
    wide = win.oh * wp
    return wp, wide, max(hp * wp, (win.kh - 1) * win.dh * wp + (win.kw - 1) * win.dw + wide)


def _wide_cols(xs, win, buf, wide, axes):
    """Load images `xs` into the zero-padded flat planes `buf` (their padding stays zero), and return
    the im2col view: element (b, c, i, j, q) is plane[b, c][q + i*dh*Wp + j*dw], so every tap of
    every (image, channel) is one contiguous run of the wide grid. `axes` orders the view like the
    caller's column buffer."""
    b, c, h, wd = xs.shape
    wp = wd + win.pl + win.pr
    hp = h + win.pt + win.pb
    buf[:b, :, : hp * wp].reshape(b, c, hp, wp)[:, :, win.pt : win.pt + h, win.pl : win.pl + wd] = xs
    src = buf[:b]
    it = src.itemsize
    view = np.lib.stride_tricks.as_strided(
        src, shape=(b, c, win.kh, win.kw, wide), writeable=False,
        strides=(src.strides[0], src.strides[1], win.dh * wp * it, win.dw * it, it))
    return view.transpose(axes)


def _conv_wide(x, w, win):
    """Unit strides on small planes (the digits CNN's 8x8): outputs computed on the padded grid's full
    width (oh x Wp), so each tap's columns are contiguous runs instead of rows of ow values; the junk
    columns past ow are dropped when the result is stored."""
    n, c = x.shape[:2]
    o, k = w.shape[0], win.kh * win.kw
    wp, wide, plane = _wide_grid(x, win)
    y = np.empty((n, o, win.oh, win.ow), x.dtype)
    wm = w.reshape(o, c * k)
    per_image = c * k * wide * x.itemsize

    def part(ps):
        m = ps.stop - ps.start
        nb = _images_per_chunk(m, per_image)
        buf = np.zeros((nb, c, plane), x.dtype)
        cols = np.empty(c * k * nb * wide, x.dtype)
        yw = np.empty(o * nb * wide, x.dtype)
        for sl in plane_chunks(m, nb, ps.start):
            b = sl.stop - sl.start
            # The chunk's images side by side: one (O, C*k) @ (C*k, b*wide) product instead of b narrow ones.
            cb = cols[: c * k * b * wide].reshape(c, win.kh, win.kw, b, wide)
            np.copyto(cb, _wide_cols(x[sl], win, buf, wide, (1, 2, 3, 0, 4)))
            yb = yw[: o * b * wide].reshape(o, b * wide)
            np.matmul(wm, cb.reshape(c * k, b * wide), out=yb)
            y[sl] = yb.reshape(o, b, win.oh, wp)[:, :, :, : win.ow].transpose(1, 0, 2, 3)

    parallel.run_parts(part, n, _gemm_ns(2.0 * n * o * c * k * wide), blas=True)
    return y


# im2col of a few images at a time: the columns stay in cache between the copy and the matmul.
_IMAGE_COLS_BYTES = 2 << 20


def _images_per_chunk(n: int, per_image: int) -> int:
    """Images whose columns fill about _IMAGE_COLS_BYTES (at least one, at most n), evened out over
    the chunks n needs: 32 images in two chunks of 16, not 22 and 10."""
    most = max(1, min(n, _IMAGE_COLS_BYTES // max(1, per_image)))
    chunks = -(-n // most) if n else 1
    return -(-n // chunks) if n else most


def _gemm_ns(flops: float) -> float:
    return flops / tuning.GEMM_FLOPS_PER_NS


def _image_chunks(x, win, cols_bytes_per_image):
    """(slice, images of the slice zero-padded as the window needs, as (b, C, Hp, Wp)) over chunks of x."""
    n, c, h, wd = x.shape
    nb = _images_per_chunk(n, cols_bytes_per_image)
    pads = (win.pt, win.pl, win.pb, win.pr)
    buf = np.zeros((nb, c, h + win.pt + win.pb, wd + win.pl + win.pr), x.dtype) if any(pads) else None
    for sl in plane_chunks(n, nb):
        if buf is None:
            yield sl, x[sl]
        else:
            b = buf[: sl.stop - sl.start]
            b[:, :, win.pt : win.pt + h, win.pl : win.pl + wd] = x[sl]
            yield sl, b


def _im2col(xp, win, cols):
    """cols[b, c, tap, oy, ox] = xp[b, c, oy*sh + i*dh, ox*sw + j*dw] for tap (i, j); `cols` may be a
    transposed view of the caller's buffer, so the copy writes straight into the layout it needs."""
    for t in range(win.kh * win.kw):
        i, j = divmod(t, win.kw)
        rows = slice(i * win.dh, i * win.dh + (win.oh - 1) * win.sh + 1, win.sh)
        cs = slice(j * win.dw, j * win.dw + (win.ow - 1) * win.sw + 1, win.sw)
        cols[:, :, t] = xp[:, :, rows, cs]


def _conv_by_images(x, w, win):
    """One group: per chunk of images, im2col and one batched matmul (O, C*k) @ (b, C*k, OH*OW) that
    writes the NCHW result in place: no transposed copy of the output. Parts of the batch run on the
    kernel threads."""
    n, c = x.shape[:2]
    o, k, npos = w.shape[0], win.kh * win.kw, win.oh * win.ow
    y = np.empty((n, o, win.oh, win.ow), x.dtype)
    wm = w.reshape(o, c * k)
    per_image = c * k * npos * x.itemsize

    def part(ps):
        xs, ys = x[ps], y[ps]
        cols = np.empty(c * k * npos * _images_per_chunk(len(xs), per_image), x.dtype)
        for sl, xp in _image_chunks(xs, win, per_image):
            b = sl.stop - sl.start
            cb = cols[: b * c * k * npos].reshape(b, c, k, win.oh, win.ow)
            _im2col(xp, win, cb)
            np.matmul(wm, cb.reshape(b, c * k, npos), out=ys[sl].reshape(b, o, npos))

    parallel.run_parts(part, n, _gemm_ns(2.0 * n * o * c * k * npos), blas=True)
    return y


def _weight_grad_by_images(x, g, win):
    """dW (O, C, kh, kw) of conv2d(x, W) (one group) from its output gradient g (N, O, OH, OW): per chunk
    of images, im2col laid out as (C*k, b*OH*OW) and one matmul with g's chunk as (O, b*OH*OW). Parts of
    the batch run on the kernel threads, each summing its own dW."""
    n, c = x.shape[:2]
    o, k, npos = g.shape[1], win.kh * win.kw, win.oh * win.ow
    per_image = c * k * npos * x.itemsize

    def part(ps):
        xs, gs = x[ps], g[ps]
        dw = np.zeros((o, c * k), x.dtype)
        step = np.empty_like(dw)
        cols = np.empty(c * k * npos * _images_per_chunk(len(xs), per_image), x.dtype)
        for sl, xp in _image_chunks(xs, win, per_image):
            b = sl.stop - sl.start
            cb = cols[: b * c * k * npos].reshape(c, k, b, win.oh, win.ow)
            _im2col(xp, win, cb.transpose(2, 0, 1, 3, 4))
            gb = np.ascontiguousarray(gs[sl].reshape(b, o, npos).transpose(1, 0, 2)).reshape(o, b * npos)
            np.matmul(gb, cb.reshape(c * k, b * npos).T, out=step)
            dw += step
        return dw

    return parallel.run_sum(part, n, _gemm_ns(2.0 * n * o * c * k * npos), blas=True).reshape(o, c, win.kh, win.kw)


def _weight_grad_wide(x, g, win):
    """dW of a unit-stride conv2d on small planes (see `_conv_wide`): the output gradient laid on the wide
    grid with zeros in the junk columns, so those columns add nothing."""
    n, c = x.shape[:2]
    o, k = g.shape[1], win.kh * win.kw
    wp, wide, plane = _wide_grid(x, win)
    per_image = c * k * wide * x.itemsize

    def part(ps):
        m = ps.stop - ps.start
        nb = _images_per_chunk(m, per_image)
        buf = np.zeros((nb, c, plane), x.dtype)
        cols = np.empty(c * k * nb * wide, x.dtype)
        gw = np.empty(o * nb * wide, x.dtype)
        dw = np.zeros((o, c * k), x.dtype)
        step = np.empty_like(dw)
        for sl in plane_chunks(m, nb, ps.start):
            b = sl.stop - sl.start
            cb = cols[: c * k * b * wide].reshape(c, win.kh, win.kw, b, wide)
            np.copyto(cb, _wide_cols(x[sl], win, buf, wide, (1, 2, 3, 0, 4)))
            gb = gw[: o * b * wide].reshape(o, b, win.oh, wp)
            gb[:, :, :, win.ow :] = 0
            gb[:, :, :, : win.ow] = g[sl].transpose(1, 0, 2, 3)
            np.matmul(gb.reshape(o, b * wide), cb.reshape(c * k, b * wide).T, out=step)
            dw += step
        return dw

    return parallel.run_sum(part, n, _gemm_ns(2.0 * n * o * c * k * wide), blas=True).reshape(o, c, win.kh, win.kw)


def _conv_by_taps(x, w, win, g):
    """im2col on chunks of images (one strided-view copy per tap), then one matmul per chunk (batched
    over groups) with the chunk's images side by side, so BLAS calls are few and wide."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    k = kh * kw
    npos = win.oh * win.ow
    nb = max(1, min(n, _COLS_BYTES // max(1, c * k * npos * x.itemsize)))
    buf = np.zeros((c, nb, h + win.pt + win.pb, wd + win.pl + win.pr), x.dtype)
    cols_buf = np.empty(c * k * nb * npos, x.dtype)
    wm = w.reshape(g, o // g, cg * k)  # columns ordered (channel, tap), as in `cols`
    y = np.empty((n, o, win.oh, win.ow), x.dtype)
    for sl in plane_chunks(n, nb):
        b = sl.stop - sl.start
        buf[:, :b, win.pt : win.pt + h, win.pl : win.pl + wd] = x[sl].transpose(1, 0, 2, 3)
        cols = cols_buf[: c * k * b * npos].reshape(c, k, b, win.oh, win.ow)
        for t in range(k):
            i, j = divmod(t, kw)
            rows = slice(i * win.dh, i * win.dh + (win.oh - 1) * win.sh + 1, win.sh)
            cs = slice(j * win.dw, j * win.dw + (win.ow - 1) * win.sw + 1, win.sw)
            cols[:, t] = buf[:, :b, rows, cs]
        res = np.matmul(wm, cols.reshape(g, cg * k, b * npos))
        y[sl] = res.reshape(o, b, win.oh, win.ow).transpose(1, 0, 2, 3)
    return y


def _conv_by_outputs(x, w, win, g):
    """Few output positions, many taps (TVM's weight gradient: the kernel is an output gradient).

    im2col with the roles swapped: for each output position p, the window of channel c is the
    contiguous slice of its flattened padded plane at offset oy*sh*Wp + ox*sw, once the kernel is laid
    on a grid of width Wp (zeros between dilated taps and in the columns past the kernel). Columns
    are gathered for chunks of channels; one matmul per chunk with every (position, row) as a column
    keeps the BLAS calls few and wide.
    """
    b, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // g
    hp, wp = h + win.pt + win.pb, wd + win.pl + win.pr
    kr = (kh - 1) * win.dh + 1  # kernel rows on the grid
    lk = kr * wp
    offsets = [oy * win.sh * wp + ox * win.sw for oy in range(win.oh) for ox in range(win.ow)]
    npos = len(offsets)
    plane = max(hp * wp, offsets[-1] + lk)
    xb = np.zeros((c, b, plane), x.dtype)
    xb[:, :, : hp * wp].reshape(c, b, hp, wp)[:, :, win.pt : win.pt + h, win.pl : win.pl + wd] = x.transpose(1, 0, 2, 3)
    kg = np.zeros((o, cg, kr, wp), x.dtype)
    kg[:, :, :: win.dh, : (kw - 1) * win.dw + 1 : win.dw] = w
    kg = kg.reshape(g, og, cg * lk)
    nc = max(1, min(cg, _COLS_BYTES // max(1, npos * b * lk * x.itemsize)))
    cols_buf = np.empty(npos * b * nc * lk, x.dtype)
    y = np.zeros((g, og, npos * b), x.dtype)
    for gi in range(g):
        for cs in plane_chunks(cg, nc):
            k = cs.stop - cs.start
            cols = cols_buf[: npos * b * k * lk].reshape(npos, b, k, lk)
            chans = xb[gi * cg + cs.start : gi * cg + cs.stop]
            for p, off in enumerate(offsets):
                cols[p] = chans[:, :, off : off + lk].transpose(1, 0, 2)
            y[gi] += kg[gi, :, cs.start * lk : cs.stop * lk] @ cols.reshape(npos * b, k * lk).T
    return y.reshape(o, win.oh, win.ow, b).transpose(3, 0, 1, 2)


def conv2d_transpose(
    data,
    weight,
    *,
    strides=(1, 1),
    padding=(0, 0, 0, 0),
    output_padding=(0, 0),
    dilation=(1, 1),
    groups=1,
    data_layout="NCHW",
    kernel_layout="IOHW",
    out_layout=None,
    out_dtype=None,
):
    """The adjoint of conv2d w.r.t. its data, weight (C_in, C_out/groups, kh, kw); output_padding adds
    rows/columns at the bottom/right: H_out = (H-1)*s - pad_t - pad_b + d*(k-1) + output_padding + 1."""
    op = "conv2d_transpose"
    x = to_layout(op, np.asarray(data), data_layout, "NCHW")
    w = to_layout(op, np.asarray(weight), kernel_layout, "IOHW")
    dtype = result_dtype(op, out_dtype, x, w)
    n, ci, h, wd = x.shape
    g = _groups(op, groups, ("input channels", ci))
    if w.shape[0] != ci:
        raise KernelError(f"{op}: data has {ci} channels, weight has {w.shape[0]} input channels")
    _, cg, kh, kw = w.shape
    pair(op, "kernel size", (kh, kw))
    sh, sw = pair(op, "strides", strides)
    dh, dw = pair(op, "dilation", dilation)
    oph, opw = pair(op, "output_padding", output_padding, minimum=0)
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise KernelError(f"{op}: output_padding {output_padding!r} must be smaller than strides or dilation")
    pt, pl, pb, pr = padding4(op, padding)
    out_h = (h - 1) * sh - pt - pb + (kh - 1) * dh + oph + 1
    out_w = (wd - 1) * sw - pl - pr + (kw - 1) * dw + opw + 1
    if out_h <= 0 or out_w <= 0:
        raise KernelError(f"{op}: padding {padding!r} leaves an empty output ({out_h} x {out_w})")
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    taxes = [conv_gather.TAxis(h, kh, sh, dh, pt, out_h), conv_gather.TAxis(wd, kw, sw, dw, pl, out_w)]
    if any(a.degenerate() for a in taxes):  # the uncropped output far beyond the cropped one
        return np.ascontiguousarray(to_layout(op, conv_gather.conv_transpose(x, w, taxes, g), "NCHW", out_layout or data_layout))
    # Unit strides, one group: dX is conv2d with the flipped kernel over the gradient padded by `full`
    # (the kernel's reach less the padding). Its leading part non-negative, col2im on the grid the
    # gradient and the output share wins when the taps are few; else, on small planes, that conv on
    # the wide grid beats col2im's short-row adds.
    full = ((kh - 1) * dh - pt, (kw - 1) * dw - pl, (kh - 1) * dh - pb + oph, (kw - 1) * dw - pr + opw)
    unit = sh == sw == 1 and g == 1
    if unit and min(full[:2]) >= 0 and _grid_col2im(cg, kh * kw) and np.isfinite(w).all():
        out = _transpose_grid(x, w, (pt, pl), (out_h, out_w), (dh, dw))
        return np.ascontiguousarray(to_layout(op, out, "NCHW", out_layout or data_layout))
    if unit and min(full) >= 0 and np.isfinite(w).all():  # a NaN weight times the padding would be NaN
        win = Window2d(op, (h, wd), (kh, kw), (1, 1), full, (dh, dw), kernel_name="kernel size")
        if _wide(win, ci):
            out = _conv_wide(x, np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)), win)
            return np.ascontiguousarray(to_layout(op, out, "NCHW", out_layout or data_layout))
    if sh == sw == 1 and _wide_col2im(wd, kw, dw) and np.isfinite(w).all():
        out = _transpose_wide(x, w, g, (pt, pl), (out_h, out_w), (dh, dw))
    else:
        out = _transpose_by_scatter(x, w, g, (sh, sw), (pt, pl), (out_h, out_w), (dh, dw))
    return np.ascontiguousarray(to_layout(op, out, "NCHW", out_layout or data_layout))


def _grid_col2im(channels: int, taps: int) -> bool:
    """Few taps (each is one add over the whole grid) and a matmul tall enough for BLAS to run well
    (one output channel made a 9-row matmul: 2.4x slower than the flipped-kernel convolution)."""
    return taps <= GRID_MAX_TAPS and channels * taps >= GRID_MIN_ROWS


# Measured at one thread (ms, grid vs before): 3x3 on 8x8 0.34 vs 0.53, on 24x24 15.9 vs 18.8, on
# 56x56 13.2 vs 13.7; 5x5 on 14x14 3.2 vs 2.6.
GRID_MAX_TAPS = 9
GRID_MIN_ROWS = 64


class _SharedGrid:
    """Cells shared by a unit-stride convolution's output (gradient) planes, h x wd, and its input planes,
    out_h x out_w, images one after another in blocks of rc rows of wc cells. Output cell p reads (or
    sends its gradient to) input cell p + offsets[t] for tap t: input (y, x) sits at base + y*wc + x of
    its image's block, output (r, q) at r*wc + q. A tap reaching into the padding lands on a cell no
    input holds (the padding columns and rows are shared by neighbouring rows and images), so rc and
    wc only cover the input plus the wider of the padding and the kernel's reach."""

    def __init__(self, hw, out_hw, pads, kernel, dilation):
        (h, wd), (out_h, out_w), (pt, pl), (kh, kw), (dh, dw) = hw, out_hw, pads, kernel, dilation
        self.rc = max(out_h + pt, h - pt + (kh - 1) * dh)
        self.wc = max(out_w + pl, wd - pl + (kw - 1) * dw)
        self.block = self.rc * self.wc
        self.base = pt * self.wc + pl
        self.offsets = [i * dh * self.wc + j * dw for i in range(kh) for j in range(kw)]

    def length(self, images: int) -> int:
        """Cells of the input grid for `images` images (what the last tap and the last block reach)."""
        span = images * self.block
        return max(span + self.offsets[-1], self.base + span)

    def outputs(self, grid, images: int, h: int, wd: int):
        """The output cells of a (rows, images * block) grid, as (rows, images, h, wd)."""
        return grid[:, : images * self.block].reshape(-1, images, self.rc, self.wc)[:, :, :h, :wd]

    def inputs(self, grid, images: int, h: int, wd: int):
        """The input cells of a (rows, length) grid, as (rows, images, h, wd)."""
        return grid[:, self.base : self.base + images * self.block].reshape(-1, images, self.rc, self.wc)[:, :, :h, :wd]


def _transpose_grid(x, w, pads, out_hw, dilation):
    """Unit strides, one group: col2im on a shared grid (`_SharedGrid`): one matmul (C*k, O) @ (O, cells)
    for a chunk of images, then one add per tap over a long contiguous run. Digits CNN dX (32, 32, 8, 8)
    -> (32, 16, 8, 8): 340 µs against 500 µs for the flipped-kernel convolution on the wide grid (whose
    im2col copies 9 taps of 32 channels). The caller checks the weight finite (the gradient's zero cells
    multiply it) and the leading padding within the kernel's reach (a gradient cell must not sit
    before its image's block)."""
    n, o, h, wd = x.shape
    _, c, kh, kw = w.shape
    out_h, out_w = out_hw
    k = kh * kw
    grid = _SharedGrid((h, wd), out_hw, pads, (kh, kw), dilation)
    offsets = grid.offsets
    wt = np.ascontiguousarray(w.reshape(o, c * k).T)  # (C*k, O): rows ordered (channel, tap)
    out = np.empty((n, c, out_h, out_w), x.dtype)
    nb = _images_per_chunk(n, c * k * grid.block * x.itemsize)

    def part(ps):
        m = ps.stop - ps.start
        b0 = min(nb, m)
        cells = b0 * grid.block
        gg = np.zeros((o, cells), x.dtype)  # the gradient's cells; the rest stay zero
        cols_buf = np.empty(c * k * cells, x.dtype)
        acc = np.empty((c, grid.length(b0)), x.dtype)
        for sl in plane_chunks(m, nb, ps.start):
            b = sl.stop - sl.start
            span = b * grid.block
            grid.outputs(gg, b, h, wd)[...] = x[sl].transpose(1, 0, 2, 3)
            cols = np.matmul(wt, gg[:, :span], out=cols_buf[: c * k * span].reshape(c * k, span)).reshape(c, k, span)
            acc[:, :span] = cols[:, 0]  # offsets[0] == 0
            acc[:, span:].fill(0)
            for t in range(1, k):
                acc[:, offsets[t] : offsets[t] + span] += cols[:, t]
            out[sl] = grid.inputs(acc, b, out_h, out_w).transpose(1, 0, 2, 3)

    parallel.run_parts(part, n, _gemm_ns(2.0 * n * o * c * k * grid.block), blas=True)
    return out


def _wide_col2im(width: int, kw: int, dw: int) -> bool:
    """Rows widened by the kernel's reach cost that much more matmul work; short rows make the
    shifted adds slow."""
    return (kw - 1) * dw * WIDE_COL2IM_RATIO <= width


# Junk columns up to half the row. Measured at one thread, 3x3 and 5x5 kernels on 8- to 56-wide rows:
# the wide grid won every case (MNIST net's dX, 24 -> 26 wide: 18.6 -> 16.9 ms; 56 wide: 44 -> 37 ms).
WIDE_COL2IM_RATIO = 2


def _transpose_wide(x, w, g, pads, out_hw, dilation):
    """Unit strides: col2im on the wide grid. The gradient's rows are laid as wide as the uncropped
    output's, zeros past its width, so each tap's block of the matmul's result is added as one
    contiguous run of the flattened output instead of one short row at a time; the zero columns wrap
    into the next row's start and add nothing (the weight is checked finite: 0 * inf would not be 0)."""
    n, ci, h, wd = x.shape
    _, cg, kh, kw = w.shape
    (pt, pl), (out_h, out_w), (dh, dw) = pads, out_hw, dilation
    c, k = cg * g, kh * kw
    wb = max(wd + (kw - 1) * dw, pl + out_w)
    hb = max(h + (kh - 1) * dh, pt + out_h)
    run = h * wb
    offsets = [i * dh * wb + j * dw for i in range(kh) for j in range(kw)]
    length = max(hb * wb, offsets[-1] + run)
    wm = np.ascontiguousarray(w.reshape(g, ci // g, cg * k).transpose(0, 2, 1))  # (G, Cg*K, Ci/G)
    out = np.empty((n, c, out_h, out_w), x.dtype)
    nb = _images_per_chunk(n, c * k * run * x.itemsize)

    def part(ps):
        m = ps.stop - ps.start
        b0 = min(nb, m)
        xw = np.zeros((b0, ci, h, wb), x.dtype)  # the columns past wd stay zero
        cols_buf = np.empty((b0, g, cg * k, run), x.dtype)
        full = np.empty((b0, c, length), x.dtype)
        for sl in plane_chunks(m, nb, ps.start):
            b = sl.stop - sl.start
            xw[:b, :, :, :wd] = x[sl]
            cols = np.matmul(wm, xw[:b].reshape(b, g, ci // g, run), out=cols_buf[:b]).reshape(b, c, k, run)
            fb = full[:b]
            fb[:, :, run:].fill(0)
            fb[:, :, :run] = cols[:, :, 0]  # offsets[0] == 0
            for t in range(1, k):
                fb[:, :, offsets[t] : offsets[t] + run] += cols[:, :, t]
            out[sl] = fb[:, :, : hb * wb].reshape(b, c, hb, wb)[:, :, pt : pt + out_h, pl : pl + out_w]

    parallel.run_parts(part, n, _gemm_ns(2.0 * n * ci * cg * k * run), blas=True)
    return out


def _transpose_by_scatter(x, w, g, strides, pads, out_hw, dilation):
    """col2im, the literal adjoint of im2col. One matmul per chunk of images gives every tap's
    contribution; each tap is added into a strided view of a padded buffer, then cropped. Exact flops
    (a conv2d with the flipped kernel would also multiply the padding) and no im2col copy of x."""
    n, ci, h, wd = x.shape
    _, cg, kh, kw = w.shape
    (sh, sw), (pt, pl), (out_h, out_w), (dh, dw) = strides, pads, out_hw, dilation
    c = cg * g
    # Tall enough for every tap and for the crop (output_padding may reach past the last tap).
    hb = max((h - 1) * sh + (kh - 1) * dh + 1, pt + out_h)
    wb = max((wd - 1) * sw + (kw - 1) * dw + 1, pl + out_w)
    wm = np.ascontiguousarray(w.reshape(g, ci // g, cg * kh * kw).transpose(0, 2, 1))  # (G, Cg*K, Ci/G)
    out = np.empty((n, c, out_h, out_w), x.dtype)
    nb = _images_per_chunk(n, c * kh * kw * h * wd * x.itemsize)

    def part(ps):
        xs, outs = x[ps], out[ps]
        m = len(xs)
        buf = None if sh == sw == 1 else np.empty((min(nb, m), c, hb, wb), x.dtype)
        cols_buf = np.empty((min(nb, m), g, cg * kh * kw, h * wd), x.dtype)
        for sl in plane_chunks(m, nb):
            b = sl.stop - sl.start
            cols = np.matmul(wm, xs[sl].reshape(b, g, ci // g, h * wd), out=cols_buf[:b]).reshape(b, c, kh * kw, h, wd)
            if sh == sw == 1:
                _add_shifted_taps(cols, outs[sl], (kh, kw), (pt, pl), (dh, dw))
                continue
            bb = buf[:b]
            bb.fill(0)
            for t in range(kh * kw):
                i, j = divmod(t, kw)
                bb[:, :, i * dh : i * dh + (h - 1) * sh + 1 : sh, j * dw : j * dw + (wd - 1) * sw + 1 : sw] += cols[:, :, t]
            outs[sl] = bb[:, :, pt : pt + out_h, pl : pl + out_w]

    parallel.run_parts(part, n, _gemm_ns(2.0 * n * ci * cg * kh * kw * h * wd), blas=True)
    return out


def _add_shifted_taps(cols, out, kernel_hw, pads, dilation):
    """Unit strides: tap (i, j)'s block of cols lands in the output shifted by (i*dh - pt, j*dw - pl),
    so it is added straight into the output's overlap (no padded buffer, no cropping copy). A tap
    covering the whole output is assigned first instead of zero-filling (the centre tap of a 'same'
    convolution)."""
    (kh, kw), (pt, pl), (dh, dw) = kernel_hw, pads, dilation
    h, wd = cols.shape[3:]
    oh, ow = out.shape[2:]
    spans = []
    for t in range(kh * kw):
        i, j = divmod(t, kw)
        y0, x0 = i * dh - pt, j * dw - pl  # where the block's first row and column land
        ys, ye, xs, xe = max(0, y0), min(oh, y0 + h), max(0, x0), min(ow, x0 + wd)
        if ys < ye and xs < xe:
            spans.append((t, (slice(ys, ye), slice(xs, xe)), (slice(ys - y0, ye - y0), slice(xs - x0, xe - x0))))
    full = next((k for k, (_, dst, _) in enumerate(spans) if (dst[0].stop - dst[0].start, dst[1].stop - dst[1].start) == (oh, ow)), None)
    if full is None:
        out.fill(0)
    else:
        spans.insert(0, spans.pop(full))
    for k, (t, (ry, rx), (cy, cx)) in enumerate(spans):
        if k == 0 and full is not None:
            out[:, :, ry, rx] = cols[:, :, t, cy, cx]
        else:
            out[:, :, ry, rx] += cols[:, :, t, cy, cx]
