"""ONNX Attention (opset 23+): scaled dot-product attention with masks, causal and sliding-window
masking, KV cache (past or per-batch non-padded lengths), grouped heads, softcap and softmax
precision, composed from retrograd's matmul / softmax (their gradients apply), in the order of
ONNX's reference: softcap before the mask, causal masks offset by the cache, a fully masked row
gives zero probabilities (not NaN)."""

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


def _additive(g, mask, dt):
    """A boolean mask (True: attend) as 0 / -inf; a float mask as is."""
    if dtype_of(mask) == "bool":
        return g.emit(R.where(mask, g.const(0.0, dt), g.const(-np.inf, dt)))
    return mask if dtype_of(mask) == dt else g.emit(R.astype(mask, dtype=dt))


def _frontier(g, s_q, s_kv, offset, dt, attrs, causal: bool):
    """The causal / sliding-window bias: query i (absolute position i + offset) sees key j iff
    j <= i + offset (causal) and within the window. offset: an int, or a (B,) tensor (per batch)."""
    i = np.arange(s_q).reshape(s_q, 1)
    j = np.arange(s_kv).reshape(1, s_kv)
    left, right = int(attrs.get("left_window_size", -1)), int(attrs.get("right_window_size", -1))
    if isinstance(offset, int):
        diff = i + offset - j
        allowed = np.ones((s_q, s_kv), bool)
        if causal:
            allowed &= diff >= 0
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
        return g.const(np.where(allowed, 0.0, -np.inf).astype(dt))
    off = g.emit(reshape(g.emit(R.astype(offset, dtype="int64")), (-1, 1, 1, 1)))
    diff = g.emit(R.subtract(g.emit(R.add(off, g.const(i.reshape(1, 1, s_q, 1).astype(np.int64)))), g.const(j.reshape(1, 1, 1, s_kv).astype(np.int64))))
    zero = g.const(0, "int64")
    allowed = None
    tests = [(causal, R.greater_equal(diff, zero)), (left >= 0, R.less_equal(diff, g.const(left, "int64"))),
             (right >= 0, R.greater_equal(diff, g.const(-right, "int64")))]
    for on, test in tests:
        if on:
            t = g.emit(test)
            allowed = t if allowed is None else g.emit(R.logical_and(allowed, t))
    return g.emit(R.where(allowed, g.const(0.0, dt), g.const(-np.inf, dt)))


@converter("Attention")
def _attention(g, node, inputs, attrs):
    inputs = list(inputs) + [None] * (7 - len(inputs))
    q, k, v, mask, past_k, past_v, nonpad = inputs[:7]
    dt = dtype_of(q)
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
    s_q, s_kv = static_shape(q)[2], static_shape(k)[2]
    # ONNX scales Q and K each by sqrt(scale), in the input dtype
    root = scalar(g, math.sqrt(float(attrs.get("scale", 1.0 / math.sqrt(static_shape(q)[-1])))), q)
    kt = g.emit(R.permute_dims(g.emit(R.multiply(k, root)), axes=(0, 1, 3, 2)))
    qk = g.emit(R.matmul(g.emit(R.multiply(q, root)), kt))
    softcap = float(attrs.get("softcap", 0.0))
    if softcap > 0:  # before the mask: masked scores stay -inf
        qk = g.emit(R.multiply(g.emit(R.tanh(g.emit(R.divide(qk, scalar(g, softcap, q))))), scalar(g, softcap, q)))
    bias = None
    if mask is not None:
        bias = _additive(g, mask, dt)
        short = s_kv - static_shape(bias)[-1]
        if short > 0:  # a mask shorter than the keys (past + new) masks the rest
            pad = g.const(np.full(static_shape(bias)[:-1] + (short,), -np.inf, dtype=dt))
            bias = g.emit(R.concat(Tuple((bias, pad)), axis=-1))
    causal = bool(attrs.get("is_causal", 0))
    windowed = int(attrs.get("left_window_size", -1)) >= 0 or int(attrs.get("right_window_size", -1)) >= 0
    if causal or windowed:
        if past_k is not None:
            offset = static_shape(past_k)[2]
        elif nonpad is not None:  # an external cache: the frontier per batch
            offset = g.emit(R.subtract(nonpad, g.const(s_q, dtype_of(nonpad))))
        else:
            offset = 0
        front = _frontier(g, s_q, s_kv, offset, dt, attrs, causal)
        bias = front if bias is None else g.emit(R.add(bias, front))
    if nonpad is not None:
        keep = g.emit(R.less(g.const(np.arange(s_kv).reshape(1, 1, 1, s_kv)), g.emit(reshape(g.emit(R.astype(nonpad, dtype="int64")), (-1, 1, 1, 1)))))
        pad_bias = g.emit(R.where(keep, g.const(0.0, dt), g.const(-np.inf, dt)))
        bias = pad_bias if bias is None else g.emit(R.add(bias, pad_bias))
    scores = qk if bias is None else g.emit(R.add(qk, bias))
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        raise UnsupportedError(f"Attention qk_matmul_output_mode={mode} is not supported")
    full_rows = None
    if bias is not None:  # rows with no attendable key: probabilities 0, decided on the bias
        full_rows = g.emit(R.equal(g.emit(R.max(bias, axis=(-1,), keepdims=True)), g.const(-np.inf, dt)))
        scores = g.emit(R.where(full_rows, g.const(0.0, dt), scores))
    precision = attrs.get("softmax_precision")
    sm_in = scores
    if precision is not None:
        from retrograd.frontend.onnx_import import np_dtype

        sm_in = g.emit(R.astype(scores, dtype=np_dtype(int(precision))))
    probs = g.emit(R.nn.softmax(sm_in, axis=-1))
    if full_rows is not None:
        probs = g.emit(R.where(full_rows, g.const(0.0, dtype_of(probs)), probs))
    if dtype_of(probs) != dt:
        probs = g.emit(R.astype(probs, dtype=dt))
    y = g.emit(R.matmul(probs, v))
    if three_d:
        b, h, s, dv = static_shape(y)
        y = g.emit(reshape(g.emit(R.permute_dims(y, axes=(0, 2, 1, 3))), (b, s, h * dv)))
    qk_out = {0: qk, 1: qk, 2: g.emit(R.add(qk, bias)) if bias is not None else qk, 3: probs}[mode]
    return [y, present_k, present_v, qk_out]
