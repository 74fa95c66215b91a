"""Torch kernels of the normalizations and their fused backward ops (ops/nn/norm.py, grad.*_norm_backward):
the formulas of ops/kernels/norm.py, statistics accumulated in float64 as there."""

from __future__ import annotations

import math

import torch

from retrograd.errors import KernelError
from retrograd.ops.kernels.norm import norm_axes
from retrograd.ops.torch_kernels.nn import check_float

f64 = torch.float64


def _stats(x, stat, centered, eps):
    n = math.prod(x.shape[a] for a in stat) or 1
    mean = x.to(f64).mean(stat, keepdim=True).to(x.dtype) if centered and stat else (torch.zeros((), dtype=x.dtype, device=x.device) if centered else None)
    xc = x - mean if centered else x
    sq = (xc.to(f64) ** 2).sum(stat, keepdim=True) / n if stat else (xc.to(f64) ** 2)
    rstd = (1.0 / torch.sqrt(sq + eps)).to(x.dtype)
    return rstd, xc, sq


def norm_forward(x, stat, centered, eps, gamma_b=None, beta_b=None):
    rstd, xc, _ = _stats(x, stat, centered, eps)
    out = xc * rstd
    if gamma_b is not None:
        out = out * gamma_b
    if beta_b is not None:
        out = out + beta_b
    return out


def _param_sum(a, like):
    axes = tuple(i for i, d in enumerate(like.shape) if d == 1 and a.shape[i] != 1)
    return a.sum(axes, keepdim=True) if axes else a


def norm_backward(g, x, stat, centered, eps, gamma_b):
    rstd, xc, _ = _stats(x, stat, centered, eps)
    xhat = xc * rstd
    dgamma = _param_sum((g * xhat).to(f64), gamma_b).to(x.dtype)
    dbeta = _param_sum(g.to(f64), gamma_b).to(x.dtype)
    dxhat = g * gamma_b
    n = math.prod(x.shape[a] for a in stat) or 1
    b = ((dxhat * xhat).to(f64).sum(stat, keepdim=True) / n).to(x.dtype)
    o = dxhat - xhat * b
    if centered:
        o = o - (dxhat.to(f64).sum(stat, keepdim=True) / n).to(x.dtype)
    return o * rstd, dgamma, dbeta


def _param_view(op, name, p, x, axes):
    check_float(op, name, p)
    want = tuple(x.shape[a] for a in axes)
    if tuple(p.shape) != want:
        raise KernelError(f"{op}: {name} has shape {tuple(p.shape)}, expected {want}")
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    b = [1] * x.ndim
    for a in axes:
        b[a] = x.shape[a]
    return p.permute(order).reshape(b).to(x.dtype)


def _unview(p, axes, shape):
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    sq = p.reshape([p.shape[a] for a in sorted(axes)])
    inverse = sorted(range(len(order)), key=lambda i: order[i])
    return sq.permute(inverse).reshape(shape).contiguous()


def _grad(g, x):
    if tuple(g.shape) != tuple(x.shape):
        raise KernelError(f"output_grad has shape {tuple(g.shape)}, expected the data's {tuple(x.shape)}")
    return g.to(x.dtype)


def layer_norm(data, gamma, beta, axes, epsilon=1e-5, center=True, scale=True):
    x = check_float("layer_norm", "data", data)
    ax = norm_axes("layer_norm", axes, x.ndim)
    g = _param_view("layer_norm", "gamma", gamma, x, ax) if scale else None
    b = _param_view("layer_norm", "beta", beta, x, ax) if center and beta is not None else None
    return norm_forward(x, ax, True, epsilon, g, b)


def rms_norm(data, weight, axes=(-1,), epsilon=1e-5):
    x = check_float("rms_norm", "data", data)
    ax = norm_axes("rms_norm", axes, x.ndim)
    return norm_forward(x, ax, False, epsilon, _param_view("rms_norm", "weight", weight, x, ax))


def _group_view(op, data, gamma, beta, num_groups, channel_axis, axes, scale, center):
    x = check_float(op, "data", data)
    c_ax = norm_axes(op, (channel_axis,), x.ndim)[0]
    ax = norm_axes(op, axes, x.ndim)
    c = x.shape[c_ax]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise KernelError(f"{op}: {c} channels are not divisible into {num_groups} groups")
    xv = x.reshape(tuple(x.shape[:c_ax]) + (num_groups, c // num_groups) + tuple(x.shape[c_ax + 1:]))
    stat = (c_ax + 1,) + tuple(a + 1 if a > c_ax else a for a in ax)
    bshape = [1] * xv.ndim
    bshape[c_ax], bshape[c_ax + 1] = num_groups, c // num_groups

    def param(name, p):
        check_float(op, name, p)
        if tuple(p.shape) != (c,):
            raise KernelError(f"{op}: {name} has shape {tuple(p.shape)}, expected ({c},)")
        return p.reshape(bshape).to(x.dtype)

    return x, xv, stat, (param("gamma", gamma) if scale else None), (param("beta", beta) if center else None), c


def group_norm(data, gamma, beta, num_groups, channel_axis, axes, epsilon=1e-5, center=True, scale=True):
    x, xv, stat, g, b, _ = _group_view("group_norm", data, gamma, beta, num_groups, channel_axis, axes, scale, center)
    return norm_forward(xv, stat, True, epsilon, g, b).reshape(x.shape)


def instance_norm(data, gamma, beta, channel_axis, axes, epsilon=1e-5, center=True, scale=True):
    check_float("instance_norm", "data", data)
    c = data.shape[norm_axes("instance_norm", (channel_axis,), data.ndim)[0]]
    return group_norm(data, gamma, beta, c, channel_axis, axes, epsilon, center, scale)


def _batch_view(op, data, params, axis):
    x = check_float(op, "data", data)
    ax = norm_axes(op, (axis,), x.ndim)[0]
    c = x.shape[ax]
    b = [1] * x.ndim
    b[ax] = c
    out = []
    for name, p in params:
        check_float(op, name, p)
        if tuple(p.shape) != (c,):
            raise KernelError(f"{op}: {name} has shape {tuple(p.shape)}, expected ({c},)")
        out.append(p.reshape(b).to(x.dtype))
    return x, ax, tuple(i for i in range(x.ndim) if i != ax), out


def _channel_stats(x, others):
    n = math.prod(x.shape[a] for a in others) or 1
    mean = x.to(f64).sum(others, keepdim=True) / n
    xc = x - mean.to(x.dtype)
    return mean, (xc.to(f64) ** 2).sum(others, keepdim=True) / n


def batch_norm(data, gamma, beta, moving_mean, moving_var, axis, epsilon=1e-5, center=True, scale=True, momentum=0.1,
               training=True):
    params = [("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean), ("moving_var", moving_var)]
    x, ax, others, (g, b, mm, mv) = _batch_view("batch_norm", data, params, axis)
    g = g if scale else None
    b = b if center else None
    if training:
        mean, var = _channel_stats(x, others)
        rstd = 1.0 / torch.sqrt(var + epsilon)
        s_ = rstd if g is None else rstd * g
        out = (x.to(f64) - mean).to(x.dtype) * s_.to(x.dtype)  # centred first, as the NumPy kernel
        if b is not None:
            out = out + b
        m = momentum
        new_mean = ((1 - m) * mm.to(f64) + m * mean).reshape(-1)
        new_var = ((1 - m) * mv.to(f64) + m * var).reshape(-1)
        return out, new_mean.to(x.dtype), new_var.to(x.dtype)
    s = (1.0 / torch.sqrt(mv.to(f64) + epsilon)).to(x.dtype)
    shift = -mm * s
    if g is not None:
        s, shift = s * g, shift * g
    if b is not None:
        shift = shift + b
    return x * s + shift, moving_mean.clone(), moving_var.clone()


def layer_norm_backward(output_grad, data, gamma, axes, epsilon=1e-5, center=True, scale=True):
    x = check_float("layer_norm_backward", "data", data)
    ax = norm_axes("layer_norm_backward", axes, x.ndim)
    gb = _param_view("layer_norm_backward", "gamma", gamma, x, ax)
    dx, dg, db = norm_backward(_grad(output_grad, x), x, ax, True, epsilon, gb if scale else torch.ones_like(gb))
    return dx, _unview(dg, ax, gamma.shape), _unview(db, ax, gamma.shape)


def rms_norm_backward(output_grad, data, weight, axes=(-1,), epsilon=1e-5):
    x = check_float("rms_norm_backward", "data", data)
    ax = norm_axes("rms_norm_backward", axes, x.ndim)
    gb = _param_view("rms_norm_backward", "weight", weight, x, ax)
    dx, dg, _ = norm_backward(_grad(output_grad, x), x, ax, False, epsilon, gb)
    return dx, _unview(dg, ax, weight.shape)


def group_norm_backward(output_grad, data, gamma, num_groups, channel_axis, axes, epsilon=1e-5, center=True, scale=True):
    x, xv, stat, gb, _, c = _group_view("group_norm_backward", data, gamma, gamma, num_groups, channel_axis, axes, True,
                                        False)
    gv = _grad(output_grad, x).reshape(xv.shape)
    dx, dg, db = norm_backward(gv, xv, stat, True, epsilon, gb if scale else torch.ones_like(gb))
    return dx.reshape(x.shape), dg.reshape(c), db.reshape(c)


def batch_norm_backward(output_grad, mean_grad, var_grad, data, gamma, moving_mean, moving_var, axis, epsilon=1e-5,
                        center=True, scale=True, momentum=0.1, training=True):
    params = [("gamma", gamma), ("moving_mean", moving_mean), ("moving_var", moving_var), ("mean_grad", mean_grad),
              ("var_grad", var_grad)]
    x, ax, others, (gb, mm, mv, gm, gv) = _batch_view("batch_norm_backward", data, params, axis)
    g = _grad(output_grad, x)
    gamma_b = gb if scale else torch.ones_like(gb)
    m = momentum
    if training:
        n = math.prod(x.shape[a] for a in others) or 1
        mean, var = _channel_stats(x, others)
        rstd = 1.0 / torch.sqrt(var + epsilon)
        sum_g = g.to(f64).sum(others, keepdim=True)
        xc = x.to(f64) - mean  # centred first, as the NumPy kernel: x * u - mean * u cancels
        sum_gxhat = rstd * (g.to(f64) * xc).sum(others, keepdim=True)
        s_ = gamma_b.to(f64) * rstd
        u = -s_ * rstd * sum_gxhat / n + gv.to(f64) * (2 * m / n)
        v = -s_ * sum_g / n + gm.to(f64) * (m / n)
        dx = xc.to(x.dtype) * u.to(x.dtype) + v.to(x.dtype) + g * s_.to(x.dtype)
        dgamma, dbeta = sum_gxhat, sum_g
        dmm, dmv = (1 - m) * gm, (1 - m) * gv
    else:
        rstd = (1.0 / torch.sqrt(mv.to(f64) + epsilon)).to(x.dtype)
        s = rstd * gamma_b
        dx = g * s
        sum_g = g.to(f64).sum(others, keepdim=True).to(x.dtype)
        sum_gxc = (g * (x - mm)).to(f64).sum(others, keepdim=True).to(x.dtype)
        dgamma, dbeta = sum_gxc * rstd, sum_g
        dmm = gm - sum_g * s
        dmv = gv - 0.5 * sum_gxc * gamma_b * rstd ** 3

    def flat(a):
        return a.to(x.dtype).reshape(-1).contiguous()

    return dx, flat(dgamma), flat(dbeta), flat(dmm), flat(dmv)


KERNELS = {
    "relax.nn.layer_norm": layer_norm,
    "relax.nn.rms_norm": rms_norm,
    "relax.nn.group_norm": group_norm,
    "relax.nn.instance_norm": instance_norm,
    "relax.nn.batch_norm": batch_norm,
    "relax.grad.layer_norm_backward": layer_norm_backward,
    "relax.grad.rms_norm_backward": rms_norm_backward,
    "relax.grad.group_norm_backward": group_norm_backward,
    "relax.grad.batch_norm_backward": batch_norm_backward,
}
