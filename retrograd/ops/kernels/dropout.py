"""Dropout: a seeded, reproducible keep-mask in training; the identity (and an all-ones mask) in inference."""

from __future__ import annotations

import numpy as np

from retrograd.ops.kernels.window import check_float


def dropout(data, *, rate=0.5, training=False, seed=0):
    """(result, mask). Training: mask[i] = 1 where a uniform draw in [0, 1) from NumPy's PCG64 seeded
    with `seed` is >= rate (each element is kept with probability 1 - rate), result = data * mask /
    (1 - rate) (all zeros at rate 1). The same seed and shape give the same mask on every run.
    Inference (TVM's legalization): a copy of the data and ones."""
    x = np.asarray(data, order="C")  # a 0-d input stays 0-d
    check_float("dropout", "data", x)
    if not training:
        return np.array(x, copy=True), np.ones(x.shape, x.dtype)
    draws = np.random.Generator(np.random.PCG64(seed)).random(x.shape, dtype=np.float64)
    mask = np.asarray(draws >= rate).astype(x.dtype)
    keep = 1.0 - rate
    scale = x.dtype.type(1.0 / keep if keep > 0 else 0.0)
    return np.asarray(x * mask * scale), mask
