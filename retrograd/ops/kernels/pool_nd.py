"""1-D and 3-D pooling on the 2-D kernels (a unit H axis; 2-D pools combined over depth taps)."""

# The 3-D divisor and first-maximum order are separable: depth taps times 2-D windows.

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels import pool, window_gather
from retrograd.ops.kernels.pool_nan import nan_last
from retrograd.ops.kernels.conv_nd import per_axis, pad_pairs, with_h_axis
from retrograd.ops.kernels.window import check_float, out_size, to_layout


def _attrs_1d(pool_size, strides, dilation, padding):
    (k,), (s,), (d,) = (per_axis("pool1d", n, v, 1) for n, v in (("pool_size", pool_size), ("strides", strides),
                                                             ("dilation", dilation)))
    (p0,), (p1,) = pad_pairs("pool1d", padding, 1)
    return dict(pool_size=(1, k), strides=(1, s), dilation=(1, d), padding=(0, p0, 0, p1))


def pool1d(kind, data, *, pool_size=1, strides=1, dilation=1, padding=0, ceil_mode=False, count_include_pad=False,
           layout="NCW", out_layout=None):
    """max_pool1d / avg_pool1d (kind "max" / "avg") as the 2-D pool over a unit H axis."""
    lay, out = with_h_axis(layout), with_h_axis(out_layout or layout)
    x = np.expand_dims(np.asarray(data), lay.index("H"))
    fn = pool.max_pool2d if kind == "max" else pool.avg_pool2d
    y = fn(x, **_attrs_1d(pool_size, strides, dilation, padding), ceil_mode=ceil_mode,
           count_include_pad=count_include_pad, layout=lay, out_layout=out)
    return y.squeeze(out.index("H"))


class _Depth:
    """The depth geometry of a 3-D pool and the (N, C*OD, H, W) planes of each depth tap."""

    def __init__(self, op, data, pool_size, strides, dilation, padding, ceil_mode, layout, fill):
        x = np.asarray(data)
        check_float(op, "data", x)
        self.x = to_layout(op, x, layout, "NCDHW")
        self.k = per_axis(op, "pool_size", pool_size, 3)
        self.s = per_axis(op, "strides", strides, 3)
        self.d = per_axis(op, "dilation", dilation, 3)
        (pf, pt, pl), (pk, pb, pr) = pad_pairs(op, padding, 3)
        self.pad_hw = (pt, pl, pb, pr)
        n, c, depth = self.x.shape[:3]
        self.od = od = out_size(op, depth, self.k[0], self.s[0], pf, pk, self.d[0], ceil_mode)
        self.pf, self.pk, self.depth = pf, pk, depth
        full = max(depth + pf + pk, (od - 1) * self.s[0] + (self.k[0] - 1) * self.d[0] + 1)
        self.buf = np.full((n, c, full) + self.x.shape[3:], fill, self.x.dtype)
        self.buf[:, :, pf : pf + depth] = self.x
        self.attrs2d = dict(pool_size=self.k[1:], strides=self.s[1:], dilation=self.d[1:], padding=self.pad_hw,
                            ceil_mode=ceil_mode)

    def rows(self, t):
        """Depth positions of tap t for every output depth (a slice of the padded buffer)."""
        start = t * self.d[0]
        return slice(start, start + (self.od - 1) * self.s[0] + 1, self.s[0])

    def planes(self, t):
        n, c = self.x.shape[:2]
        return np.ascontiguousarray(self.buf[:, :, self.rows(t)]).reshape(n, c * self.od, *self.x.shape[3:])

    def depth_scale(self, include_pad):
        """1 / (taps counted along depth) per output depth (0 where none)."""
        taps = (np.arange(self.od) * self.s[0] - self.pf)[:, None] + np.arange(self.k[0]) * self.d[0]
        lo, hi = (-self.pf, self.depth + self.pk) if include_pad else (0, self.depth)
        counts = ((taps >= lo) & (taps < hi)).sum(1)
        return np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)

    def finish(self, y, layout):
        n, c = self.x.shape[:2]
        y = y.reshape(n, c, self.od, *y.shape[2:])
        return np.ascontiguousarray(to_layout("pool3d", y, "NCDHW", layout))

    def grad_planes(self, output_grad, layout):
        g = to_layout("pool3d", np.asarray(output_grad), layout, "NCDHW").astype(self.x.dtype, copy=False)
        n, c = self.x.shape[:2]
        return np.ascontiguousarray(g).reshape(n, c * self.od, *g.shape[3:])

    def scatter(self, contributions):
        """dx from per-tap (N, C*OD, H, W) data gradients."""
        n, c = self.x.shape[:2]
        acc = np.zeros(self.buf.shape, self.x.dtype)
        for t, part in contributions:
            acc[:, :, self.rows(t)] += part.reshape(n, c, self.od, *part.shape[2:])
        dx = acc[:, :, self.pf : self.pf + self.depth]
        # A copy when padded: the slice of one contiguous plane would keep the whole padded buffer alive.
        return dx if dx.shape == acc.shape else dx.copy()


def _gathered(op, data, pool_size, strides, dilation, padding, ceil_mode, layout):
    """(planes (N*C, D, H, W), axes, (N, C)) when the windows are mostly padding (or wider than the input),
    so that they are gathered (kernels/window_gather.py); None for the regular kernels."""
    x = np.asarray(data)
    check_float(op, "data", x)
    x = to_layout(op, x, layout, "NCDHW")
    k, s, d = (per_axis(op, name, v, 3) for name, v in (("pool_size", pool_size), ("strides", strides), ("dilation", dilation)))
    begins, ends = pad_pairs(op, padding, 3)
    axes = []
    for i in range(3):
        n = x.shape[2 + i]
        axes.append(window_gather.Axis(n, k[i], s[i], d[i], begins[i], ends[i],
                                       out_size(op, n, k[i], s[i], begins[i], ends[i], d[i], ceil_mode)))
    if not window_gather.degenerate(axes):
        return None
    return x.reshape(-1, *x.shape[2:]), axes, x.shape[:2]


def _finish(y, nc, layout, op):
    return np.ascontiguousarray(to_layout(op, y.reshape(*nc, *y.shape[1:]), "NCDHW", layout))


@pool.on_integers
def max_pool3d(data, *, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1), padding=(0, 0, 0),
               ceil_mode=False, count_include_pad=False, layout="NCDHW", out_layout=None):
    """Max over each (D, H, W) window: the max over depth taps of 2-D max pools (padding never wins)."""
    gathered = _gathered("max_pool3d", data, pool_size, strides, dilation, padding, ceil_mode, layout)
    if gathered is not None:
        planes, axes, nc = gathered
        return _finish(window_gather.pool(planes, axes, "max"), nc, out_layout or layout, "max_pool3d")
    z = _Depth("max_pool3d", data, pool_size, strides, dilation, padding, ceil_mode, layout, -np.inf)
    y = None
    for t in range(z.k[0]):
        m = pool.max_pool2d(z.planes(t), **z.attrs2d)
        y = m if y is None else np.maximum(y, m, out=y)
    return z.finish(y, out_layout or layout)


@nan_last(max_pool3d, "NCDHW")
def max_pool3d_backward(output_grad, data, *, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1),
                        padding=(0, 0, 0), ceil_mode=False, count_include_pad=False, layout="NCDHW", out_layout=None):
    """Each window's gradient to its first maximum in row-major (d, h, w) order (as PyTorch): the first
    depth tap whose 2-D maximum is the window's, then that tap's first 2-D maximum."""
    gathered = _gathered("max_pool3d_backward", data, pool_size, strides, dilation, padding, ceil_mode, layout)
    if gathered is not None:
        planes, axes, nc = gathered
        g = to_layout("max_pool3d_backward", np.asarray(output_grad), out_layout or layout, "NCDHW")
        g = g.reshape(planes.shape[0], *g.shape[2:]).astype(planes.dtype, copy=False)
        return _finish(window_gather.max_backward(planes, g, axes), nc, layout, "max_pool3d_backward")
    z = _Depth("max_pool3d_backward", data, pool_size, strides, dilation, padding, ceil_mode, layout, -np.inf)
    g = z.grad_planes(output_grad, out_layout or layout)
    tops = [pool.max_pool2d(z.planes(t), **z.attrs2d) for t in range(z.k[0])]
    best = np.maximum.reduce(tops)
    free = np.ones(best.shape, bool)
    parts = []
    for t, m in enumerate(tops):
        win = (m == best) & free
        free &= ~win
        if win.any():
            parts.append((t, pool.max_pool2d_backward(g * win, z.planes(t), **z.attrs2d)))
    dx = z.scatter(parts)
    return np.ascontiguousarray(to_layout("max_pool3d_backward", dx, "NCDHW", layout))


def max_pool3d_backward_grad(input_grad, data, gather2d, *, pool_size=(1, 1, 1), strides=(1, 1, 1),
                             dilation=(1, 1, 1), padding=(0, 0, 0), ceil_mode=False, count_include_pad=False,
                             layout="NCDHW", out_layout=None):
    """The adjoint of max_pool3d_backward in its output_grad: input_grad read at each window's first
    maximum. `gather2d` is the 2-D read (grad.max_pool2d_backward_grad's kernel)."""
    op = "max_pool3d_backward_grad"
    gathered = _gathered(op, data, pool_size, strides, dilation, padding, ceil_mode, layout)
    if gathered is not None:
        planes, axes, nc = gathered
        u = to_layout(op, np.asarray(input_grad), layout, "NCDHW")
        if u.shape[2:] != planes.shape[1:] or u.shape[:2] != tuple(nc):
            raise KernelError(f"{op}: input_grad has shape {np.shape(input_grad)}, expected the data's {np.shape(data)}")
        out = window_gather.max_backward_grad(planes, u.reshape(planes.shape), axes)
        return _finish(out, nc, out_layout or layout, op)
    z = _Depth(op, data, pool_size, strides, dilation, padding, ceil_mode, layout, -np.inf)
    u = _Depth(op, input_grad, pool_size, strides, dilation, padding, ceil_mode, layout, 0)
    if u.x.shape != z.x.shape:
        raise KernelError(f"{op}: input_grad has shape {np.shape(input_grad)}, expected the data's {np.shape(data)}")
    tops = [pool.max_pool2d(z.planes(t), **z.attrs2d) for t in range(z.k[0])]
    best = np.maximum.reduce(tops)
    free = np.ones(best.shape, bool)
    out = np.zeros(best.shape, u.x.dtype)
    for t, m in enumerate(tops):
        win = (m == best) & free
        free &= ~win
        if win.any():
            out += win * gather2d(u.planes(t), z.planes(t), **z.attrs2d, count_include_pad=False, layout="NCHW",
                                  out_layout=None)
    return z.finish(out, out_layout or layout)


def avg_pool3d(data, *, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1), padding=(0, 0, 0),
               ceil_mode=False, count_include_pad=False, layout="NCDHW", out_layout=None):
    """Mean over each window; the divisor (separable: depth count x 2-D count) counts padding only when
    count_include_pad, never the ceil_mode overhang."""
    gathered = _gathered("avg_pool3d", data, pool_size, strides, dilation, padding, ceil_mode, layout)
    if gathered is not None:
        planes, axes, nc = gathered
        y = window_gather.pool(planes, axes, "avg", bool(count_include_pad))
        return _finish(y, nc, out_layout or layout, "avg_pool3d")
    z = _Depth("avg_pool3d", data, pool_size, strides, dilation, padding, ceil_mode, layout, 0)
    y = None
    for t in range(z.k[0]):
        a = pool.avg_pool2d(z.planes(t), **z.attrs2d, count_include_pad=count_include_pad)
        y = a if y is None else np.add(y, a, out=y)
    scale = np.tile(z.depth_scale(count_include_pad), z.x.shape[1]).astype(y.dtype)
    return z.finish(y * scale[None, :, None, None], out_layout or layout)


def avg_pool3d_backward(output_grad, data, *, pool_size=(1, 1, 1), strides=(1, 1, 1), dilation=(1, 1, 1),
                        padding=(0, 0, 0), ceil_mode=False, count_include_pad=False, layout="NCDHW", out_layout=None):
    """The exact derivative of avg_pool3d: per depth tap, the 2-D averaging adjoint of g / depth count."""
    gathered = _gathered("avg_pool3d_backward", data, pool_size, strides, dilation, padding, ceil_mode, layout)
    if gathered is not None:
        planes, axes, nc = gathered
        g = to_layout("avg_pool3d_backward", np.asarray(output_grad), out_layout or layout, "NCDHW")
        g = g.reshape(planes.shape[0], *g.shape[2:])
        dx = window_gather.avg_backward(g, axes, planes.shape[1:], bool(count_include_pad)).astype(planes.dtype)
        return _finish(dx, nc, layout, "avg_pool3d_backward")
    z = _Depth("avg_pool3d_backward", data, pool_size, strides, dilation, padding, ceil_mode, layout, 0)
    g = z.grad_planes(output_grad, out_layout or layout)
    scale = np.tile(z.depth_scale(count_include_pad), z.x.shape[1]).astype(g.dtype)
    gs = g * scale[None, :, None, None]
    parts = [(t, pool.avg_pool2d_backward(gs, z.planes(t), **z.attrs2d, count_include_pad=count_include_pad))
             for t in range(z.k[0])]
    return np.ascontiguousarray(to_layout("avg_pool3d_backward", z.scatter(parts), "NCDHW", layout))

