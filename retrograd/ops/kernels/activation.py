"""Activations and soft-max family: softmax, log_softmax, cross_entropy_with_logits, gelu, silu (and derivatives)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.special import erfc
from retrograd.ops.kernels.window import check_float, plane_chunk_size, plane_chunks

_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _float(op, x):
    # C order in, C order out: results' layout must not depend on the input's (retrograd.analysis).
    x = np.asarray(x, order="C")
    check_float(op, "data", x)
    return x


def _axis(op, x, axis):
    if not isinstance(axis, (int, np.integer)) or not -max(x.ndim, 1) <= axis < max(x.ndim, 1) or x.ndim == 0:
        raise KernelError(f"{op}: axis {axis!r} out of range for an array of {x.ndim} dimensions")
    return int(axis)


def _softmax_family(op, x, axis, finish):
    """out = finish(x - max(x), scratch) along `axis`, on ~1 MB chunks of the other axes so the four
    passes over each chunk stay in cache. `finish` works in place on the shifted chunk."""
    x = _float(op, x)
    axis = _axis(op, x, axis) % x.ndim
    if x.size == 0:
        return np.empty_like(x)
    pre, n = math.prod(x.shape[:axis]), x.shape[axis]
    x3 = x.reshape(pre, n, math.prod(x.shape[axis + 1 :]))
    out = np.empty(x3.shape, x.dtype)
    size = max(1, min(pre, plane_chunk_size(n * x3.shape[2] * x.itemsize)))
    scratch = np.empty((size,) + x3.shape[1:], x.dtype)
    for sl in plane_chunks(pre, scratch.shape[0]):
        o = out[sl]
        np.subtract(x3[sl], x3[sl].max(axis=1, keepdims=True), out=o)
        finish(o, scratch[: sl.stop - sl.start])
    return out.reshape(x.shape)


def _softmax_finish(s, scratch):
    np.exp(s, out=s)
    # One reciprocal per row and a multiply: cheaper than dividing every element.
    s *= np.reciprocal(s.sum(axis=1, keepdims=True))


def _log_softmax_finish(s, scratch):
    np.exp(s, out=scratch)
    s -= np.log(scratch.sum(axis=1, keepdims=True))


def softmax(x, *, axis=-1):
    """exp(x) / sum(exp(x)) along axis, computed on x - max(x)."""
    return _softmax_family("softmax", x, axis, _softmax_finish)


def log_softmax(x, *, axis=-1):
    """x - logsumexp(x) along axis, computed on x - max(x)."""
    return _softmax_family("log_softmax", x, axis, _log_softmax_finish)


def cross_entropy_with_logits(predictions, labels):
    """TVM Relax's definition: -sum(predictions * labels), divided by the batch size N = shape[0] when
    ndim >= 2 (predictions are taken as they are: no log_softmax is applied)."""
    op = "cross_entropy_with_logits"
    p = _float(op, predictions)
    y = np.asarray(labels)
    if p.shape != y.shape:
        raise KernelError(f"{op}: predictions {p.shape} and labels {y.shape} must have the same shape")
    total = -np.vdot(p, y.astype(p.dtype, copy=False)) if p.size else p.dtype.type(0)
    if p.ndim >= 2:
        total = total / p.dtype.type(p.shape[0])
    return np.asarray(total, dtype=p.dtype)


def gelu(x):
    """x * Phi(x) with the exact normal CDF Phi(x) = erfc(-x / sqrt(2)) / 2 (accurate in both tails)."""
    x = _float("gelu", x)
    x64 = x.astype(np.float64, copy=False)
    return (0.5 * x64 * erfc(-x64 * _INV_SQRT2)).astype(x.dtype, copy=False)


def gelu_derivative(x):
    """d gelu / dx = Phi(x) + x * phi(x), in closed form."""
    x = _float("gelu_derivative", x)
    x64 = x.astype(np.float64, copy=False)
    pdf = np.exp(-0.5 * x64 * x64) * _INV_SQRT_2PI
    return (0.5 * erfc(-x64 * _INV_SQRT2) + x64 * pdf).astype(x.dtype, copy=False)


def _sigmoid(x):
    # exp of -|x| never overflows; the two branches are the same function.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def silu(x):
    """x * sigmoid(x)."""
    x = _float("silu", x)
    return (x * _sigmoid(x)).astype(x.dtype, copy=False)


def silu_derivative(x):
    """d silu / dx = sigmoid(x) * (1 + x * (1 - sigmoid(x)))."""
    x = _float("silu_derivative", x)
    s = _sigmoid(x)
    return (s * (1 + x * (1 - s))).astype(x.dtype, copy=False)
