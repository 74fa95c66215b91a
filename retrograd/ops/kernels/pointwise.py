"""Pointwise activations: gelu_tanh, leaky_relu, prelu, selu, softplus (TVM's definitions)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import check_float

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
GELU_TANH_C = math.sqrt(2.0 / math.pi)
GELU_TANH_A = 0.044715


def _float(op, x):
    # C order in, so every elementwise result comes out in C order (retrograd.analysis relies on it);
    # np.asarray keeps a 0-d input 0-d (np.ascontiguousarray would make it 1-d).
    x = np.asarray(x, order="C")
    check_float(op, "data", x)
    return x


def gelu_tanh(data):
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = _float("gelu_tanh", data)
    t = np.tanh(x * (x.dtype.type(GELU_TANH_C) * (1 + x.dtype.type(GELU_TANH_A) * x * x)))
    return np.asarray((x * x.dtype.type(0.5)) * (1 + t))


def leakyrelu(data, *, alpha=0.01):
    """x where x > 0, else alpha * x."""
    x = _float("leakyrelu", data)
    return np.where(x > 0, x, x * x.dtype.type(alpha))


def prelu_alpha(op, x, alpha, axis):
    """alpha (C,) or (1,) reshaped to broadcast along `axis` of x."""
    a = np.asarray(alpha)
    check_float(op, "alpha", a)
    if not -x.ndim <= axis < x.ndim:
        raise KernelError(f"{op}: axis {axis} out of range for an array of {x.ndim} dimensions")
    c = x.shape[axis]
    if a.ndim != 1 or a.shape[0] not in (c, 1):
        raise KernelError(f"{op}: alpha must have shape ({c},) or (1,), got {a.shape}")
    shape = [1] * x.ndim
    shape[axis] = a.shape[0]
    return a.reshape(shape).astype(x.dtype, copy=False)


def prelu(data, alpha, *, axis=1):
    """x where x > 0, else alpha[c] * x with c the index along `axis`."""
    x = _float("prelu", data)
    return np.where(x > 0, x, x * prelu_alpha("prelu", x, alpha, axis))


def selu(data):
    """scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))."""
    x = _float("selu", data)
    neg = np.expm1(np.minimum(x, 0)) * x.dtype.type(SELU_ALPHA)
    return np.asarray(np.where(x > 0, x, neg) * x.dtype.type(SELU_SCALE))


def softplus(data, *, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as TVM and PyTorch)."""
    x = _float("softplus", data)
    bx = x * x.dtype.type(beta)
    soft = np.logaddexp(x.dtype.type(0), bx) / x.dtype.type(beta)
    return np.asarray(np.where(bx > threshold, x, soft), dtype=x.dtype)
