"""Linear algebra: matmul with NumPy/array-API semantics (batch broadcasting, 1-D operands, out_dtype)."""

from __future__ import annotations

import numpy as np

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_opt_dtype
from retrograd.ops.cost import MATMUL
from retrograd.ops.kernels.matmul import matmul as matmul_kernel
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import broadcast_shapes, same_dtype


def _infer_matmul(ctx: InferCtx) -> TensorStructInfo:
    a, b = ctx.tensor(0), ctx.tensor(1)
    out_dtype = ctx.attrs["out_dtype"]
    dtype = same_dtype(a, b)
    if dtype is None and out_dtype is None:
        raise ctx.error(f"dtypes {a.dtype} and {b.dtype} differ (give out_dtype to mix them)")
    dtype = out_dtype or dtype
    for i, t in enumerate((a, b)):
        if t.ndim == 0:
            raise ctx.error("expects tensors of at least one dimension, got a scalar", i)
    if a.ndim == -1 or b.ndim == -1:
        return TensorStructInfo(None, dtype, -1)
    ndim = max(a.ndim, b.ndim, 2) - (a.ndim == 1) - (b.ndim == 1)
    if a.shape is None or b.shape is None:
        return TensorStructInfo(None, dtype, ndim)
    # A 1-D operand is a row (left) or column (right) vector whose unit dim is dropped from the result.
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    ka, kb = sa[-1], sb[-2]
    if ka != kb and isinstance(ka, int) and isinstance(kb, int):
        raise ctx.error(f"inner dimensions differ ({ka} vs {kb})")
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    if batch is None:
        raise ctx.error(f"batch dimensions {sa[:-2]} and {sb[:-2]} cannot be broadcast together")
    rows = (sa[-2],) if a.ndim > 1 else ()
    cols = (sb[-1],) if b.ndim > 1 else ()
    return TensorStructInfo(batch + rows + cols, dtype)


def _t(x, ndim: int):
    """Swap the last two axes."""
    return R.permute_dims(x, axes=list(range(ndim - 2)) + [ndim - 1, ndim - 2])


def _matmul_grad(call, out, g):
    a, b = call.args
    na, nb = a.struct_info.ndim, b.struct_info.ndim
    ad, bd, od = a.struct_info.dtype, b.struct_info.dtype, out.struct_info.dtype

    def mm(x, y, xd, yd, target):
        # With out_dtype the adjoint's dtype differs from the operands': ask for the operand's dtype back.
        return R.matmul(x, y, out_dtype=None if xd == yd == target else target)

    if na > 1 and nb > 1:
        da, db = mm(g, _t(b, nb), od, bd, ad), mm(_t(a, na), g, ad, od, bd)
    elif na == 1 and nb > 1:
        ge = R.expand_dims(g, axis=[-2])
        da = R.squeeze(mm(ge, _t(b, nb), od, bd, ad), axis=[-2])
        db = mm(R.expand_dims(a, axis=[1]), ge, ad, od, bd)
    elif nb == 1 and na > 1:
        ge = R.expand_dims(g, axis=[-1])
        da = mm(ge, R.expand_dims(b, axis=[0]), od, bd, ad)
        db = R.squeeze(mm(_t(a, na), ge, ad, od, bd), axis=[-1])
    else:
        ga = g if od == ad else R.astype(g, ad)
        gb = g if od == bd else R.astype(g, bd)
        da = R.multiply(ga, b if bd == ad else R.astype(b, ad))
        db = R.multiply(gb, a if ad == bd else R.astype(a, bd))
    # The driver collapse-sums broadcast batch dims back to each operand's shape.
    return [da, db]


matmul = register(
    "relax.matmul",
    ("x1", "x2"),
    (Attr("out_dtype", to_opt_dtype, None),),
    infer=_infer_matmul,
    kernel=matmul_kernel,
    grad=_matmul_grad,
    cost=MATMUL,
)
