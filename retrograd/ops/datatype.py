"""Data type conversion (TVM's datatype.py): astype."""

from __future__ import annotations

import numpy as np

from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype
from retrograd.ops import attr_types as at
from retrograd.ops import views
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.create import np_dtype
from retrograd.ops.registry import Attr, register


def _astype_grad(call, out, g):
    x = call.args[0]
    if not (is_float_dtype(x.struct_info.dtype) and is_float_dtype(out.struct_info.dtype)):
        return [None]
    return [R.astype(g, x.struct_info.dtype)]


def astype_kernel(x, dtype):
    # The input itself when the dtype is unchanged; otherwise a C-order copy (NumPy's keeps the layout).
    dt = np_dtype(dtype, "R.astype")
    return x if x.dtype == dt else np.asarray(x.astype(dt, order="C"))


astype = register(
    "relax.astype",
    ("x",),
    (Attr("dtype", at.to_dtype),),
    infer=lambda ctx: TensorStructInfo(ctx.tensor(0).shape, ctx.attrs["dtype"], ctx.tensor(0).ndim),
    kernel=astype_kernel,
    grad=_astype_grad,
    aliases=(0,), view=views.astype,  # x itself when the dtype is unchanged
    cost=ELEMENTWISE,
)
