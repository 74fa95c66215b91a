"""Shapes as values, with TVM 0.27's typing: shape_of, size, shape_to_tensor, tensor_to_shape.

A shape value runs as a tuple of Python ints. `tensor_to_shape` is how a size computed at run time
(an ONNX Reshape's shape input) becomes a shape: its result has only an ndim (R.Shape(ndim=k)), and
ops given it infer tensors of known rank and unknown extents. None of these has a gradient (their
results are integers).
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import ShapeStructInfo, TensorStructInfo
from retrograd.ops.cost import VIEW
from retrograd.ops.create import shape_arg
from retrograd.ops.registry import Arg, InferCtx, no_gradient, register


def _infer_shape_of(ctx: InferCtx) -> ShapeStructInfo:
    x = ctx.tensor(0)
    return ShapeStructInfo(x.shape, x.ndim) if x.shape is not None else ShapeStructInfo(None, x.ndim)


def _infer_size(ctx: InferCtx) -> TensorStructInfo:
    ctx.tensor(0)
    return TensorStructInfo((), "int64")


def _infer_shape_to_tensor(ctx: InferCtx) -> TensorStructInfo:
    s = shape_arg(ctx, 0)
    return TensorStructInfo((s.ndim,) if s.ndim >= 0 else None, "int64", 1)


def _infer_tensor_to_shape(ctx: InferCtx) -> ShapeStructInfo:
    t = ctx.tensor(0)
    if t.ndim not in (-1, 1):
        raise ctx.error(f"expects a 1-D integer tensor, got {t.ndim}-D", 0)
    if t.dtype and not t.dtype.startswith(("int", "uint")):
        raise ctx.error(f"expects an integer tensor, got dtype {t.dtype}", 0)
    n = t.shape[0] if t.shape is not None and isinstance(t.shape[0], int) else -1
    return ShapeStructInfo(None, n)


def tensor_to_shape_kernel(t):
    if t.ndim != 1:
        raise KernelError(f"R.tensor_to_shape: expects a 1-D tensor, got shape {t.shape}")
    return tuple(int(v) for v in t)


def shape_of_kernel(x):
    return tuple(int(d) for d in x.shape)


shape_of = register(
    "relax.shape_of", ("x",), infer=_infer_shape_of, kernel=shape_of_kernel,
    grad=no_gradient, cost=VIEW,
)
def size_kernel(x):
    return np.array(x.size, dtype=np.int64)


size = register(
    "relax.size", ("x",), infer=_infer_size, kernel=size_kernel, grad=no_gradient, cost=VIEW,
)
def shape_to_tensor_kernel(s):
    return np.array(tuple(s), dtype=np.int64).reshape(len(tuple(s)))


shape_to_tensor = register(
    "relax.shape_to_tensor", (Arg("x", "shape"),), infer=_infer_shape_to_tensor,
    kernel=shape_to_tensor_kernel, grad=no_gradient, cost=VIEW,
)
tensor_to_shape = register(
    "relax.tensor_to_shape", ("x",), infer=_infer_tensor_to_shape, kernel=tensor_to_shape_kernel, grad=no_gradient, cost=VIEW,
)
