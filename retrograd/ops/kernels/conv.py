"""2-D convolution and its adjoint (conv2d_transpose) as BLAS matmuls over shifted views of a padded buffer."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import Window2d, check_float, padding4, pair, to_layout

# Column buffers of about this size keep a chunk of images in cache-friendly, BLAS-sized pieces.
_COLS_BYTES = 8 << 20


def _dtype(op, out_dtype, *arrays):
    for name, a in zip(("data", "weight"), arrays):
        check_float(op, name, a)
    if out_dtype in (None, "", "void"):
        return np.result_type(*arrays)
    dt = np.dtype(out_dtype)
    if dt.kind != "f":
        raise KernelError(f"{op}: out_dtype must be a float dtype, got {out_dtype!r}")
    return dt


def _groups(op, groups, channels, *named):
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise KernelError(f"{op}: groups must be a positive int, got {groups!r}")
    for name, n in (("input channels", channels),) + named:
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
    """Cross-correlation of data (N, C, H, W) with weight (O, C/groups, kh, kw), TVM Relax semantics."""
    op = "conv2d"
    data, weight = np.asarray(data), np.asarray(weight)
    x = to_layout(op, data, data_layout, "NCHW")
    w = to_layout(op, weight, kernel_layout, "OIHW")
    dtype = _dtype(op, out_dtype, x, w)
    g = _groups(op, groups, x.shape[1], ("output channels", w.shape[0]))
    if x.shape[1] != w.shape[1] * g:
        raise KernelError(f"{op}: data has {x.shape[1]} channels, weight expects {w.shape[1]} x {g} groups")
    win = Window2d(op, x.shape[2:], w.shape[2:], strides, padding, dilation, kernel_name="kernel size")
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    if win.kh * win.kw <= win.oh * win.ow:
        y = _conv_by_taps(x, w, win, g)
    else:
        y = _conv_by_outputs(x, w, win, g)
    return np.ascontiguousarray(to_layout(op, y, "NCHW", out_layout or data_layout))


def _padded(x, win, nb, flat_slack=0):
    """A zeroed (C, nb, Hp, Wp) buffer (plus `flat_slack` trailing elements) and its interior writer."""
    c = x.shape[1]
    hp, wp = win.h + win.pt + win.pb, win.w + win.pl + win.pr
    flat = np.zeros(c * nb * hp * wp + flat_slack, x.dtype)
    grid = flat[: c * nb * hp * wp].reshape(c, nb, hp, wp)

    def fill(chunk):
        grid[:, : chunk.shape[0], win.pt : win.pt + win.h, win.pl : win.pl + win.w] = chunk.transpose(1, 0, 2, 3)
        return grid[:, : chunk.shape[0]]

    return flat, grid, fill


def _conv_by_taps(x, w, win, g):
    """Few taps, many outputs: im2col on chunks of images, one batched matmul over groups per chunk.

    With unit strides the columns are "flat shifts": in the flattened (C, nb*Hp*Wp) buffer, tap (i, j)
    is the contiguous slice at offset i*dh*Wp + j*dw; outputs are computed on the whole Hp x Wp grid
    and cropped. Strided convolutions copy strided views instead, so no output is computed in vain.
    """
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    k = kh * kw
    hp, wp = win.h + win.pt + win.pb, win.w + win.pl + win.pr
    flat_shift = win.sh == win.sw == 1
    grid_hw = (hp, wp) if flat_shift else (win.oh, win.ow)
    per_image = c * k * grid_hw[0] * grid_hw[1] * x.itemsize
    nb = max(1, min(n, _COLS_BYTES // max(1, per_image)))
    slack = (kh - 1) * win.dh * wp + (kw - 1) * win.dw if flat_shift else 0
    flat, _, fill = _padded(x, win, nb, slack)
    # Weight as (G, O/G, C/G * kh * kw) with the channel-major column order of `cols`.
    wm = w.reshape(g, o // g, cg * k)
    y = np.empty((n, o, win.oh, win.ow), x.dtype)
    cols_buf = np.empty(c * k * nb * grid_hw[0] * grid_hw[1], x.dtype)
    for start in range(0, n, nb):
        sl = slice(start, min(n, start + nb))
        b = sl.stop - sl.start
        grid = fill(x[sl])
        npos = b * grid_hw[0] * grid_hw[1]
        cols = cols_buf[: c * k * npos].reshape(c, k, npos)
        for t in range(k):
            i, j = divmod(t, kw)
            if flat_shift:
                off = i * win.dh * wp + j * win.dw
                cols[:, t] = flat[off : off + c * nb * hp * wp].reshape(c, -1)[:, :npos]
            else:
                view = grid[:, :, i * win.dh :: win.sh, j * win.dw :: win.sw][:, :, : win.oh, : win.ow]
                cols[:, t].reshape(c, b, win.oh, win.ow)[...] = view
        res = np.matmul(wm, cols.reshape(g, cg * k, npos))  # (G, O/G, npos)
        res = res.reshape(o, b, *grid_hw)[:, :, : win.oh, : win.ow]
        y[sl] = res.transpose(1, 0, 2, 3)
    return y


def _conv_by_outputs(x, w, win, g):
    """Many taps, few outputs (as in the weight gradient, a conv whose kernel is the output gradient):
    one matmul per output position over its whole window."""
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    _, grid, fill = _padded(x, win, n)
    grid = fill(x)  # (C, N, Hp, Wp)
    wm = np.ascontiguousarray(w.reshape(g, o // g, cg * kh * kw).transpose(0, 2, 1))  # (G, CgK, Og)
    y = np.empty((win.oh, win.ow, g, n, o // g), x.dtype)
    for oy in range(win.oh):
        for ox in range(win.ow):
            r0, c0 = oy * win.sh, ox * win.sw
            win_view = grid[:, :, r0 : r0 + (kh - 1) * win.dh + 1 : win.dh, c0 : c0 + (kw - 1) * win.dw + 1 : win.dw]
            # (C, N, kh, kw) -> (G, N, Cg * kh * kw): one copy, then a batched matmul over groups.
            cols = win_view.reshape(g, cg, n, kh * kw).transpose(0, 2, 1, 3).reshape(g, n, cg * kh * kw)
            np.matmul(cols, wm, out=y[oy, ox])
    return y.transpose(3, 2, 4, 0, 1).reshape(n, o, win.oh, win.ow)


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
    """The adjoint of conv2d w.r.t. its data (weight (C_in, C_out/groups, kh, kw)), with output_padding
    extra rows/columns at the bottom/right: (H-1)*s - pad_t - pad_b + d*(k-1) + output_padding + 1."""
    op = "conv2d_transpose"
    data, weight = np.asarray(data), np.asarray(weight)
    x = to_layout(op, data, data_layout, "NCHW")
    w = to_layout(op, weight, kernel_layout, "IOHW")
    dtype = _dtype(op, out_dtype, x, w)
    n, ci, h, wd = x.shape
    g = _groups(op, groups, ci)
    if w.shape[0] != ci:
        raise KernelError(f"{op}: data has {ci} channels, weight has {w.shape[0]} input channels")
    # In conv2d terms: weight is (O=ci, C/G, kh, kw) and data is conv2d's output gradient.
    _, cg, kh, kw = w.shape
    sh, sw = pair(op, "strides", strides)
    dh, dw = pair(op, "dilation", dilation)
    oph, opw = pair(op, "output_padding", output_padding, minimum=0)
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise KernelError(f"{op}: output_padding {output_padding!r} must be smaller than strides or dilation")
    pair(op, "kernel size", (kh, kw))
    pt, pl, pb, pr = padding4(op, padding)
    full_h, full_w = (h - 1) * sh + (kh - 1) * dh + 1, (wd - 1) * sw + (kw - 1) * dw + 1
    out_h, out_w = full_h - pt - pb + oph, full_w - pl - pr + opw
    if out_h <= 0 or out_w <= 0:
        raise KernelError(f"{op}: padding {padding!r} leaves an empty output ({out_h} x {out_w})")
    x, w = x.astype(dtype, copy=False), w.astype(dtype, copy=False)
    c = cg * g
    # Scatter target in padded coordinates, tall enough for the crop when output_padding exceeds pad_b.
    hb, wb = max(full_h, pt + out_h), max(full_w, pl + out_w)
    wm = np.ascontiguousarray(w.reshape(g, ci // g, cg * kh * kw).transpose(0, 2, 1))  # (G, Cg*K, O/G)
    out = np.empty((n, c, out_h, out_w), dtype)
    per_image = c * kh * kw * h * wd * dtype.itemsize
    nb = max(1, min(n, _COLS_BYTES // max(1, per_image)))
    buf = np.empty((c, nb, hb, wb), dtype)
    for start in range(0, n, nb):
        sl = slice(start, min(n, start + nb))
        b = sl.stop - sl.start
        gy = x[sl].transpose(1, 0, 2, 3).reshape(g, ci // g, b * h * wd)
        cols = np.matmul(wm, gy).reshape(c, kh * kw, b, h, wd)
        bb = buf[:, :b]
        bb.fill(0)
        for t in range(kh * kw):
            i, j = divmod(t, kw)
            bb[:, :, i * dh : i * dh + (h - 1) * sh + 1 : sh, j * dw : j * dw + (wd - 1) * sw + 1 : sw] += cols[:, t]
        out[sl] = bb[:, :, pt : pt + out_h, pl : pl + out_w].transpose(1, 0, 2, 3)
    return np.ascontiguousarray(to_layout(op, out, "NCHW", out_layout or data_layout))

