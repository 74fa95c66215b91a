"""Reshaping nn ops: nn.pixel_shuffle (channels of the third-last axis into H and W) and nn.batch_flatten."""

from __future__ import annotations

import numpy as np

from retrograd.errors import GradientError, KernelError
from retrograd.ir.expr import shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import dim_mul, dims_product


def _infer_pixel_shuffle(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    r = ctx.attrs["upscale_factor"]
    if x.ndim != -1 and x.ndim < 3:
        raise ctx.error(f"expects at least 3 dimensions (channels, height, width last), got {x.ndim}", 0)
    if x.shape is None:
        return x
    *lead, c, h, w = x.shape
    if isinstance(c, int):
        if c % (r * r):
            raise ctx.error(f"the {c} channels are not divisible by upscale_factor^2 = {r * r}", 0)
        c = c // (r * r)
    else:
        return TensorStructInfo(None, x.dtype, x.ndim)
    return TensorStructInfo((*lead, c, dim_mul(h, r), dim_mul(w, r)), x.dtype)


def pixel_shuffle_kernel(data, *, upscale_factor):
    """(..., C r^2, H, W) -> (..., C, H r, W r): channel c * r^2 + i * r + j goes to row h * r + i,
    column w * r + j (PyTorch's and TVM's order)."""
    x = np.asarray(data)
    r = int(upscale_factor)
    if x.ndim < 3 or x.shape[-3] % (r * r):
        raise KernelError(f"pixel_shuffle: cannot shuffle shape {x.shape} by upscale_factor {r}")
    *lead, c, h, w = x.shape
    k = len(lead)
    y = x.reshape(*lead, c // (r * r), r, r, h, w)
    y = y.transpose(*range(k + 1), k + 3, k + 1, k + 4, k + 2)
    return np.array(y, order="C").reshape(*lead, c // (r * r), h * r, w * r)


def _pixel_shuffle_grad(call, out, g):
    # The inverse permutation of the elements: reshape, transpose back, reshape.
    s = call.args[0].struct_info
    if s.shape is None:
        raise GradientError(f"R.nn.pixel_shuffle: the gradient needs the input shape, got {s}", call.span)
    r = call.attrs["upscale_factor"]
    *lead, c, h, w = s.shape
    k = len(lead)
    cr = c // (r * r)
    g6 = R.reshape(g, shape_expr((*lead, cr, h, r, w, r)))
    back = R.permute_dims(g6, axes=[*range(k + 1), k + 2, k + 4, k + 1, k + 3])
    return [R.reshape(back, shape_expr(s.shape))]


pixel_shuffle = register(
    "relax.nn.pixel_shuffle",
    ("data",),
    (Attr("upscale_factor", at.int_at_least("upscale_factor", 1)),),
    infer=_infer_pixel_shuffle,
    kernel=pixel_shuffle_kernel,
    grad=_pixel_shuffle_grad,
)


def _infer_batch_flatten(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    if x.ndim != -1 and x.ndim < 2:
        raise ctx.error(f"expects at least 2 dimensions, got {x.ndim}", 0)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 2)
    return TensorStructInfo((x.shape[0], dims_product(x.shape[1:])), x.dtype)


def batch_flatten_kernel(data):
    x = np.asarray(data)
    if x.ndim < 2:
        raise KernelError(f"batch_flatten: expects at least 2 dimensions, got shape {x.shape}")
    # A fresh buffer (a view would need a layout rule in retrograd.analysis).
    rest = int(np.prod(x.shape[1:], dtype=np.int64))  # explicit: -1 is ambiguous for zero-size x
    return np.array(x.reshape(x.shape[0], rest), order="C", copy=True)


def _batch_flatten_grad(call, out, g):
    s = call.args[0].struct_info
    if s.shape is None:
        raise GradientError(f"R.nn.batch_flatten: the gradient needs the input shape, got {s}", call.span)
    return [R.reshape(g, shape_expr(s.shape))]


batch_flatten = register(
    "relax.nn.batch_flatten",
    ("data",),
    infer=_infer_batch_flatten,
    kernel=batch_flatten_kernel,
    grad=_batch_flatten_grad,
)
