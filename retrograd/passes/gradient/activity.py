"""Which values carry gradients: float data, and dependence on a variable whose gradient is required."""

from __future__ import annotations

from retrograd.ir.analysis import read_vars
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype


def has_float(sinfo) -> bool:
    """True when a value of this struct info holds floating-point data (so it can carry a gradient)."""
    if isinstance(sinfo, TensorStructInfo):
        return is_float_dtype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        return any(has_float(f) for f in sinfo.fields)
    return False


def all_float(sinfo) -> bool:
    """True when every tensor in the value is floating point (what require_grads demands)."""
    if isinstance(sinfo, TensorStructInfo):
        return is_float_dtype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        return bool(sinfo.fields) and all(all_float(f) for f in sinfo.fields)
    return False


def compute_active(bindings, seeds) -> set:
    """Variables whose value depends on a seed variable and holds float data: only these get adjoints."""
    active = set(seeds)
    reads: list = []
    for b in bindings:
        if b.var in active or not has_float(b.var.struct_info):
            continue
        reads.clear()
        read_vars(b.value, reads)
        for v in reads:
            if v in active:
                active.add(b.var)
                break
    return active
