"""Torch kernels of attention and its fused backward (ops/nn/attention.py, grad.attention_backward): the
formulas of ops/kernels/attention.py (grouped-query heads, TVM's causal offsets, optional bias)."""

from __future__ import annotations

import math

import torch

from retrograd.errors import KernelError
from retrograd.ops.torch_kernels.nn import check_float
from retrograd.ops.torch_kernels.select import select


def _inputs(op, q, k, v, bias):
    for name, a in (("query", q), ("key", k), ("value", v)):
        check_float(op, name, a)
        if a.ndim != 4:
            raise KernelError(f"{op}: {name} must be 4-D (batch, seq, heads, head_dim), got shape {tuple(a.shape)}")
    b, s, n, h = q.shape
    if k.shape[0] != b or v.shape[0] != b or k.shape[1] != v.shape[1] or k.shape[3] != h or k.shape[2] != v.shape[2]:
        raise KernelError(f"{op}: incompatible query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}")
    if n % k.shape[2] if k.shape[2] else n:
        raise KernelError(f"{op}: {n} query heads are not a multiple of {k.shape[2]} key/value heads")
    if bias is not None:
        try:
            torch.broadcast_shapes(bias.shape, (b, n, s, k.shape[1]))
        except RuntimeError:
            raise KernelError(f"{op}: bias {tuple(bias.shape)} does not broadcast to {(b, n, s, k.shape[1])}") from None


def _heads_first(a, groups):
    t = a.transpose(1, 2)
    return torch.repeat_interleave(t, groups, dim=1) if groups > 1 else t


def _probabilities(q, k, v, bias, scale, causal_mask, window_size):
    if window_size is not None:
        raise KernelError("attention: window_size (sliding-window attention) is not supported")
    b, s, n, h = q.shape
    groups = n // k.shape[2] if k.shape[2] else 1
    qt = q.transpose(1, 2)
    kt, vt = _heads_first(k, groups), _heads_first(v, groups)
    dtype = torch.promote_types(torch.promote_types(q.dtype, k.dtype), v.dtype)
    sc = (1.0 / math.sqrt(h) if h else math.inf) if scale is None else scale
    p = torch.matmul(qt, kt.transpose(2, 3)) * torch.tensor(sc, dtype=dtype, device=q.device)
    if bias is not None:
        p = p + bias.to(dtype)
    if causal_mask is not None:
        if causal_mask not in ("TopLeft", "BottomRight"):
            raise KernelError(f"attention: causal_mask must be None, 'TopLeft' or 'BottomRight', got {causal_mask!r}")
        skv = k.shape[1]
        offset = 0 if causal_mask == "TopLeft" else abs(s - skv)
        keep = torch.arange(skv, device=q.device)[None, :] <= torch.arange(s, device=q.device)[:, None] + offset
        p = select(keep, p, torch.tensor(-math.inf, dtype=dtype, device=q.device))
    if p.shape[-1]:
        p = p - p.amax(dim=-1, keepdim=True)
    p = torch.exp(p)
    p = p * torch.reciprocal(p.sum(dim=-1, keepdim=True))
    return p, qt, kt, vt, sc


def attention(query, key, value, bias=None, scale=None, causal_mask=None, window_size=None):
    _inputs("attention", query, key, value, bias)
    p, _, _, vt, _ = _probabilities(query, key, value, bias, scale, causal_mask, window_size)
    return torch.matmul(p, vt).transpose(1, 2).contiguous()


def _group_sum(a, nk):
    b, n, s, h = a.shape
    return a.reshape(b, nk, n // nk if nk else 0, s, h).sum(dim=2).transpose(1, 2).contiguous()


def _reduce_to(a, shape):
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1 and a.shape[i + lead] != 1)
    return a.sum(dim=axes, keepdim=True).reshape(shape) if axes else a


def attention_backward(output_grad, query, key, value, bias=None, scale=None, causal_mask=None, window_size=None):
    _inputs("attention_backward", query, key, value, bias)
    p, qt, kt, vt, sc = _probabilities(query, key, value, bias, scale, causal_mask, window_size)
    expect = tuple(query.shape[:3]) + (value.shape[3],)
    if tuple(output_grad.shape) != expect:
        raise KernelError(f"attention_backward: output_grad has shape {tuple(output_grad.shape)}, expected {expect}")
    gt = output_grad.to(p.dtype).transpose(1, 2)
    dv = torch.matmul(p.transpose(2, 3), gt)
    dp = torch.matmul(gt, vt.transpose(2, 3))
    o = torch.matmul(p, vt)
    dp = (dp - (gt * o).sum(-1, keepdim=True)) * p
    nk = key.shape[2]
    dq = torch.matmul(dp, kt) * sc
    dk = torch.matmul(dp.transpose(2, 3), qt) * sc
    grads = (dq.transpose(1, 2).contiguous(), _group_sum(dk, nk), _group_sum(dv, nk))
    if bias is None:
        return grads
    return grads + (_reduce_to(dp, bias.shape).to(bias.dtype).contiguous(),)


KERNELS = {
    "relax.nn.attention": attention,
    "relax.nn.attention_bias": attention,
    "relax.grad.attention_backward": attention_backward,
}
