"""Shared by the nn op tests: adjoints of scripted functions through the Gradient pass and the executor."""

from __future__ import annotations

import numpy as np

import retrograd
from retrograd.passes.gradient import Gradient
from retrograd.runtime.executor import build


def script_grads(text: str, arrays: list, require: list[str]):
    """(value, gradients of the named parameters) of `main(params..., c) = sum(f(params) * c)`, where the
    text defines `main` over the arrays and the cotangent `c` is its last parameter."""
    mod = Gradient("main", require_grads=require)(retrograd.parse(text))
    value, grads = build(mod)["main_adjoint"](*arrays)
    return value, [np.asarray(g) for g in (grads if isinstance(grads, tuple | list) else [grads])]


def tensor_type(a: np.ndarray) -> str:
    return f'R.Tensor({tuple(a.shape)}, "{a.dtype}")'
