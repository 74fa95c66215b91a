"""Naive references of the conv and pool kernels: one Python loop iteration per output position or window
(and TVM's spelling of conv2d's weight gradient), shared by the kernel tests."""

from __future__ import annotations

import itertools

import numpy as np

from retrograd.ops.kernels import conv

# -- conv2d ------------------------------------------------------------------------------------------


def naive_conv2d(x, w, s, p, d, g):
    """One dot product per (image, output channel, output position)."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + p[0] + p[2], wd + p[1] + p[3]))
    xp[:, :, p[0] : p[0] + h, p[1] : p[1] + wd] = x
    oh = (xp.shape[2] - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (xp.shape[3] - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // g
    for b, oc, i, j in itertools.product(range(n), range(o), range(oh), range(ow)):
        gi = oc // og
        window = xp[b, gi * cg : (gi + 1) * cg, i * s[0] : i * s[0] + d[0] * (kh - 1) + 1 : d[0],
                    j * s[1] : j * s[1] + d[1] * (kw - 1) + 1 : d[1]]  # fmt: skip
        out[b, oc, i, j] = np.sum(window * w[oc])
    return out


def naive_conv2d_transpose(x, w, s, p, op, d, g):
    """Each input value scatters its kernel-weighted copy into the (padded) output."""
    n, ci, h, wd = x.shape
    _, cg, kh, kw = w.shape
    full_h = (h - 1) * s[0] + d[0] * (kh - 1) + 1 + op[0]
    full_w = (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + op[1]
    out = np.zeros((n, cg * g, full_h, full_w))
    cig = ci // g
    for b, c, i, j in itertools.product(range(n), range(ci), range(h), range(wd)):
        gi = c // cig
        for a, e in itertools.product(range(kh), range(kw)):
            out[b, gi * cg : (gi + 1) * cg, i * s[0] + a * d[0], j * s[1] + e * d[1]] += x[b, c, i, j] * w[c, :, a, e]
    return out[:, :, p[0] : full_h - p[2], p[1] : full_w - p[3]]


def naive_weight_grad(x, gy, w_shape, s, p, d, g):
    """dL/dw of conv2d: for every weight, the sum over the windows it touches."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w_shape
    xp = np.zeros((n, c, h + p[0] + p[2], wd + p[1] + p[3]))
    xp[:, :, p[0] : p[0] + h, p[1] : p[1] + wd] = x
    _, _, oh, ow = gy.shape
    dw = np.zeros(w_shape)
    og = o // g
    for oc, k, a, e in itertools.product(range(o), range(cg), range(kh), range(kw)):
        ch = (oc // og) * cg + k
        patch = xp[:, ch, a * d[0] : a * d[0] + (oh - 1) * s[0] + 1 : s[0], e * d[1] : e * d[1] + (ow - 1) * s[1] + 1 : s[1]]
        dw[oc, k, a, e] = np.sum(patch * gy[:, oc])
    return dw


def tvm_weight_grad(x, gy, w_shape, s, p, d, g):
    """TVM's conv2d gradient rule spells the weight gradient as a conv2d in CNHW/IOHW layouts."""
    n, c, h, wd = x.shape
    if g != 1:
        x = x.reshape(n, g, c // g, h, wd).transpose(1, 0, 2, 3, 4).reshape(n * g, c // g, h, wd)
    dw = conv.conv2d(x, gy, strides=d, padding=p, dilation=s, groups=g, data_layout="CNHW", kernel_layout="IOHW", out_layout="CNHW")
    return dw[:, :, : w_shape[2], : w_shape[3]]


# -- pooling: windows listed one by one ------------------------------------------------------------


def out_len(size, k, s, p0, p1, d, ceil):
    span = size + p0 + p1 - d * (k - 1) - 1
    n = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (n - 1) * s >= size + p0:
        n -= 1
    return n


def windows(shape, k, s, p, d, ceil):
    """Yield (oh, ow, taps) with taps the in-bounds (row, col) of the window, row-major, and the
    number of window taps inside the padded input per axis."""
    _, _, h, w = shape
    oh = out_len(h, k[0], s[0], p[0], p[2], d[0], ceil)
    ow = out_len(w, k[1], s[1], p[1], p[3], d[1], ceil)
    for i, j in itertools.product(range(oh), range(ow)):
        rows = [i * s[0] - p[0] + a * d[0] for a in range(k[0])]
        cols = [j * s[1] - p[1] + b * d[1] for b in range(k[1])]
        taps = [(r, c) for r in rows for c in cols if 0 <= r < h and 0 <= c < w]
        padded = sum(-p[0] <= r < h + p[2] for r in rows) * sum(-p[1] <= c < w + p[3] for c in cols)
        yield i, j, taps, padded, (oh, ow)


def out_hw(shape, k, s, p, d, ceil):
    for *_, hw in windows(shape, k, s, p, d, ceil):
        return hw


def naive_max(x, k, s, p, d, ceil):
    out = np.full(x.shape[:2] + out_hw(x.shape, k, s, p, d, ceil), -np.inf, x.dtype)
    for i, j, taps, _, _ in windows(x.shape, k, s, p, d, ceil):
        for r, c in taps:
            out[:, :, i, j] = np.maximum(out[:, :, i, j], x[:, :, r, c])
    return out


def naive_max_backward(g, x, k, s, p, d, ceil):
    dx = np.zeros_like(x)
    for n, ch in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for i, j, taps, _, _ in windows(x.shape, k, s, p, d, ceil):
            if taps:
                vals = [x[n, ch, r, c] for r, c in taps]
                r, c = taps[int(np.argmax(vals))]  # argmax returns the first maximum
                dx[n, ch, r, c] += g[n, ch, i, j]
    return dx


def naive_avg(x, k, s, p, d, ceil, cip):
    out = np.zeros(x.shape[:2] + out_hw(x.shape, k, s, p, d, ceil), x.dtype)
    for i, j, taps, padded, _ in windows(x.shape, k, s, p, d, ceil):
        div = padded if cip else len(taps)
        if div:
            out[:, :, i, j] = sum(x[:, :, r, c] for r, c in taps) / div if taps else 0
    return out


def naive_avg_backward(g, x, k, s, p, d, ceil, cip):
    dx = np.zeros_like(x)
    for i, j, taps, padded, _ in windows(x.shape, k, s, p, d, ceil):
        div = padded if cip else len(taps)
        for r, c in taps:
            dx[:, :, r, c] += g[:, :, i, j] / div
    return dx
