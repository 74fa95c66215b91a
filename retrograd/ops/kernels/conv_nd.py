"""1-D and 3-D convolutions and their adjoints on top of the 2-D kernels."""

# conv1d inserts a unit H axis; conv3d loops over the depth taps with the depth folded into the batch.

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels import conv, conv_gather, window_gather
from retrograd.ops.kernels.window import out_size, to_layout


def with_h_axis(layout: str) -> str:
    """A 1-D layout as the 2-D one with a unit H axis just before W: NCW -> NCHW, WIO -> HWIO."""
    i = layout.index("W")
    return layout[:i] + "H" + layout[i:]


def per_axis(op, name, value, n):
    vals = tuple(int(v) for v in np.atleast_1d(value))
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise KernelError(f"{op}: {name} must have {n} entries, got {value!r}")
    return vals


def pad_pairs(op, value, n):
    """(begins, ends): 1 value for all, n for symmetric, or 2n as begins then ends (TVM's order)."""
    vals = tuple(int(v) for v in np.atleast_1d(value))
    if len(vals) == 1:
        vals = vals * (2 * n)
    elif len(vals) == n:
        vals = vals * 2
    if len(vals) != 2 * n:
        raise KernelError(f"{op}: padding must have 1, {n} or {2 * n} entries, got {value!r}")
    return vals[:n], vals[n:]


def conv1d(data, weight, *, strides=1, padding=0, dilation=1, groups=1, data_layout="NCW", kernel_layout="OIW",
           out_layout=None, out_dtype=None):
    """Cross-correlation over W (TVM Relax semantics), as conv2d with a unit H axis."""
    (s,), (d,) = per_axis("conv1d", "strides", strides, 1), per_axis("conv1d", "dilation", dilation, 1)
    (p0,), (p1,) = pad_pairs("conv1d", padding, 1)
    dl, kl, ol = with_h_axis(data_layout), with_h_axis(kernel_layout), with_h_axis(out_layout or data_layout)
    y = conv.conv2d(
        np.expand_dims(np.asarray(data), dl.index("H")), np.expand_dims(np.asarray(weight), kl.index("H")),
        strides=(1, s), padding=(0, p0, 0, p1), dilation=(1, d), groups=groups,
        data_layout=dl, kernel_layout=kl, out_layout=ol, out_dtype=out_dtype,
    )
    return y.squeeze(ol.index("H"))


def conv1d_transpose(data, weight, *, strides=1, padding=0, output_padding=0, dilation=1, groups=1,
                     data_layout="NCW", kernel_layout="IOW", out_layout=None, out_dtype=None):
    """The adjoint of conv1d w.r.t. its data, as conv2d_transpose with a unit H axis."""
    op = "conv1d_transpose"
    (s,), (d,), (op_,) = (per_axis(op, n, v, 1) for n, v in (("strides", strides), ("dilation", dilation),
                                                          ("output_padding", output_padding)))
    (p0,), (p1,) = pad_pairs(op, padding, 1)
    dl, kl, ol = with_h_axis(data_layout), with_h_axis(kernel_layout), with_h_axis(out_layout or data_layout)
    y = conv.conv2d_transpose(
        np.expand_dims(np.asarray(data), dl.index("H")), np.expand_dims(np.asarray(weight), kl.index("H")),
        strides=(1, s), padding=(0, p0, 0, p1), output_padding=(0, op_), dilation=(1, d), groups=groups,
        data_layout=dl, kernel_layout=kl, out_layout=ol, out_dtype=out_dtype,
    )
    return y.squeeze(ol.index("H"))


def conv3d(data, weight, *, strides=(1, 1, 1), padding=(0, 0, 0), dilation=(1, 1, 1), groups=1,
           data_layout="NCDHW", kernel_layout="OIDHW", out_layout=None, out_dtype=None):
    """Cross-correlation over (D, H, W): for each depth tap, one conv2d over the strided depth slices
    (folded into the batch), accumulated."""
    op = "conv3d"
    x = to_layout(op, np.asarray(data), data_layout, "NCDHW")
    w = to_layout(op, np.asarray(weight), kernel_layout, "OIDHW")
    (sd, sh, sw), (dd, dh, dw) = per_axis(op, "strides", strides, 3), per_axis(op, "dilation", dilation, 3)
    (pf, pt, pl), (pk, pb, pr) = pad_pairs(op, padding, 3)
    n, c, depth, h, wd = x.shape
    kd = w.shape[2]
    if kd == 0:
        raise KernelError(f"{op}: the kernel has an empty depth axis")
    od = out_size(op, depth, kd, sd, pf, pk, dd)
    axes = [window_gather.Axis(depth, kd, sd, dd, pf, pk, od)]
    for size, k, st, di, p0, p1 in ((h, w.shape[3], sh, dh, pt, pb), (wd, w.shape[4], sw, dw, pl, pr)):
        axes.append(window_gather.Axis(size, k, st, di, p0, p1, out_size(op, size, k, st, p0, p1, di)))
    if window_gather.degenerate(axes):  # windows mostly of padding: from the taps that meet the data
        if groups < 1 or c % groups or c // groups != w.shape[1] or w.shape[0] % groups:
            raise KernelError(f"{op}: data has {c} channels, weight {w.shape[:2]} does not fit {groups} groups")
        dtype = conv.result_dtype(op, out_dtype, x, w)
        y = conv_gather.conv(x.astype(dtype, copy=False), w.astype(dtype, copy=False), axes, groups)
        return np.ascontiguousarray(to_layout(op, y, "NCDHW", out_layout or data_layout))
    xp = np.pad(x, ((0, 0), (0, 0), (pf, pk), (0, 0), (0, 0))) if pf or pk else x
    acc = None
    for t in range(kd):
        xs = xp[:, :, t * dd : t * dd + (od - 1) * sd + 1 : sd].transpose(0, 2, 1, 3, 4).reshape(n * od, c, h, wd)
        y = conv.conv2d(xs, w[:, :, t], strides=(sh, sw), padding=(pt, pl, pb, pr), dilation=(dh, dw), groups=groups,
                        out_dtype=out_dtype)
        if acc is None:
            acc = y
        else:
            acc += y
    y = acc.reshape(n, od, *acc.shape[1:]).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(to_layout(op, y, "NCDHW", out_layout or data_layout))


def conv3d_transpose(data, weight, *, strides=(1, 1, 1), padding=(0, 0, 0), output_padding=(0, 0, 0),
                     dilation=(1, 1, 1), groups=1, data_layout="NCDHW", kernel_layout="IODHW", out_layout=None,
                     out_dtype=None):
    """The adjoint of conv3d w.r.t. its data: per depth tap, one conv2d_transpose of every depth slice
    (in the batch), added at depth d * stride + tap * dilation, then cropped by the depth padding."""
    op = "conv3d_transpose"
    x = to_layout(op, np.asarray(data), data_layout, "NCDHW")
    w = to_layout(op, np.asarray(weight), kernel_layout, "IODHW")
    (sd, sh, sw), (dd, dh, dw) = per_axis(op, "strides", strides, 3), per_axis(op, "dilation", dilation, 3)
    (opd, oph, opw) = per_axis(op, "output_padding", output_padding, 3)
    (pf, pt, pl), (pk, pb, pr) = pad_pairs(op, padding, 3)
    n, c, depth, h, wd = x.shape
    kd = w.shape[2]
    od = (depth - 1) * sd - pf - pk + dd * (kd - 1) + opd + 1
    if od <= 0:
        raise KernelError(f"{op}: padding {padding!r} leaves an empty depth ({od})")
    if opd >= max(sd, dd):
        raise KernelError(f"{op}: output_padding {output_padding!r} must be smaller than strides or dilation")
    kh, kw = w.shape[3:]
    oh, ow = ((size - 1) * st - p0 - p1 + di * (k - 1) + o + 1
              for size, st, p0, p1, di, k, o in ((h, sh, pt, pb, dh, kh, oph), (wd, sw, pl, pr, dw, kw, opw)))
    taxes = [conv_gather.TAxis(depth, kd, sd, dd, pf, od), conv_gather.TAxis(h, kh, sh, dh, pt, oh),
             conv_gather.TAxis(wd, kw, sw, dw, pl, ow)]
    if oh > 0 and ow > 0 and any(a.degenerate() for a in taxes):  # the uncropped output far beyond the cropped one
        if groups < 1 or c % groups or w.shape[0] != c:
            raise KernelError(f"{op}: data has {c} channels, weight {w.shape[:2]} does not fit {groups} groups")
        dtype = conv.result_dtype(op, out_dtype, x, w)
        y = conv_gather.conv_transpose(x.astype(dtype, copy=False), w.astype(dtype, copy=False), taxes, groups)
        return np.ascontiguousarray(to_layout(op, y, "NCDHW", out_layout or data_layout))
    x2 = x.transpose(0, 2, 1, 3, 4).reshape(n * depth, c, h, wd)
    buf = None
    for t in range(kd):
        y = conv.conv2d_transpose(x2, w[:, :, t], strides=(sh, sw), padding=(pt, pl, pb, pr), output_padding=(oph, opw),
                                  dilation=(dh, dw), groups=groups, out_dtype=out_dtype)
        y = y.reshape(n, depth, *y.shape[1:])
        if buf is None:
            full = max((depth - 1) * sd + dd * (kd - 1) + 1, pf + od)
            buf = np.zeros((n, full) + y.shape[2:], y.dtype)
        buf[:, t * dd : t * dd + (depth - 1) * sd + 1 : sd] += y
    out = buf[:, pf : pf + od].transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(to_layout(op, out, "NCDHW", out_layout or data_layout))
