"""Kernels on storage-only dtypes (bfloat16, float8): compute in float32, round the result to storage.

This is what TVM's CPU legalization does for these dtypes: every op reads its bfloat16/float8
operands as float32, computes in float32 and rounds its result to the storage dtype
(round-to-nearest-even, as ml_dtypes casts). One wrapping, applied where a kernel is bound to a
call, covers every op of the registry and the ops the gradient emits.
"""

from __future__ import annotations

import sys

import numpy as np

from retrograd.ir.dtypes import is_extension, require_extension
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, PrimStructInfo

_COMPUTE = np.float32


def _dtypes(sinfo, out: list) -> list:
    stack = [sinfo]
    while stack:
        s = stack.pop()
        if isinstance(s, TupleStructInfo):
            stack.extend(s.fields)
        elif isinstance(s, TensorStructInfo | PrimStructInfo) and s.dtype:
            out.append(s.dtype)
    return out


# Ops whose kernels only move, view or relabel data: they run on the storage dtype itself, so that
# their results stay the views (or the very arguments) the memory model says they are.
MOVES_DATA = frozenset({
    "relax.reshape", "relax.permute_dims", "relax.expand_dims", "relax.flatten", "relax.squeeze",
    "relax.strided_slice", "relax.split", "relax.broadcast_to", "relax.match_cast", "relax.grad.no_grad",
    "relax.grad.start_checkpoint", "relax.grad.end_checkpoint",
})


def storage_dtype(out_sinfo, arg_sinfos) -> str | None:
    """The first extension dtype among a call's result and arguments, or None."""
    found: list = []
    for s in (out_sinfo, *arg_sinfos):
        _dtypes(s, found)
    return next((d for d in found if is_extension(d)), None)


def in_storage(op, out_sinfo, arg_sinfos) -> str | None:
    """The storage dtype whose call of `op` computes in float32 (None: the kernel runs as it is)."""
    if getattr(op, "name", None) in MOVES_DATA:
        return None
    return storage_dtype(out_sinfo, arg_sinfos)


def for_storage(op, out_sinfo, arg_sinfos, kernel=None):
    """`kernel` (default `op.kernel`), or when the call involves a storage dtype, a kernel computing it in
    float32 on widened operands whose results are rounded to the dtypes `out_sinfo` gives them."""
    kernel = op.kernel if kernel is None else kernel
    dtype = in_storage(op, out_sinfo, arg_sinfos)
    if dtype is None:
        return kernel
    require_extension(dtype)
    return in_float32(kernel, result_dtypes(out_sinfo))


# The one op whose torch kernel on bfloat16 is a single ATen call accumulating in float32 and rounding once
# (what in_float32 computes, up to the order of the sums), and where the dtype's speed matters most.
TORCH_BFLOAT16_NATIVE = frozenset({"relax.matmul"})


def widened_on_torch(op, out_sinfo, arg_sinfos) -> bool:
    """Whether the torch backend runs a call through in_float32, as the NumPy executor runs every call on
    these dtypes: torch only stores float8, and its bfloat16 kernels that are several ATen calls (norms,
    attention, resize, gelu_tanh, ...) would round between them."""
    name = getattr(op, "name", None)
    if name in MOVES_DATA:
        return False
    found = [d for s in (out_sinfo, *arg_sinfos) for d in _dtypes(s, []) if is_extension(d)]
    return bool(found) and (any(d.startswith("float8") for d in found) or name not in TORCH_BFLOAT16_NATIVE)


def result_dtypes(sinfo):
    """The dtype of each tensor of a result: a name, a (nested) tuple of them, or None."""
    if isinstance(sinfo, TupleStructInfo):
        return tuple(result_dtypes(s) for s in sinfo.fields)
    return sinfo.dtype or None if isinstance(sinfo, TensorStructInfo) else None


def in_float32(kernel, dtypes):
    """`kernel` on operands widened to float32, its results rounded to `dtypes` (see result_dtypes)."""

    def run(*args, **attrs):
        wide = [_widen(a) for a in args]
        result = kernel(*wide, **attrs)
        for a, w in zip(args, wide):
            # The kernel returned its (widened) argument: astype to the argument's own dtype gives the argument
            # itself, not a copy; astype from storage to float32 gives the widened copy, which is its result.
            if result is w and dtypes == _dtype_name(a):
                return a
        return _narrow(result, dtypes)

    run.__name__ = f"{getattr(kernel, '__name__', 'kernel')}_in_float32"
    return run


def _dtype_name(value) -> str:
    """A NumPy array's or a torch tensor's dtype as a Relax name ("" for other values)."""
    return str(getattr(value, "dtype", "")).removeprefix("torch.")


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch")  # without importing torch


def _widen(value):
    if isinstance(value, tuple | list):  # tuple operands (R.concat) are shallow
        return type(value)(_widen(v) for v in value)
    if not is_extension(_dtype_name(value)):
        return value
    return value.float() if _is_torch(value) else value.astype(_COMPUTE)


def _narrow(result, dtypes):
    if isinstance(dtypes, tuple) and isinstance(result, tuple | list):
        return type(result)(_narrow(r, d) for r, d in zip(result, dtypes))
    if isinstance(dtypes, str) and is_extension(dtypes):
        if isinstance(result, np.ndarray | np.generic):
            return np.asarray(result).astype(dtypes, copy=False)
        if _is_torch(result):
            return result.to(getattr(sys.modules["torch"], dtypes))
    return result
