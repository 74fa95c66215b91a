"""Dropout: a seeded, reproducible keep-mask in training; the identity (and an all-ones mask) in inference."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import check_float

_BITS = 2**32


def dropout(data, key=None, *, rate=0.5, training=False, seed=0):
    """(result, mask): result = data * mask / (1 - rate) in training (all zeros at rate 1), each element
    kept (mask 1) with probability 1 - rate; a copy of the data and ones in inference (TVM's legalization).

    Without `key` the mask is drawn from PCG64(seed): one float64 uniform u per element, kept where
    u >= rate; the same mask at every call. With `key` (a 0-d integer array, taken modulo 2**64) it
    comes from PCG64(SeedSequence([seed, key])): one 32-bit draw b per element (two per PCG64 output,
    low half first), kept where b >= ceil(rate * 2**32). That costs half the generator's work of
    float64 uniforms and is finer than float32 ones (24 bits): the keep probability is 1 - rate
    rounded down to a multiple of 2**-32, exact for rates such as 0.5 or 0.25.
    """
    x = np.asarray(data, order="C")  # a 0-d input stays 0-d
    check_float("dropout", "data", x)
    if key is not None:
        key = _key_entropy(key)
    if not training:
        return np.array(x, copy=True), np.ones(x.shape, x.dtype)
    if key is None:
        draws = np.random.Generator(np.random.PCG64(seed)).random(x.shape, dtype=np.float64)
        mask = np.asarray(draws >= rate).astype(x.dtype)
    else:
        mask = _keyed_keep(x.shape, rate, seed, key).astype(x.dtype)
    keep = 1.0 - rate
    scale = x.dtype.type(1.0 / keep if keep > 0 else 0.0)
    out = np.asarray(np.multiply(x, mask))  # 0-d: a scalar made an array again
    out *= scale
    return out, mask


def _key_entropy(key) -> int:
    k = np.asarray(key)
    if k.ndim != 0 or k.dtype.kind not in "iu":
        raise KernelError(f"dropout: key must be a 0-d integer array, got {k.dtype} of shape {k.shape}")
    return int(k) % 2**64


def _keyed_keep(shape: tuple, rate: float, seed: int, key: int) -> np.ndarray:
    """Booleans, True with probability 1 - rate (rounded to 2**-32), from PCG64(SeedSequence([seed, key]))."""
    n = math.prod(shape)
    threshold = math.ceil(rate * _BITS)  # exact: rate * 2**32 is a float64 product by a power of two
    if threshold >= _BITS:
        return np.zeros(shape, bool)
    raw = np.random.PCG64(np.random.SeedSequence([seed, key])).random_raw((n + 1) // 2)
    bits = raw.astype("<u8", copy=False).view("<u4")[:n]  # the same halves on every byte order
    return (bits >= np.uint32(threshold)).reshape(shape)
