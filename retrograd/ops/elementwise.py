"""Elementwise ops: binary arithmetic and comparison with broadcasting, and unary math."""

from __future__ import annotations

import numpy as np

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import InferCtx, register
from retrograd.ops.shape_utils import broadcast_shapes, same_dtype


def _infer_binary(out_dtype: str | None):
    def infer(ctx: InferCtx) -> TensorStructInfo:
        a, b = ctx.tensor(0), ctx.tensor(1)
        dtype = same_dtype(a, b)
        if dtype is None:
            raise ctx.error(f"dtypes {a.dtype} and {b.dtype} differ")
        dtype = out_dtype or dtype
        if a.shape is None or b.shape is None:
            ndim = -1 if a.ndim == -1 or b.ndim == -1 else max(a.ndim, b.ndim)
            return TensorStructInfo(None, dtype, ndim)
        shape = broadcast_shapes(a.shape, b.shape)
        if shape is None:
            raise ctx.error("shapes cannot be broadcast together")
        return TensorStructInfo(shape, dtype)

    return infer


def _infer_unary(ctx: InferCtx) -> TensorStructInfo:
    return ctx.tensor(0)


def _binary(name, kernel, out_dtype=None):
    return register(f"relax.{name}", ("x1", "x2"), infer=_infer_binary(out_dtype), kernel=kernel)


def _unary(name, kernel):
    return register(f"relax.{name}", ("x",), infer=_infer_unary, kernel=kernel)


add = _binary("add", np.add)
subtract = _binary("subtract", np.subtract)
multiply = _binary("multiply", np.multiply)
divide = _binary("divide", np.divide)
power = _binary("power", np.power)
maximum = _binary("maximum", np.maximum)
minimum = _binary("minimum", np.minimum)
equal = _binary("equal", np.equal, "bool")
not_equal = _binary("not_equal", np.not_equal, "bool")
greater = _binary("greater", np.greater, "bool")
greater_equal = _binary("greater_equal", np.greater_equal, "bool")
less = _binary("less", np.less, "bool")
less_equal = _binary("less_equal", np.less_equal, "bool")

abs = _unary("abs", np.abs)
cos = _unary("cos", np.cos)
sin = _unary("sin", np.sin)
exp = _unary("exp", np.exp)
log = _unary("log", np.log)
negative = _unary("negative", np.negative)
sqrt = _unary("sqrt", np.sqrt)
tanh = _unary("tanh", np.tanh)
