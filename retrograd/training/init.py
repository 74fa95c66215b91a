"""Parameter initialisers: zeros, Xavier (Glorot) and He (Kaiming) uniform and normal, seeded."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import TrainingError

METHODS = ("zeros", "xavier_uniform", "xavier_normal", "he_uniform", "he_normal")


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out). 2-D weights are (in, out), as `matmul(x, w)` reads them; 3-D and up are
    convolution kernels (out, in, *window) as conv2d's OIHW."""
    if len(shape) == 2:
        return shape[0], shape[1]
    window = math.prod(shape[2:])
    return shape[1] * window, shape[0] * window


def initial_value(method: str, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """One parameter's initial value. Parameters with fewer than two dimensions larger than 1 (biases, as
    (C,) or (1, C, 1, 1), and scalars) start at zero; pass an override for a weight of such a shape."""
    if method not in METHODS:
        raise TrainingError(f"unknown initialisation {method!r} (methods: {', '.join(METHODS)})")
    if method == "zeros" or sum(d > 1 for d in shape) < 2:
        return np.zeros(shape, dtype)
    fan_in, fan_out = fans(shape)
    if method.startswith("xavier"):
        std = math.sqrt(2.0 / (fan_in + fan_out))
    else:  # He et al. for ReLU: gain sqrt(2) over fan_in
        std = math.sqrt(2.0 / fan_in)
    if method.endswith("uniform"):
        bound = math.sqrt(3.0) * std
        return rng.uniform(-bound, bound, size=shape).astype(dtype)
    return (rng.standard_normal(size=shape) * std).astype(dtype)
