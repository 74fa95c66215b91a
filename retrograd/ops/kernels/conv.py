"""2-D convolution and its adjoint (conv2d_transpose) as BLAS matmuls over shifted views of padded buffers."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import Window2d, check_float, padding4, pair, plane_chunks, to_layout

# Column buffers of about this size. Fewer, wider BLAS calls matter: OpenBLAS threads spin at every
# call's sync points, and on a busy machine small calls measured 2-5x slower.
_COLS_BYTES = 16 << 20


def _dtype(op, out_dtype, *arrays):
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
    dtype = _dtype(op, out_dtype, x, w)
    g = _groups(op, groups, ("input channels", x.shape[1]), ("output channels", w.shape[0]))
    if x.shape[1] != w.shape[1] * g:
        raise KernelError(f"{op}: data has {x.shape[1]} channels, weight expects {w.shape[1]} x {g} groups")
    win = Window2d(op, x.shape[2:], w.shape[2:], strides, padding, dilation, kernel_name="kernel size")
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    y = _conv(x, w, win, g)
    return np.ascontiguousarray(to_layout(op, y, "NCHW", out_layout or data_layout))


def _conv(x, w, win, g):
    """Pick the formulation: loop over whichever is fewer, kernel taps (the usual case) or output
    positions (a weight gradient, whose "kernel" is a whole output gradient); unit strides without
    groups shift rows instead of copying every tap."""
    if win.kh * win.kw > win.oh * win.ow:
        return _conv_by_outputs(x, w, win, g)
    if win.sh == win.sw == 1 and g == 1:
        return _conv_by_rows(x, w, win)
    return _conv_by_taps(x, w, win, g)


# Shifted copies per chunk of images in _conv_by_rows: two 56x56x64 images' worth measured best.
_ROWS_BYTES = 6 << 20


def _conv_by_rows(x, w, win):
    """Unit strides, one group: copy the plane kw times, shifted by each column tap, and stack the copies
    along K; each kernel row is then a contiguous offset (i*dh rows) into those flat planes, a strided
    view BLAS reads in place. kh wide matmuls per chunk of images instead of a kh*kw-fold im2col:
    a third of the copying. Outputs are computed at the padded width and cropped."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    hp, wp = h + win.pt + win.pb, wd + win.pl + win.pr
    plane = hp * wp
    reach = (kh - 1) * win.dh * wp  # how far past a chunk the row offsets read
    shift = (kw - 1) * win.dw
    nb = max(1, min(n, _ROWS_BYTES // max(1, kw * c * plane * x.itemsize)))
    buf = np.zeros((c, nb * plane + reach + shift), x.dtype)
    planes = buf[:, : nb * plane].reshape(c, nb, hp, wp)
    z = np.empty((kw * c, nb * plane + reach), x.dtype)
    rows = [np.ascontiguousarray(w[:, :, i].transpose(0, 2, 1)).reshape(o, kw * c) for i in range(kh)]
    acc = np.empty((o, nb * plane), x.dtype)
    tmp = np.empty_like(acc) if kh > 1 else None
    y = np.empty((n, o, win.oh, win.ow), x.dtype)
    for sl in plane_chunks(n, nb):
        b = sl.stop - sl.start
        m = b * plane
        planes[:, :b, win.pt : win.pt + h, win.pl : win.pl + wd] = x[sl].transpose(1, 0, 2, 3)
        for j in range(kw):
            z[j * c : (j + 1) * c, : m + reach] = buf[:, j * win.dw : j * win.dw + m + reach]
        np.matmul(rows[0], z[:, :m], out=acc[:, :m])
        for i in range(1, kh):
            off = i * win.dh * wp
            np.matmul(rows[i], z[:, off : off + m], out=tmp[:, :m])
            acc[:, :m] += tmp[:, :m]
        y[sl] = acc[:, :m].reshape(o, b, hp, wp)[:, :, : win.oh, : win.ow].transpose(1, 0, 2, 3)
    return y


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
    dtype = _dtype(op, out_dtype, x, w)
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
    if sh == sw == 1:
        # The extra output_padding rows are zero-gradient rows of conv2d's input: less padding.
        out = _transpose_as_conv(x, w, g, (pt, pl, pb - oph, pr - opw), (dh, dw))
    else:
        out = _transpose_by_scatter(x, w, g, (sh, sw), (pt, pl), (out_h, out_w), (dh, dw))
    return np.ascontiguousarray(to_layout(op, out, "NCHW", out_layout or data_layout))


def _transpose_as_conv(x, w, g, pads, dilation):
    """Unit strides: the adjoint is a conv2d of x with the flipped, in/out-swapped kernel and
    complementary padding d*(k-1) - p (negative padding crops x)."""
    ci, cg, kh, kw = w.shape
    dh, dw = dilation
    flipped = w.reshape(g, ci // g, cg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(g * cg, ci // g, kh, kw)
    flipped = flipped[:, :, ::-1, ::-1]
    pt, pb = ((kh - 1) * dh - p for p in pads[0::2])
    pl, pr = ((kw - 1) * dw - p for p in pads[1::2])
    h, wd = x.shape[2:]
    x = x[:, :, max(0, -pt) : h - max(0, -pb), max(0, -pl) : wd - max(0, -pr)]
    pads = (max(pt, 0), max(pl, 0), max(pb, 0), max(pr, 0))
    win = Window2d("conv2d_transpose", x.shape[2:], (kh, kw), 1, pads, dilation, kernel_name="kernel size")
    return _conv(x, flipped, win, g)


def _transpose_by_scatter(x, w, g, strides, pads, out_hw, dilation):
    """Strided: col2im, the literal adjoint of im2col. One matmul per chunk of images gives every
    tap's contribution; each tap is added into a strided view of a padded buffer, then cropped."""
    n, ci, h, wd = x.shape
    _, cg, kh, kw = w.shape
    (sh, sw), (pt, pl), (out_h, out_w), (dh, dw) = strides, pads, out_hw, dilation
    c = cg * g
    # Tall enough for every tap and for the crop (output_padding may reach past the last tap).
    hb = max((h - 1) * sh + (kh - 1) * dh + 1, pt + out_h)
    wb = max((wd - 1) * sw + (kw - 1) * dw + 1, pl + out_w)
    wm = np.ascontiguousarray(w.reshape(g, ci // g, cg * kh * kw).transpose(0, 2, 1))  # (G, Cg*K, Ci/G)
    out = np.empty((n, c, out_h, out_w), x.dtype)
    nb = max(1, min(n, _COLS_BYTES // max(1, c * kh * kw * h * wd * x.itemsize)))
    buf = np.empty((nb, c, hb, wb), x.dtype)
    for sl in plane_chunks(n, nb):
        b = sl.stop - sl.start
        cols = np.matmul(wm, x[sl].reshape(b, g, ci // g, h * wd)).reshape(b, c, kh * kw, h, wd)
        bb = buf[:b]
        bb.fill(0)
        for t in range(kh * kw):
            i, j = divmod(t, kw)
            bb[:, :, i * dh : i * dh + (h - 1) * sh + 1 : sh, j * dw : j * dw + (wd - 1) * sw + 1 : sw] += cols[:, :, t]
        out[sl] = bb[:, :, pt : pt + out_h, pl : pl + out_w]
    return out
