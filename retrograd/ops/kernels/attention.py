"""Scaled dot-product attention in TVM's (batch, seq, heads, head_dim) layout, forward and fused backward."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import check_float


def _inputs(op, query, key, value, bias):
    q, k, v = (np.asarray(a) for a in (query, key, value))
    for name, a in (("query", q), ("key", k), ("value", v)):
        check_float(op, name, a)
        if a.ndim != 4:
            raise KernelError(f"{op}: {name} must be 4-D (batch, seq, heads, head_dim), got shape {a.shape}")
    b, s, n, h = q.shape
    if k.shape[0] != b or v.shape[0] != b or k.shape[1] != v.shape[1] or k.shape[3] != h or k.shape[2] != v.shape[2]:
        raise KernelError(f"{op}: incompatible query {q.shape}, key {k.shape}, value {v.shape}")
    if n % k.shape[2] if k.shape[2] else n:  # zero key heads only for zero query heads
        raise KernelError(f"{op}: {n} query heads are not a multiple of {k.shape[2]} key/value heads")
    if bias is not None:
        bias = np.asarray(bias)
        try:
            np.broadcast_shapes(bias.shape, (b, n, s, k.shape[1]))
        except ValueError:
            raise KernelError(f"{op}: bias {bias.shape} does not broadcast to {(b, n, s, k.shape[1])}") from None
    return q, k, v, bias


def _heads_first(a, groups):
    """(B, S, Nk, H) -> (B, Nk * groups, S, H): each key/value head serves `groups` query heads."""
    t = a.transpose(0, 2, 1, 3)
    return np.repeat(t, groups, axis=1) if groups > 1 else t


def keep_mask(s, skv, causal_mask):
    """Positions (i, j) that causal masking keeps, or None. TVM's offsets: TopLeft keeps j <= i,
    BottomRight keeps j <= i + |S - S_kv| (TVM takes the absolute difference)."""
    if causal_mask is None:
        return None
    if causal_mask == "TopLeft":
        offset = 0
    elif causal_mask == "BottomRight":
        offset = abs(s - skv)
    else:
        raise KernelError(f"attention: causal_mask must be None, 'TopLeft' or 'BottomRight', got {causal_mask!r}")
    return np.arange(skv)[None, :] <= np.arange(s)[:, None] + offset


def _probabilities(q, k, v, bias, scale, causal_mask, window_size):
    """(P, Q, K, V, scale): the softmax probabilities (B, N, S, S_kv) and heads-first operands."""
    if window_size is not None:
        raise KernelError("attention: window_size (sliding-window attention) is not supported")
    b, s, n, h = q.shape
    groups = n // k.shape[2] if k.shape[2] else 1  # zero heads on both sides: nothing to group
    qt = q.transpose(0, 2, 1, 3)
    kt, vt = _heads_first(k, groups), _heads_first(v, groups)
    dtype = np.result_type(q, k, v)
    sc = dtype.type((1.0 / math.sqrt(h) if h else math.inf) if scale is None else scale)  # h = 0: 0 * inf is NaN, as TVM
    p = np.matmul(qt, kt.transpose(0, 1, 3, 2))
    p *= sc
    if bias is not None:
        p += bias.astype(dtype, copy=False)
    keep = keep_mask(s, k.shape[1], causal_mask)
    if keep is not None:
        p = np.where(keep, p, dtype.type(-np.inf))
    p -= p.max(axis=-1, keepdims=True, initial=-np.inf)  # an empty key sequence has no maximum
    np.exp(p, out=p)
    p *= np.reciprocal(p.sum(axis=-1, keepdims=True))
    return p, qt, kt, vt, sc


def attention(query, key, value, bias=None, *, scale=None, causal_mask=None, window_size=None):
    """softmax(Q K^T * scale + bias, masked) V per head; scale defaults to 1 / sqrt(head_dim).
    Fewer key/value heads than query heads (grouped-query attention) share each one by blocks."""
    q, k, v, bias = _inputs("attention", query, key, value, bias)
    p, _, _, vt, _ = _probabilities(q, k, v, bias, scale, causal_mask, window_size)
    return np.ascontiguousarray(np.matmul(p, vt).transpose(0, 2, 1, 3))


def _group_sum(a, nk):
    """(B, N, S, H) gradients of repeated key/value heads summed back to (B, S, Nk, H)."""
    b, n, s, h = a.shape
    return np.ascontiguousarray(a.reshape(b, nk, n // nk if nk else 0, s, h).sum(axis=2).transpose(0, 2, 1, 3))


def attention_backward(output_grad, query, key, value, bias=None, *, scale=None, causal_mask=None, window_size=None):
    """(d query, d key, d value[, d bias]) of attention for the cotangent output_grad, from recomputed
    probabilities: dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K scale, dK = dS^T Q scale."""
    q, k, v, bias = _inputs("attention_backward", query, key, value, bias)
    p, qt, kt, vt, sc = _probabilities(q, k, v, bias, scale, causal_mask, window_size)
    go = np.asarray(output_grad)
    expect = q.shape[:3] + (v.shape[3],)
    if go.shape != expect:
        raise KernelError(f"attention_backward: output_grad has shape {go.shape}, expected {expect}")
    gt = go.astype(p.dtype, copy=False).transpose(0, 2, 1, 3)
    dv = np.matmul(p.transpose(0, 1, 3, 2), gt)
    dp = np.matmul(gt, vt.transpose(0, 1, 3, 2))
    # rowsum(dP * P) = rowsum(dO * O) with O = P V: the cheaper of the two.
    o = np.matmul(p, vt)
    dp -= np.einsum("bnsh,bnsh->bns", gt, o)[..., None]
    dp *= p
    nk = k.shape[2]
    dq = np.matmul(dp, kt) * sc
    dk = np.matmul(dp.transpose(0, 1, 3, 2), qt) * sc
    grads = (np.ascontiguousarray(dq.transpose(0, 2, 1, 3)), _group_sum(dk, nk), _group_sum(dv, nk))
    if bias is None:
        return grads
    return grads + (_reduce_to(dp, bias.shape).astype(bias.dtype, copy=False),)


def _reduce_to(a, shape):
    """a summed over the axes where `shape` broadcast (size 1 or missing)."""
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1 and a.shape[i + lead] != 1)
    return a.sum(axis=axes, keepdims=True).reshape(shape) if axes else a
