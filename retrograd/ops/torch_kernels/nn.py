"""Torch kernels of activations, soft-max, losses, dropout and pad (ops/nn/activation.py,
ops/nn/pointwise.py, ops/nn/loss.py, ops/nn/pad.py, R.erf)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from retrograd.errors import KernelError
from retrograd.ops.kernels.pad import source_index
from retrograd.ops.kernels.pointwise import GELU_TANH_A, GELU_TANH_C, SELU_ALPHA, SELU_SCALE
from retrograd.ops.torch_kernels import from_numpy, to_numpy
from retrograd.ops.torch_kernels.select import keep, select


def check_float(op, name, x):
    if not x.dtype.is_floating_point:
        raise KernelError(f"{op}: {name} must be a float tensor, got {str(x.dtype).replace('torch.', '')}")
    return x


def relu(x):
    # max(x, 0) as TVM lowers it (NumPy: fmax): NaN gives 0, which torch.relu and torch.threshold keep,
    # so NaN is zeroed after. Two vectorized passes: torch.where is not vectorized on CPU (tens of times slower).
    if x.dtype == torch.bool:
        return x.clone()
    if torch.compiler.is_compiling():  # compiled code fuses the select into one loop
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype, device=x.device))
    y = torch.threshold(x, 0, 0)
    if y.dtype.is_floating_point:
        y.nan_to_num_(nan=0.0, posinf=math.inf, neginf=-math.inf)
    return y


def relu_into(out, x):
    torch.threshold(x, 0, 0, out=out)
    return out.nan_to_num_(nan=0.0, posinf=math.inf, neginf=-math.inf)


INTO = {"relax.nn.relu": relu_into}


def gelu(x):
    check_float("gelu", "data", x)
    x64 = x.double()
    return (0.5 * x64 * torch.special.erfc(-x64 / math.sqrt(2.0))).to(x.dtype)


def erf(x):
    return torch.special.erf(x.double()).to(x.dtype)


def silu(x):
    check_float("silu", "data", x)
    return F.silu(x)


def _axis(op, x, axis):
    if x.ndim == 0 or not -x.ndim <= axis < x.ndim:
        raise KernelError(f"{op}: axis {axis!r} out of range for an array of {x.ndim} dimensions")
    return axis


def softmax(x, axis=-1):
    check_float("softmax", "data", x)
    return torch.softmax(x, _axis("softmax", x, axis))


def log_softmax(x, axis=-1):
    check_float("log_softmax", "data", x)
    return torch.log_softmax(x, _axis("log_softmax", x, axis))


def cross_entropy_with_logits(predictions, labels):
    op = "cross_entropy_with_logits"
    check_float(op, "predictions", predictions)
    if predictions.shape != labels.shape:
        raise KernelError(f"{op}: predictions {tuple(predictions.shape)} and labels {tuple(labels.shape)} must have the same shape")
    total = -torch.sum(predictions * labels.to(predictions.dtype))
    if predictions.ndim >= 2:
        total = total / predictions.shape[0]
    return total


class _Nll:
    """As kernels/loss.py: predictions (N, C, D), targets (N, D) with ignored entries at class 0, weights."""

    def __init__(self, op, pred, tgt, weights, reduction, ignore_index):
        check_float(op, "predictions", pred)
        if tgt.dtype.is_floating_point or tgt.dtype == torch.bool:
            raise KernelError(f"{op}: targets must have an integer dtype, got {tgt.dtype}")
        if reduction not in ("mean", "sum", "none"):
            raise KernelError(f"{op}: reduction must be one of ('mean', 'sum', 'none'), got {reduction!r}")
        if pred.ndim == 0:
            raise KernelError(f"{op}: predictions must be (C,) or (N, C, d1, ...), got a scalar")
        lead = () if pred.ndim == 1 else (pred.shape[0],)
        expect = lead + tuple(pred.shape[2:])
        if tuple(tgt.shape) != expect:
            raise KernelError(f"{op}: targets have shape {tuple(tgt.shape)}, expected {expect} for predictions {tuple(pred.shape)}")
        n = lead[0] if lead else 1
        self.c = c = pred.shape[0] if pred.ndim == 1 else pred.shape[1]
        d = math.prod(pred.shape[2:])
        self.pred = pred.reshape(n, c, d)
        self.shape, self.tshape, self.dtype = pred.shape, tgt.shape, pred.dtype
        t = tgt.reshape(n, d).to(torch.int64)
        self.valid = t != ignore_index
        self.t = torch.where(self.valid, t, 0)
        bad = (self.t < 0) | (self.t >= c)
        # Under torch.compile the check would split the graph: there gather's own bounds check raises.
        if not torch.compiler.is_compiling() and bool(bad.any()):
            raise KernelError(f"{op}: target {int(self.t[bad][0])} out of range for {c} classes")
        if weights is None:
            self.w = self.valid.to(pred.dtype)
        else:
            check_float(op, "weights", weights)
            if tuple(weights.shape) != (c,):
                raise KernelError(f"{op}: weights have shape {tuple(weights.shape)}, expected ({c},)")
            self.w = weights.to(pred.dtype)[self.t] * self.valid


def nll_loss(predictions, targets, weights=None, reduction="mean", ignore_index=-100):
    s = _Nll("nll_loss", predictions, targets, weights, reduction, ignore_index)
    picked = torch.gather(s.pred, 1, s.t[:, None, :])[:, 0, :]
    losses = -s.w * keep(s.valid, picked)
    if reduction == "none":
        return losses.reshape(s.tshape)
    total = losses.sum(dtype=s.dtype)
    return total / s.w.sum(dtype=s.dtype) if reduction == "mean" else total


def nll_loss_backward(output_grad, predictions, targets, weights=None, reduction="mean", ignore_index=-100):
    op = "nll_loss_backward"
    s = _Nll(op, predictions, targets, weights, reduction, ignore_index)
    g = output_grad
    if reduction == "none":
        if tuple(g.shape) != tuple(s.tshape):
            raise KernelError(f"{op}: output_grad has shape {tuple(g.shape)}, expected {tuple(s.tshape)} for reduction 'none'")
        coef = -s.w * g.reshape(s.w.shape).to(s.dtype)
    else:
        if g.numel() != 1:
            raise KernelError(f"{op}: output_grad must be a scalar for reduction {reduction!r}, got shape {tuple(g.shape)}")
        scale = g.reshape(()).to(s.dtype)
        if reduction == "mean":
            total = s.w.sum(dtype=s.dtype)
            scale = torch.where(total != 0, scale / total, torch.zeros((), dtype=s.dtype, device=g.device))
        coef = s.w * -scale
    out = torch.zeros(s.pred.shape, dtype=s.dtype, device=predictions.device)
    out.scatter_(1, s.t[:, None, :], coef[:, None, :])
    return out.reshape(s.shape)


def dropout(data, key=None, rate=0.5, training=False, seed=0):
    """The mask is the op's definition (PCG64 draws, ops/kernels/dropout.py): drawn on the host by the
    NumPy kernel, so both backends drop the same elements; the product runs on the device."""
    from retrograd.ops.kernels.dropout import dropout as host_dropout

    check_float("dropout", "data", data)
    host_key = None if key is None else key.detach().cpu().numpy()
    if not training:
        host_dropout(np.zeros((), np.float32), host_key, rate=rate, training=False, seed=seed)  # checks the key
        return data.clone(), torch.ones(data.shape, dtype=data.dtype, device=data.device)
    # bfloat16 is computed in float32 and rounded once, as the NumPy executor computes it (ops/storage.py).
    wide = data.float() if data.dtype == torch.bfloat16 else data
    ones = np.ones(tuple(data.shape), to_numpy(torch.empty(0, dtype=wide.dtype)).dtype)
    _, mask = host_dropout(ones, host_key, rate=rate, training=True, seed=seed)
    mask = from_numpy(mask).to(data.device)
    keep = 1.0 - rate
    scale = 1.0 / keep if keep > 0 else 0.0
    out = wide * mask * torch.tensor(scale, dtype=wide.dtype, device=data.device)
    return out.to(data.dtype), mask.to(data.dtype)


def gelu_tanh(data):
    x = check_float("gelu_tanh", "data", data)
    c, a = torch.tensor(GELU_TANH_C, dtype=x.dtype), torch.tensor(GELU_TANH_A, dtype=x.dtype)
    t = torch.tanh(x * (c.to(x.device) * (1 + a.to(x.device) * x * x)))
    return (x * 0.5) * (1 + t)


def leakyrelu(data, alpha=0.01):
    x = check_float("leakyrelu", "data", data)
    if x.dtype in (torch.float32, torch.float64):
        # ATen's leaky_relu is the same select, x > 0 ? x : x * alpha, alpha rounded to x's dtype; for float16
        # and bfloat16 it multiplies in float32 by an unrounded alpha, NumPy in the dtype.
        return F.leaky_relu(x, alpha)
    return select(x > 0, x, x * torch.tensor(alpha, dtype=x.dtype, device=x.device))


def prelu(data, alpha, axis=1):
    x = check_float("prelu", "data", data)
    check_float("prelu", "alpha", alpha)
    if not -x.ndim <= axis < x.ndim:
        raise KernelError(f"prelu: axis {axis} out of range for an array of {x.ndim} dimensions")
    c = x.shape[axis]
    if alpha.ndim != 1 or alpha.shape[0] not in (c, 1):
        raise KernelError(f"prelu: alpha must have shape ({c},) or (1,), got {tuple(alpha.shape)}")
    shape = [1] * x.ndim
    shape[axis] = alpha.shape[0]
    return select(x > 0, x, x * alpha.reshape(shape).to(x.dtype))


def selu(data):
    x = check_float("selu", "data", data)
    # np.minimum(x, 0): NaN stays, -0 gives +0 (the tie goes to the 0), which adding +0 makes of clamp's -0.
    neg = torch.expm1(torch.clamp(x, max=0).add_(0.0)) * torch.tensor(SELU_ALPHA, dtype=x.dtype, device=x.device)
    return select(x > 0, x, neg) * torch.tensor(SELU_SCALE, dtype=x.dtype, device=x.device)


def softplus(data, beta=1.0, threshold=20.0):
    x = check_float("softplus", "data", data)
    bx = x * torch.tensor(beta, dtype=x.dtype, device=x.device)
    soft = torch.logaddexp(torch.zeros((), dtype=x.dtype, device=x.device), bx) / torch.tensor(beta, dtype=x.dtype, device=x.device)
    return select(bx > threshold, x, soft)


def _widths(op, ndim, pad_width):
    w = [int(v) for v in pad_width]
    if len(w) != 2 * ndim:
        raise KernelError(f"{op}: pad_width needs 2 entries per axis ({2 * ndim}), got {len(w)}")
    return list(zip(w[0::2], w[1::2]))


def pad(data, pad_width, pad_value=0.0, pad_mode="constant"):
    widths = _widths("pad", data.ndim, pad_width)
    out = data
    for axis, (b, a) in enumerate(widths):
        if not (b or a):
            continue
        n = data.shape[axis]
        idx = torch.from_numpy(source_index(n, b, a, pad_mode)).to(data.device)
        if pad_mode == "constant":
            taken = out.index_select(axis, idx.clamp(min=0)) if n else out.new_zeros(out.shape[:axis] + (idx.numel(),) + out.shape[axis + 1:])
            mask = (idx >= 0).reshape((-1,) + (1,) * (data.ndim - axis - 1))
            out = select(mask, taken, torch.tensor(pad_value, device=data.device).to(data.dtype))
        else:
            out = out.index_select(axis, idx)
    return out.contiguous() if out is not data else data.clone()


def pad_backward(output_grad, data, pad_width, pad_value=0.0, pad_mode="constant"):
    widths = _widths("pad_backward", data.ndim, pad_width)
    g = output_grad.to(data.dtype)
    expect = tuple(n + b + a for n, (b, a) in zip(data.shape, widths))
    if tuple(g.shape) != expect:
        raise KernelError(f"pad_backward: output_grad has shape {tuple(g.shape)}, expected {expect}")
    for axis, (b, a) in enumerate(widths):
        idx = torch.from_numpy(source_index(data.shape[axis], b, a, pad_mode)).to(data.device)
        keep = (idx >= 0).nonzero().reshape(-1)
        out = torch.zeros(g.shape[:axis] + (data.shape[axis],) + g.shape[axis + 1:], dtype=g.dtype, device=g.device)
        out.index_add_(axis, idx[keep], g.index_select(axis, keep))
        g = out
    return g.contiguous()


KERNELS = {
    "relax.nn.relu": relu,
    "relax.nn.silu": silu,
    "relax.nn.gelu": gelu,
    "relax.erf": erf,
    "relax.nn.softmax": softmax,
    "relax.nn.log_softmax": log_softmax,
    "relax.nn.cross_entropy_with_logits": cross_entropy_with_logits,
    "relax.nn.nll_loss": nll_loss,
    "relax.grad.nll_loss_backward": nll_loss_backward,
    "relax.nn.dropout": dropout,
    "relax.nn.gelu_tanh": gelu_tanh,
    "relax.nn.leakyrelu": leakyrelu,
    "relax.nn.prelu": prelu,
    "relax.nn.selu": selu,
    "relax.nn.softplus": softplus,
    "relax.nn.pad": pad,
    "relax.grad.pad_backward": pad_backward,
}
