"""Which values carry gradients: float data, and dependence on a variable whose gradient is required."""

from __future__ import annotations

from retrograd.ir.expr import LEAF_CLASSES, Call
from retrograd.ir.vars import read_vars
from retrograd.ir.nested import fold, preorder
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype, tuple_fields


def has_float(sinfo, memo: dict | None = None) -> bool:
    """True when a value of this struct info holds floating-point data (so it can carry a gradient).
    `memo`: answers for tuples by id, for a caller asking of many struct infos sharing nested ones."""
    if isinstance(sinfo, TensorStructInfo):
        return is_float_dtype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        # Bottom-up with a stack: tuples nest to any depth.
        return fold(sinfo, tuple_fields, _has_float_step, memo=memo)
    return False


def _has_float_step(sinfo, fields) -> bool:
    if isinstance(sinfo, TupleStructInfo):
        return any(fields)
    return isinstance(sinfo, TensorStructInfo) and is_float_dtype(sinfo.dtype)


def all_float(sinfo) -> bool:
    """True when every tensor in the value is floating point (what require_grads demands)."""
    if isinstance(sinfo, TensorStructInfo):
        return is_float_dtype(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        # Every leaf a float tensor, and no tuple empty.
        return all(
            bool(s.fields) if isinstance(s, TupleStructInfo) else isinstance(s, TensorStructInfo) and is_float_dtype(s.dtype)
            for s in preorder(sinfo, tuple_fields)
        )
    return False


def compute_active(bindings, seeds) -> set:
    """Variables whose value depends on a seed variable and holds float data: only these get adjoints."""
    active = set(seeds)
    reads: list = []
    memo: dict = {}
    floats: dict = {}  # id(struct info) -> has_float: copies share their struct infos (alive while the vars are)
    for b in bindings:
        var = b.var
        if var in active:
            continue
        sinfo = var.struct_info
        is_float = floats.get(id(sinfo))
        if is_float is None:
            is_float = floats[id(sinfo)] = has_float(sinfo, memo)
        if not is_float:
            continue
        value = b.value
        if value.__class__ is Call:
            args = value.args
            if not active.isdisjoint(args):  # reads an active var argument
                active.add(var)
                continue
            if LEAF_CLASSES.issuperset(map(type, args)):  # reads nothing but its arguments
                continue
        reads.clear()
        read_vars(value, reads)
        for v in reads:
            if v in active:
                active.add(var)
                break
    return active
