"""Running a module's function on random inputs and reading the executor's measured peak."""

from __future__ import annotations

import numpy as np

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.ir import Function, If
from retrograd.ir.struct_info import (
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    is_float_dtype,
)
from retrograd.passes import Gradient


def argument(sinfo, rng, flag: bool):
    """A value for a parameter: random tensors (ints in [0, 2): valid indices), `flag` for bool scalars."""
    if isinstance(sinfo, TensorStructInfo):
        shape = tuple(sinfo.shape)
        if sinfo.dtype == "bool":
            return np.array(flag) if shape == () else rng.random(shape) < 0.5
        if is_float_dtype(sinfo.dtype):
            return rng.uniform(0.5, 1.5, shape).astype(sinfo.dtype)
        return rng.integers(0, 2, shape).astype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(argument(f, rng, flag) for f in sinfo.fields)
    if isinstance(sinfo, ShapeStructInfo):
        return tuple(sinfo.values) if sinfo.values is not None else (1,) * max(sinfo.ndim, 0)
    if isinstance(sinfo, PrimStructInfo):
        return 1 if sinfo.value is None else sinfo.value
    assert isinstance(sinfo, ObjectStructInfo), sinfo
    return "object"


def measured_peaks(mod, name: str, seed: int = 0, given=()) -> list[int]:
    """The measured peak for each value of the bool scalar parameters (all True, all False); the first
    parameters take the `given` values."""
    ex = retrograd.build(mod)
    func = mod[name]
    flags = (True, False) if any(_has_bool_scalar(p.struct_info) for p in func.params) else (True,)
    out = []
    for flag in flags:
        rng = np.random.default_rng(seed)
        rest = [argument(p.struct_info, rng, flag) for p in func.params[len(given) :]]
        ex[name](*[a.copy() for a in given], *rest)
        out.append(ex.stats.peak_live_bytes)
    return out


def _has_bool_scalar(sinfo) -> bool:
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.dtype == "bool" and sinfo.shape == ()
    if isinstance(sinfo, TupleStructInfo):
        return any(_has_bool_scalar(f) for f in sinfo.fields)
    return False


def is_static(mod) -> bool:
    """Every parameter and binding of every function has static shapes (what the model needs)."""
    for _, f in mod.items():
        if not isinstance(f, Function):
            continue
        if not all(_static(p.struct_info) for p in f.params):
            return False
        stack = [f.body]
        while stack:
            seq = stack.pop()
            for block in seq.blocks:
                for b in block.bindings:
                    if not _static(b.var.struct_info):
                        return False
                    if isinstance(b.value, If):
                        stack += [b.value.true_branch, b.value.false_branch]
    return True


def _static(sinfo) -> bool:
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.is_static and bool(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        return all(_static(f) for f in sinfo.fields)
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.values is not None or sinfo.ndim >= 0
    return True


def adjoint(mod, name: str):
    """The module with `<name>_adjoint` added (a cotangent parameter for a non-scalar result), or None
    where Gradient does not apply."""
    for options in ({}, {"target_index": None, "seeds": "param"}):
        try:
            return Gradient(name, **options)(mod)
        except DiagnosticError:
            continue
    return None
