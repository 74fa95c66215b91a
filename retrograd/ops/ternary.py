"""The ternary elementwise op ewise_fma (TVM's ternary.py)."""

from __future__ import annotations

import numpy as np

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.registry import InferCtx, register


def _infer_fma(ctx: InferCtx) -> TensorStructInfo:
    # TVM: no broadcasting; the three ndims, shapes and dtypes must agree.
    xs = [ctx.tensor(i) for i in range(3)]
    dtypes = {x.dtype for x in xs if x.dtype}
    if len(dtypes) > 1:
        raise ctx.error(f"dtypes {', '.join(x.dtype for x in xs)} must be equal")
    ndims = {x.ndim for x in xs if x.ndim != -1}
    if len(ndims) > 1:
        raise ctx.error("the three arguments must have the same number of dimensions")
    dtype = dtypes.pop() if dtypes else ""
    shapes = [x.shape for x in xs]
    if all(s is not None for s in shapes):
        for a, b, c in zip(*shapes):
            if not a == b == c:
                raise ctx.error("the three arguments must have the same shape")
        return TensorStructInfo(shapes[0], dtype)
    return TensorStructInfo(None, dtype, ndims.pop() if ndims else -1)


def ewise_fma_kernel(x1, x2, x3):
    return np.asarray(x1 * x2 + x3)


ewise_fma = register(
    "relax.ewise_fma",
    ("x1", "x2", "x3"),
    infer=_infer_fma,
    kernel=ewise_fma_kernel,
    grad=lambda c, o, g: [R.multiply(g, c.args[1]), R.multiply(g, c.args[0]), g],
    cost=ELEMENTWISE,
)
