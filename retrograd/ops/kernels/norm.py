"""Normalization kernels (layer, RMS, group, instance, batch norm) and their fused backward passes."""

# Every norm is one computation on a view of the data: statistics over `stat_axes`, then an optional
# per-element scale/shift broadcast from `gamma`/`beta` (already reshaped to broadcast). Work goes in
# ~1 MB chunks along a non-reduced axis so each pass over a chunk stays in cache.

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import check_float, plane_chunk_size, plane_chunks


def _float(op, name, x):
    x = np.asarray(x)
    check_float(op, name, x)
    return x


def norm_axes(op, axes, ndim) -> tuple[int, ...]:
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise KernelError(f"{op}: axis {a} out of range for an array of {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise KernelError(f"{op}: repeated axis in {list(axes)}")
    return tuple(out)


class _Plan:
    """How to walk the data: the chunked axis (a non-reduced one, or None) and the chunk size."""

    def __init__(self, shape, stat_axes, itemsize):
        self.stat_axes = tuple(stat_axes)
        free = [i for i in range(len(shape)) if i not in self.stat_axes]
        self.axis = free[0] if free else None
        if self.axis is None or shape[self.axis] == 0:
            self.size, self.n = 1, 1
            self.axis = None
            return
        self.n = shape[self.axis]
        per = int(np.prod(shape, dtype=np.int64)) // max(1, self.n) * itemsize
        self.size = plane_chunk_size(per, 2 << 20)

    def chunks(self):
        if self.axis is None:
            yield (Ellipsis,)
            return
        for sl in plane_chunks(self.n, self.size):
            yield (slice(None),) * self.axis + (sl,)

    def part(self, a, idx):
        """a[idx] where `a` broadcasts against the data (a size-1 dim is not sliced)."""
        if a is None or idx == (Ellipsis,) or a.shape[self.axis] == 1:
            return a
        return a[idx]


def _stats(xs, stat_axes, centered, eps):
    """(mean or None, 1/sqrt(var + eps)) over stat_axes with keepdims; var is the biased variance
    (the mean square when not centered). Accumulates in float64 for accuracy over long reductions."""
    mean = xs.mean(stat_axes, keepdims=True, dtype=np.float64) if centered else None
    n = int(np.prod([xs.shape[a] for a in stat_axes], dtype=np.int64)) or 1
    xc = xs - mean.astype(xs.dtype) if centered else xs
    sq = np.square(xc).sum(stat_axes, keepdims=True, dtype=np.float64) / n
    rstd = 1.0 / np.sqrt(sq + eps)
    return (None if mean is None else mean.astype(xs.dtype)), rstd.astype(xs.dtype), xc, sq


def norm_forward(x, stat_axes, centered, eps, gamma_b=None, beta_b=None):
    """(x - mean) / sqrt(var + eps) * gamma + beta (mean and var over stat_axes; no mean when not
    centered, as RMS norm). Also returns the statistics (mean or None, float64 variance) with keepdims."""
    plan = _Plan(x.shape, stat_axes, x.itemsize)
    out = np.empty(x.shape, x.dtype)
    means, variances = [], []
    for idx in plan.chunks():
        xs = x[idx]
        o = out[idx]
        mean, rstd, xc, var = _stats(xs, stat_axes, centered, eps)
        np.multiply(xc, rstd, out=o)
        if gamma_b is not None:
            o *= plan.part(gamma_b, idx)
        if beta_b is not None:
            o += plan.part(beta_b, idx)
        means.append(mean)
        variances.append(var)
    cat = (lambda parts: parts[0]) if plan.axis is None else (lambda parts: np.concatenate(parts, axis=plan.axis))
    return out, (None if not centered else cat(means)), cat(variances)


def _param_sum(a, like):
    """Sum of `a` over the axes where the broadcast parameter `like` has size 1 (keepdims)."""
    axes = tuple(i for i, d in enumerate(like.shape) if d == 1 and a.shape[i] != 1)
    return a.sum(axes, keepdims=True) if axes else a


def norm_backward(g, x, stat_axes, centered, eps, gamma_b=None, want_params=True):
    """Fused backward of norm_forward: (dx, dgamma_b, dbeta_b), the parameter gradients in the
    broadcast shape of gamma_b (None when gamma_b is None or want_params is False).

    With xhat = (x - mean) * rstd and dxhat = g * gamma over a reduction of n elements:
    dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)); without centering the mean(dxhat)
    term is absent.
    """
    plan = _Plan(x.shape, stat_axes, x.itemsize)
    dx = np.empty(x.shape, x.dtype)
    pshape = None if gamma_b is None else gamma_b.shape
    dgamma = None if pshape is None or not want_params else np.zeros(pshape, np.float64)
    dbeta = None if dgamma is None else np.zeros(pshape, np.float64)
    for idx in plan.chunks():
        xs, gs, o = x[idx], g[idx], dx[idx]
        _, rstd, xc, _ = _stats(xs, stat_axes, centered, eps)
        xhat = xc * rstd
        if dgamma is not None:
            sl = idx if plan.axis is not None and pshape[plan.axis] != 1 else Ellipsis
            dgamma[sl] += _param_sum(gs * xhat, gamma_b)
            dbeta[sl] += _param_sum(gs, gamma_b)
        dxhat = gs * plan.part(gamma_b, idx) if gamma_b is not None else gs
        n = int(np.prod([xs.shape[a] for a in stat_axes], dtype=np.int64)) or 1
        b = (dxhat * xhat).sum(stat_axes, keepdims=True, dtype=np.float64) / n
        np.multiply(xhat, b.astype(x.dtype), out=o)
        np.subtract(dxhat, o, out=o)
        if centered:
            o -= (dxhat.sum(stat_axes, keepdims=True, dtype=np.float64) / n).astype(x.dtype)
        o *= rstd
    cast = (lambda a: None if a is None else a.astype(x.dtype))
    return dx, cast(dgamma), cast(dbeta)


# -- per-op views --------------------------------------------------------------------------------


def _param_view(op, name, p, x, axes, dtype):
    """gamma/beta (shaped like x's dims at `axes`, in that order) reshaped to broadcast against x."""
    p = _float(op, name, p)
    want = tuple(x.shape[a] for a in axes)
    if p.shape != want:
        raise KernelError(f"{op}: {name} has shape {p.shape}, expected {want}")
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    b = [1] * x.ndim
    for a in axes:
        b[a] = x.shape[a]
    return p.transpose(order).reshape(b).astype(dtype, copy=False)


def layer_norm_view(op, data, gamma, beta, axes, scale, center):
    x = _float(op, "data", data)
    ax = norm_axes(op, axes, x.ndim)
    g = _param_view(op, "gamma", gamma, x, ax, x.dtype) if scale else None
    b = _param_view(op, "beta", beta, x, ax, x.dtype) if center and beta is not None else None
    return x, ax, g, b


def layer_norm(data, gamma, beta, *, axes, epsilon=1e-5, center=True, scale=True):
    """(x - mean) / sqrt(var + eps) over `axes`, times gamma plus beta (shaped like the dims at axes)."""
    x, ax, g, b = layer_norm_view("layer_norm", data, gamma, beta, axes, scale, center)
    return norm_forward(x, ax, True, epsilon, g, b)[0]


def rms_norm(data, weight, *, axes=(-1,), epsilon=1e-5):
    """x / sqrt(mean(x^2) + eps) over `axes`, times weight (shaped like the dims at axes)."""
    x, ax, g, _ = layer_norm_view("rms_norm", data, weight, None, axes, True, False)
    return norm_forward(x, ax, False, epsilon, g)[0]


def group_view(op, data, gamma, beta, num_groups, channel_axis, axes, scale, center):
    """The data with its channel axis split as (groups, channels per group), the statistics' axes in
    that view, and gamma/beta (C,) broadcast against it."""
    x = _float(op, "data", data)
    c_ax = norm_axes(op, (channel_axis,), x.ndim)[0]
    ax = norm_axes(op, axes, x.ndim)
    c = x.shape[c_ax]
    if not isinstance(num_groups, (int, np.integer)) or num_groups < 1 or c % num_groups:
        raise KernelError(f"{op}: {c} channels are not divisible into {num_groups} groups")
    xv = x.reshape(x.shape[:c_ax] + (num_groups, c // num_groups) + x.shape[c_ax + 1 :])
    stat = (c_ax + 1,) + tuple(a + 1 if a > c_ax else a for a in ax)
    bshape = [1] * xv.ndim
    bshape[c_ax], bshape[c_ax + 1] = num_groups, c // num_groups

    def param(name, p):
        p = _float(op, name, p)
        if p.shape != (c,):
            raise KernelError(f"{op}: {name} has shape {p.shape}, expected ({c},)")
        return p.reshape(bshape).astype(x.dtype, copy=False)

    g = param("gamma", gamma) if scale else None
    b = param("beta", beta) if center else None
    return x, xv, stat, g, b


def group_norm(data, gamma, beta, *, num_groups, channel_axis, axes, epsilon=1e-5, center=True, scale=True):
    """Statistics per group of channels over `axes` (and the group's channels); per-channel gamma, beta."""
    x, xv, stat, g, b = group_view("group_norm", data, gamma, beta, num_groups, channel_axis, axes, scale, center)
    return norm_forward(xv, stat, True, epsilon, g, b)[0].reshape(x.shape)


def instance_norm(data, gamma, beta, *, channel_axis, axes, epsilon=1e-5, center=True, scale=True):
    """Statistics per channel over `axes` (group_norm with one group per channel)."""
    x = _float("instance_norm", "data", data)
    c = x.shape[norm_axes("instance_norm", (channel_axis,), x.ndim)[0]]
    return group_norm(data, gamma, beta, num_groups=c, channel_axis=channel_axis, axes=axes, epsilon=epsilon,
                      center=center, scale=scale)


def batch_view(op, data, params, axis):
    """(x, channel axis, the other axes, params reshaped to broadcast along the channel axis)."""
    x = _float(op, "data", data)
    ax = norm_axes(op, (axis,), x.ndim)[0]
    c = x.shape[ax]
    b = [1] * x.ndim
    b[ax] = c
    out = []
    for name, p in params:
        p = _float(op, name, p)
        if p.shape != (c,):
            raise KernelError(f"{op}: {name} has shape {p.shape}, expected ({c},)")
        out.append(p.reshape(b).astype(x.dtype, copy=False))
    return x, ax, tuple(i for i in range(x.ndim) if i != ax), out


def batch_norm(data, gamma, beta, moving_mean, moving_var, *, axis, epsilon=1e-5, center=True, scale=True,
               momentum=0.1, training=True):
    """TVM 0.27's batch_norm: (out, new moving mean, new moving var).

    Training normalizes with the batch statistics (biased variance) and returns
    (1 - momentum) * moving + momentum * batch for both statistics (TVM updates the variance with the
    biased batch variance; PyTorch uses the unbiased one). Inference normalizes with the moving
    statistics and returns them unchanged (as copies).
    """
    op = "batch_norm"
    params = [("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean), ("moving_var", moving_var)]
    x, ax, others, (g, b, mm, mv) = batch_view(op, data, params, axis)
    g = g if scale else None
    b = b if center else None
    if training:
        x3 = _by_channel(x, ax)
        mean, var = _channel_stats(x3)
        rstd = 1.0 / np.sqrt(var + epsilon)
        s_ = rstd if g is None else rstd * g.reshape(-1)
        t_ = np.zeros_like(rstd) if b is None else b.reshape(-1).astype(np.float64)
        out = _channel_affine(x3, s_, t_, center=mean).reshape(x.shape)
        m = momentum
        new_mean = (1 - m) * mm.reshape(-1) + m * mean
        new_var = (1 - m) * mv.reshape(-1) + m * var
        return out, new_mean.astype(x.dtype), new_var.astype(x.dtype)
    s = (1.0 / np.sqrt(mv.astype(np.float64) + epsilon)).astype(x.dtype)
    shift = -mm * s
    if g is not None:
        s, shift = s * g, shift * g
    if b is not None:
        shift = shift + b
    out = np.multiply(x, s, order="C")
    out += shift
    return out, np.array(moving_mean, copy=True), np.array(moving_var, copy=True)


def _by_channel(x, ax):
    """x as (outer, C, inner) with the channel axis in the middle (a view of contiguous data)."""
    shape = x.shape
    outer = int(np.prod(shape[:ax], dtype=np.int64))
    inner = int(np.prod(shape[ax + 1 :], dtype=np.int64))  # explicit: -1 is ambiguous for zero-size x
    return np.ascontiguousarray(x).reshape(outer, shape[ax], inner)


def _channel_dot(a3, b3):
    """Per-channel sum of a3 (times b3 when given), accumulated per row in the data's dtype, then in float64."""
    rows = np.einsum("ncl->nc", a3) if b3 is None else np.einsum("ncl,ncl->nc", a3, b3)
    return rows.sum(0, dtype=np.float64)


def _channel_stats(x3, g3=None):
    """Per-channel mean and biased variance (float64) of (outer, C, inner) data by the corrected two-pass
    method: sums of x - m for a first mean m rounded to the data's dtype, then
    mean = m + sum(x - m) / n and var = sum((x - m)^2) / n - (sum(x - m) / n)^2. Where |mean| >> std,
    float32 partial sums of x, or x * x - mean * mean, would lose |mean| / std of the digits. Given g3,
    also sum((x - m) * g), in the same pass: (mean, var, m, that sum)."""
    n = x3.shape[0] * x3.shape[2] or 1
    m = (_channel_dot(x3, None) / n).astype(x3.dtype)
    s1, s2 = np.zeros(x3.shape[1]), np.zeros(x3.shape[1])
    sg = np.zeros(x3.shape[1]) if g3 is not None else None
    for sl in plane_chunks(x3.shape[0], plane_chunk_size(x3.nbytes // max(1, x3.shape[0]))):
        xc = x3[sl] - m[:, None]  # in the data's dtype: exact where x is near m
        s1 += _channel_dot(xc, None)
        s2 += _channel_dot(xc, xc)
        if g3 is not None:
            sg += _channel_dot(xc, g3[sl])
    shift = s1 / n
    # A channel holding an infinity has that infinite first mean (x - m would be inf - inf, NaN): its mean.
    mean, var = np.where(np.isfinite(m), m + shift, m), np.maximum(s2 / n - shift * shift, 0.0)
    return (mean, var) if g3 is None else (mean, var, m, sg)


def _channel_affine(x3, s, t, g3=None, gs=None, center=None):
    """(x3 - center) * s + t (+ g3 * gs) with per-channel float64 s, t, gs, center, in cache-sized chunks
    of rows. x3 - center is taken against the center rounded to x3's dtype; t absorbs the rounding."""
    out = np.empty(x3.shape, x3.dtype)
    if center is not None:
        c = np.asarray(center, np.float64).astype(x3.dtype)
        t = t - (center - c) * s
        c = c[:, None]
    s, t = s.astype(x3.dtype)[:, None], t.astype(x3.dtype)[:, None]
    gs = None if gs is None else gs.astype(x3.dtype)[:, None]
    size = plane_chunk_size(x3.nbytes // max(1, x3.shape[0]))
    tmp = np.empty((min(size, x3.shape[0]),) + x3.shape[1:], x3.dtype) if g3 is not None else None
    for sl in plane_chunks(x3.shape[0], size):
        o = out[sl]
        if center is None:
            np.multiply(x3[sl], s, out=o)
        else:
            np.subtract(x3[sl], c, out=o)
            o *= s
        o += t
        if g3 is not None:
            tm = tmp[: sl.stop - sl.start]
            np.multiply(g3[sl], gs, out=tm)
            o += tm
    return out


# -- backward ops -------------------------------------------------------------------------------


def _rows_backward(g, x, gamma, eps, centered):
    """norm_backward over the last axis of 2-D (rows, K) data with a (K,) gamma: ~1 MB chunks of rows,
    reductions as einsum contractions (no temporaries), scratch buffers reused across chunks."""
    m, k = x.shape
    dx = np.empty_like(x)
    dgamma, dbeta = np.zeros(k), np.zeros(k)
    size = max(1, (1 << 20) // max(1, k * x.itemsize))
    xh, dxh = np.empty((size, k), x.dtype), np.empty((size, k), x.dtype)
    for sl in plane_chunks(m, size):
        p = sl.stop - sl.start
        xs, gs, o, c, d = x[sl], g[sl], dx[sl], xh[:p], dxh[:p]
        if centered:
            np.subtract(xs, xs.mean(1, keepdims=True), out=c)
        else:
            c[...] = xs
        rstd = (1.0 / np.sqrt(np.einsum("ij,ij->i", c, c) / k + eps)).astype(x.dtype)[:, None]
        c *= rstd  # xhat
        dgamma += np.einsum("ij,ij->j", gs, c)
        dbeta += gs.sum(0)
        np.multiply(gs, gamma, out=d)  # dxhat
        np.multiply(c, (np.einsum("ij,ij->i", d, c) / k).astype(x.dtype)[:, None], out=o)
        np.subtract(d, o, out=o)
        if centered:
            o -= d.mean(1, keepdims=True)
        o *= rstd
    return dx, dgamma.astype(x.dtype), dbeta.astype(x.dtype)


def _trailing(x, ax) -> bool:
    """Whether the axes are the trailing axes in order (the data is then (rows, K) with gamma (K,))."""
    return tuple(ax) == tuple(range(x.ndim - len(ax), x.ndim))


def layer_norm_backward(output_grad, data, gamma, *, axes, epsilon=1e-5, center=True, scale=True):
    """(d data, d gamma, d beta) of layer_norm for the cotangent output_grad."""
    x, ax, gb, _ = layer_norm_view("layer_norm_backward", data, gamma, None, axes, True, False)
    g = _grad(output_grad, x)
    if _trailing(x, ax) and x.size:
        k = int(np.prod([x.shape[a] for a in ax]))
        gam = gb.reshape(k) if scale else np.ones(k, x.dtype)
        dx, dg, db = _rows_backward(np.ascontiguousarray(g).reshape(-1, k), np.ascontiguousarray(x).reshape(-1, k),
                                    gam, epsilon, True)
        return dx.reshape(x.shape), dg.reshape(np.shape(gamma)), db.reshape(np.shape(gamma))
    dx, dg, db = norm_backward(g, x, ax, True, epsilon, gb if scale else np.ones_like(gb))
    shape = np.shape(gamma)
    return dx, _unview(dg, ax, shape), _unview(db, ax, shape)


def _unview(p, axes, shape):
    """Inverse of _param_view: a broadcast-shaped parameter gradient back to the parameter's shape."""
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    sq = p.reshape([p.shape[a] for a in sorted(axes)])
    return np.ascontiguousarray(sq.transpose(np.argsort(order))).reshape(shape)


def _grad(output_grad, x):
    g = np.asarray(output_grad)
    if g.shape != x.shape:
        raise KernelError(f"output_grad has shape {g.shape}, expected the data's {x.shape}")
    return g.astype(x.dtype, copy=False)


def rms_norm_backward(output_grad, data, weight, *, axes=(-1,), epsilon=1e-5):
    """(d data, d weight) of rms_norm."""
    x, ax, gb, _ = layer_norm_view("rms_norm_backward", data, weight, None, axes, True, False)
    g = _grad(output_grad, x)
    if _trailing(x, ax) and x.size:
        k = gb.size
        dx, dg, _ = _rows_backward(np.ascontiguousarray(g).reshape(-1, k), np.ascontiguousarray(x).reshape(-1, k),
                                   gb.reshape(k), epsilon, False)
        return dx.reshape(x.shape), dg.reshape(np.shape(weight))
    dx, dg, _ = norm_backward(g, x, ax, False, epsilon, gb)
    return dx, _unview(dg, ax, np.shape(weight))


def group_norm_backward(output_grad, data, gamma, *, num_groups, channel_axis, axes, epsilon=1e-5, center=True,
                        scale=True):
    """(d data, d gamma, d beta) of group_norm (instance_norm is the case num_groups = channels)."""
    x, xv, stat, gb, _ = group_view("group_norm_backward", data, gamma, gamma, num_groups, channel_axis, axes, True,
                                    False)
    gv = _grad(output_grad, x).reshape(xv.shape)
    dx, dg, db = norm_backward(gv, xv, stat, True, epsilon, gb if scale else np.ones_like(gb))
    c = x.shape[norm_axes("group_norm_backward", (channel_axis,), x.ndim)[0]]
    return dx.reshape(x.shape), dg.reshape(c), db.reshape(c)


def batch_norm_backward(output_grad, mean_grad, var_grad, data, gamma, moving_mean, moving_var, *, axis,
                        epsilon=1e-5, center=True, scale=True, momentum=0.1, training=True):
    """(d data, d gamma, d beta, d moving_mean, d moving_var) of batch_norm for the cotangents of its
    three results."""
    op = "batch_norm_backward"
    params = [("gamma", gamma), ("moving_mean", moving_mean), ("moving_var", moving_var),
              ("mean_grad", mean_grad), ("var_grad", var_grad)]
    x, ax, others, (gb, mm, mv, gm, gv) = batch_view(op, data, params, axis)
    g = _grad(output_grad, x)
    gamma_b = gb if scale else np.ones_like(gb)
    m = momentum
    if training:
        # dx = gamma * rstd * (g - mean(g) - xhat * mean(g * xhat)), plus the moving statistics'
        # updates: m * batch mean (d/dx = m / n) and m * batch variance (d/dx = 2 m (x - mean) / n).
        # All of it is g * s + (x - mean) * u + v with per-channel s, u, v.
        x3, g3 = _by_channel(x, ax), _by_channel(g, ax)
        n = x3.shape[0] * x3.shape[2] or 1
        # x - mean is taken before the products (as PyTorch does): x * u - mean * u cancels when |mean| >> std.
        mean, var, m0, sum_gxc = _channel_stats(x3, g3)
        rstd = 1.0 / np.sqrt(var + epsilon)
        sum_g = _channel_dot(g3, None)
        sum_gxhat = rstd * (sum_gxc - (mean - m0) * sum_g)
        gam = gamma_b.reshape(-1).astype(np.float64)
        gmf, gvf = gm.reshape(-1).astype(np.float64), gv.reshape(-1).astype(np.float64)
        s_ = gam * rstd
        u = -s_ * rstd * sum_gxhat / n + gvf * (2 * m / n)
        v = -s_ * sum_g / n + gmf * (m / n)
        dx = _channel_affine(x3, u, v, g3, s_, center=mean).reshape(x.shape)
        dgamma, dbeta = sum_gxhat, sum_g
        dmm, dmv = (1 - m) * gm, (1 - m) * gv
    else:
        rstd = (1.0 / np.sqrt(mv.astype(np.float64) + epsilon)).astype(x.dtype)
        s = rstd * gamma_b
        dx = np.multiply(g, s, order="C")
        sum_g = g.sum(others, keepdims=True, dtype=np.float64).astype(x.dtype)
        sum_gxc = (g * (x - mm)).sum(others, keepdims=True, dtype=np.float64).astype(x.dtype)
        dgamma, dbeta = sum_gxc * rstd, sum_g
        dmm = gm - sum_g * s
        dmv = gv - 0.5 * sum_gxc * gamma_b * rstd ** 3
    flat = (lambda a: np.ascontiguousarray(a, dtype=x.dtype).reshape(-1))
    return dx, flat(dgamma), flat(dbeta), flat(dmm), flat(dmv)
