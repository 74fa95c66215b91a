"""Logical and bitwise ops: elementwise with broadcasting, in the dtype of their arguments (no gradients)."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype
from retrograd.ops.elementwise import infer_binary, infer_unary
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.registry import InferCtx, no_gradient, register


def same_dtype_kernel(fn):
    """TVM keeps the argument dtype (logical_and of int32 gives int32 zeros and ones); NumPy gives bool."""

    def kernel(*arrays):
        return np.asarray(fn(*arrays)).astype(arrays[0].dtype, copy=False)

    kernel.__name__ = fn.__name__
    return kernel


def _int_only(infer):
    """Bitwise ops are defined on integers and bools only (TVM's TIR rejects them on floats)."""

    def check(ctx: InferCtx) -> TensorStructInfo:
        out = infer(ctx)
        if out.dtype and is_float_dtype(out.dtype):
            raise ctx.error(f"expects integer or bool tensors, got dtype {out.dtype}")
        return out

    return check


def shift_kernel(fn, name):
    def kernel(a, b):
        bits = a.dtype.itemsize * 8
        if np.any((b < 0) | (b >= bits)):
            raise KernelError(f"R.{name}: shift amounts must be in [0, {bits}) for {a.dtype}")
        return np.asarray(fn(a, b)).astype(a.dtype, copy=False)

    kernel.__name__ = name
    return kernel


def _binary(name, kernel, infer=infer_binary(None)):
    return register(f"relax.{name}", ("x1", "x2"), infer=infer, kernel=kernel, grad=no_gradient, cost=ELEMENTWISE)


logical_and = _binary("logical_and", same_dtype_kernel(np.logical_and))
logical_or = _binary("logical_or", same_dtype_kernel(np.logical_or))
logical_xor = _binary("logical_xor", same_dtype_kernel(np.logical_xor))
logical_not = register(
    "relax.logical_not", ("x",), infer=infer_unary, kernel=same_dtype_kernel(np.logical_not), grad=no_gradient, cost=ELEMENTWISE
)
bitwise_and = _binary("bitwise_and", same_dtype_kernel(np.bitwise_and), _int_only(infer_binary(None)))
bitwise_or = _binary("bitwise_or", same_dtype_kernel(np.bitwise_or), _int_only(infer_binary(None)))
bitwise_xor = _binary("bitwise_xor", same_dtype_kernel(np.bitwise_xor), _int_only(infer_binary(None)))
bitwise_not = register(
    "relax.bitwise_not", ("x",), infer=_int_only(infer_unary), kernel=same_dtype_kernel(np.invert), grad=no_gradient, cost=ELEMENTWISE
)
left_shift = _binary("left_shift", shift_kernel(np.left_shift, "left_shift"), _int_only(infer_binary(None)))
right_shift = _binary("right_shift", shift_kernel(np.right_shift, "right_shift"), _int_only(infer_binary(None)))
