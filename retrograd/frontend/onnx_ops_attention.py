"""ONNX Attention (opset 23+): scaled dot-product attention with masks, causal masking, KV cache,
grouped heads and softcap, composed from retrograd's matmul / softmax (their gradients apply)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import converter, dtype_of, ndim_of, reshape, scalar
from retrograd.frontend.onnx_ops_shape import static_shape
from retrograd.ir.expr import Tuple
from retrograd.ops.api import R


def _heads(g, x, n):
    """(B, S, n * D) -> (B, n, S, D)."""
    b, s, hidden = static_shape(x)
    return g.emit(R.permute_dims(g.emit(reshape(x, (b, s, n, hidden // n))), axes=(0, 2, 1, 3)))


@converter("Attention")
def _attention(g, node, inputs, attrs):
    inputs = list(inputs) + [None] * (7 - len(inputs))
    q, k, v, mask, past_k, past_v, nonpad = inputs[:7]
    if nonpad is not None:
        raise UnsupportedError("Attention's nonpad_kv_seqlen input is not supported")
    three_d = ndim_of(q) == 3
    if three_d:
        qh, kvh = int(attrs["q_num_heads"]), int(attrs["kv_num_heads"])
        q, k, v = _heads(g, q, qh), _heads(g, k, kvh), _heads(g, v, kvh)
    qh, kvh = static_shape(q)[1], static_shape(k)[1]
    if past_k is not None:
        k = g.emit(R.concat(Tuple((past_k, k)), axis=2))
    if past_v is not None:
        v = g.emit(R.concat(Tuple((past_v, v)), axis=2))
    present_k, present_v = k, v
    if qh != kvh:
        k = g.emit(R.repeat(k, repeats=qh // kvh, axis=1))
        v = g.emit(R.repeat(v, repeats=qh // kvh, axis=1))
    d = static_shape(q)[-1]
    scale = float(attrs.get("scale", 1.0 / math.sqrt(d)))
    kt = g.emit(R.permute_dims(k, axes=(0, 1, 3, 2)))
    scores = g.emit(R.multiply(g.emit(R.matmul(q, kt)), scalar(g, scale, q)))
    qk_out = scores
    s_q, s_kv = static_shape(q)[2], static_shape(k)[2]
    bias = None
    if mask is not None:
        if dtype_of(mask) == "bool":
            bias = g.emit(R.where(mask, scalar(g, 0.0, q), scalar(g, -np.inf, q)))
        else:
            bias = mask
        bias_shape = static_shape(bias)
        if bias_shape[-1] < s_kv:  # a mask shorter than the keys (past + new) pads with -inf
            pad = g.const(np.full(bias_shape[:-1] + (s_kv - bias_shape[-1],), -np.inf, dtype=dtype_of(q)))
            bias = g.emit(R.concat(Tuple((g.emit(R.astype(bias, dtype=dtype_of(q))), pad)), axis=-1))
    if attrs.get("is_causal", 0):
        past = s_kv - s_q
        causal = np.where(np.tril(np.ones((s_q, s_kv), dtype=bool), k=past), 0.0, -np.inf).astype(dtype_of(q))
        bias = g.const(causal) if bias is None else g.emit(R.add(bias, g.const(causal)))
    if bias is not None:
        scores = g.emit(R.add(scores, bias))
    masked = scores
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:
        scores = g.emit(R.multiply(g.emit(R.tanh(g.emit(R.divide(scores, scalar(g, softcap, q))))), scalar(g, softcap, q)))
    capped = scores
    probs = g.emit(R.nn.softmax(scores, axis=-1))
    y = g.emit(R.matmul(probs, v))
    if three_d:
        b, h, s, dv = static_shape(y)
        y = g.emit(reshape(g.emit(R.permute_dims(y, axes=(0, 2, 1, 3))), (b, s, h * dv)))
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    qk = {0: qk_out, 1: masked, 2: capped, 3: probs}[mode]
    return [y, present_k, present_v, qk]
