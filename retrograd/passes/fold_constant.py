"""Constant folding: evaluate pure op calls whose arguments are all constants, and inline constant bindings."""

from __future__ import annotations

import math

import numpy as np

from retrograd.ops.storage import for_storage
from retrograd.ir.block import VarBinding
from retrograd.ir.copy import substitute
from retrograd.ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    Var,
    tuple_fields_of,
)
from retrograd.ir.functor import ExprMutator
from retrograd.ir.module import IRModule
from retrograd.ir.nested import fold
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.passes.barriers import is_barrier
from retrograd.passes.infra import function_pass


def _static_numel(sinfo) -> int | None:
    if isinstance(sinfo, TensorStructInfo) and sinfo.is_static:
        return math.prod(sinfo.shape)
    return None


class _Folder(ExprMutator):
    """One forward sweep: each var bound to a constant is dropped and its uses read the constant."""

    def __init__(self, grow: bool):
        super().__init__()
        self.grow = grow

    def rewrite_binding(self, binding: VarBinding):
        value = binding.value
        if isinstance(value, If):
            return self.visit_if(value)
        # Substitution keeps each call's struct info: a folded argument never retypes its user.
        value = substitute(value, self.var_remap) if self.var_remap else value
        if isinstance(value, Call):
            value = fold_call(value, self.grow) or value
        if isinstance(value, Constant):
            self.var_remap[binding.var] = value
            return None
        return value


def fold_call(call: Call, grow: bool = False) -> Constant | None:
    """The constant a pure op call on constants evaluates to (None: not folded; see fold_constants)."""
    if any(isinstance(a, Var) for a in call.args):  # the common case, first
        return None
    op = call.op
    if isinstance(op, GlobalVar) or not getattr(op, "pure", False) or getattr(op, "kernel", None) is None:
        return None
    if is_barrier(call):  # a checkpoint marker on constants is still a recomputation boundary
        return None
    out_numel = _static_numel(call.struct_info)
    if out_numel is None:
        return None
    args = []
    largest = 1
    for a in call.args:
        value = _constant_value(a)
        if value is _NOT_CONSTANT:
            return None
        if isinstance(a, Constant):
            largest = max(largest, a.data.size)
        args.append(value)
    # Folding must not turn a small computation into large constant data (ones(shape) stays a call).
    if not grow and out_numel > largest:
        return None
    try:
        with np.errstate(all="ignore"):
            kernel = for_storage(op, call.struct_info, [a.struct_info for a in call.args])
            result = np.asarray(kernel(*args, **call.attrs))
    except Exception:  # noqa: BLE001 - a kernel refusing its input leaves the call for run time
        return None
    sinfo = call.struct_info
    if tuple(result.shape) != tuple(sinfo.shape) or str(result.dtype) != sinfo.dtype:
        return None
    result = result.copy()
    result.setflags(write=False)
    return Constant(result, sinfo, span=call.span)


_NOT_CONSTANT = object()


def _constant_value(expr):
    """The kernel-argument form of a constant expression, or _NOT_CONSTANT."""
    if isinstance(expr, Constant):
        return expr.data
    if isinstance(expr, ShapeExpr):
        if all(isinstance(v, int) for v in expr.values):
            return tuple(expr.values)
        return _NOT_CONSTANT
    if isinstance(expr, PrimValue):
        return expr.value
    if isinstance(expr, StringImm):
        return expr.value
    if isinstance(expr, Tuple):
        # Bottom-up with a stack: tuples nest to any depth.
        return fold(expr, tuple_fields_of, _constant_step)
    return _NOT_CONSTANT


def _constant_step(expr, fields):
    if not isinstance(expr, Tuple):
        return _constant_value(expr)
    return _NOT_CONSTANT if any(f is _NOT_CONSTANT for f in fields) else tuple(fields)


def fold_constants(func: Function, grow: bool = False) -> Function:
    """`func` with constant op calls evaluated and constant-bound variables replaced by their constant.

    With `grow=False` a call is folded only if its result is no larger than its largest constant input.
    """
    return _Folder(grow).visit_expr(func)


@function_pass(name="fold-constant")
class FoldConstant:
    """Evaluate pure op calls on constants at compile time and inline constant bindings."""

    grow: bool = False

    def transform_function(self, func: Function, mod: IRModule, ctx) -> Function:
        return fold_constants(func, self.grow)

__all__ = ["FoldConstant", "fold_call", "fold_constants"]
