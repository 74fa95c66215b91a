"""Inputs for lowering tests: random arrays for a function's parameters, made from their struct info alone."""

from __future__ import annotations

import numpy as np

from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo


def make_inputs(func, rng, size=3):
    """One value per parameter; every symbolic dim (and every unknown one) gets `size`."""
    dims: dict = {}

    def dim(d):
        if isinstance(d, int):
            return d
        return dims.setdefault(d, size) if isinstance(d, str) and d.isidentifier() else None

    def make(s):
        if isinstance(s, TupleStructInfo):
            return tuple(make(f) for f in s.fields)
        if isinstance(s, ShapeStructInfo):
            n = s.ndim if s.ndim is not None and s.ndim >= 0 else 2
            vals = s.values if s.values is not None else [size] * n
            return tuple(dim(d) or size for d in vals)
        if isinstance(s, PrimStructInfo):
            return 2 if str(s.dtype).startswith(("int", "uint")) else 0.5
        if not isinstance(s, TensorStructInfo):
            return None
        if s.shape is not None:
            shape = [dim(d) for d in s.shape]
            if any(d is None for d in shape):
                return None
        else:
            shape = [size] * (s.ndim if s.ndim is not None and s.ndim >= 0 else 2)
        dtype = s.dtype or "float32"
        if dtype == "bool":
            return rng.random(shape) < 0.5
        if dtype.startswith(("int", "uint")):
            return rng.integers(0, 2, size=shape).astype(dtype)
        return (rng.standard_normal(shape) + 0.1).astype(dtype)

    return [make(p.struct_info) for p in func.params]
