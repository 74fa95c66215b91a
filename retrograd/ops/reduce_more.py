"""More reductions: prod, std, median (values and indices along one axis), and cumprod."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.expr import TupleGetItem, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.statistical import (
    REDUCE_ATTRS,
    reduced_count,
    infer_cumsum,
    infer_reduce,
    keep_reduced_dims,
    reduced_axes,
    reduced_axes_attr,
    broadcast_like,
)
from retrograd.ops.registry import Attr, InferCtx, register


def _nonempty(name, x, axis):
    if (x.size if axis is None else math.prod(x.shape[a] for a in axis)) == 0:
        raise KernelError(f"R.{name}: reduction over an empty axis of a tensor shaped {x.shape}")


# -- prod -----------------------------------------------------------------------------------------


def prod_kernel(x, axis=None, keepdims=False):
    return np.asarray(np.prod(x, axis=axis, keepdims=keepdims, dtype=x.dtype))


def _prod_grad(call, out, g):
    """d prod / d x_i is the product of the others: exclusive cumulative products from both ends over
    the reduced elements laid out along one axis (exact at zeros, as PyTorch; no division by x)."""
    x = call.args[0]
    shape = x.struct_info.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return [R.multiply(broadcast_like(keep_reduced_dims(call, g), x), R.divide(broadcast_like(keep_reduced_dims(call, out), x), x))]
    axes = reduced_axes(call)
    rest = [a for a in range(len(shape)) if a not in axes]
    perm = rest + list(axes)
    inverse = [perm.index(a) for a in range(len(shape))]
    lead = [shape[a] for a in rest]
    flat = R.reshape(R.permute_dims(x, axes=perm), shape_expr(lead + [math.prod(shape[a] for a in axes)]))
    before = R.cumprod(flat, axis=-1, exclusive=True)
    after = R.flip(R.cumprod(R.flip(flat, axis=-1), axis=-1, exclusive=True), axis=-1)
    others = R.reshape(R.multiply(before, after), shape_expr(lead + [shape[a] for a in axes]))
    others = R.permute_dims(others, axes=inverse)
    return [R.multiply(broadcast_like(keep_reduced_dims(call, g), x), others)]


prod = register("relax.prod", ("x",), REDUCE_ATTRS, infer=infer_reduce, kernel=prod_kernel, grad=_prod_grad)

# -- std ------------------------------------------------------------------------------------------


def std_kernel(x, axis=None, keepdims=False):
    _nonempty("std", x, axis)
    # Population standard deviation (ddof=0): TVM legalizes std as sqrt(variance).
    return np.asarray(np.std(x, axis=axis, keepdims=keepdims), dtype=x.dtype)


def _std_grad(call, out, g):
    x = call.args[0]
    centered = R.subtract(x, R.mean(x, axis=reduced_axes_attr(call), keepdims=True))
    scale = R.divide(keep_reduced_dims(call, g), R.multiply(reduced_count(call), keep_reduced_dims(call, out)))
    return [R.multiply(scale, centered)]


std = register("relax.std", ("x",), REDUCE_ATTRS, infer=infer_reduce, kernel=std_kernel, grad=_std_grad)

# -- median ---------------------------------------------------------------------------------------


def _infer_median(ctx: InferCtx):
    # TVM: one axis gives (values, int64 indices); no axis or several give the values alone.
    x = ctx.tensor(0)
    axis = ctx.attrs["axis"]
    values = infer_reduce(ctx)
    if axis is None or len(axis) != 1:
        return values
    return TupleStructInfo([values, TensorStructInfo(values.shape, "int64", values.ndim)])


def median_kernel(x, axis=None, keepdims=False):
    _nonempty("median", x, axis)
    # The lower median (sorted position (n - 1) // 2), as TVM's legalization and torch.median.
    if axis is None or len(axis) != 1:
        axes = tuple(range(x.ndim)) if axis is None else tuple(axis)
        rest = [a for a in range(x.ndim) if a not in axes]
        flat = np.transpose(x, rest + list(axes)).reshape([x.shape[a] for a in rest] + [math.prod(x.shape[a] for a in axes)])
        k = (flat.shape[-1] - 1) // 2
        vals = np.partition(flat, k, axis=-1)[..., k]
        if keepdims:
            vals = np.expand_dims(vals, axes)
        return np.asarray(vals, dtype=x.dtype)
    (a,) = axis
    k = (x.shape[a] - 1) // 2
    order = np.argsort(x, axis=a, kind="stable")
    idx = np.take(order, [k], axis=a)
    vals = np.take_along_axis(x, idx, a)
    if not keepdims:
        idx, vals = np.squeeze(idx, a), np.squeeze(vals, a)
    return vals, idx.astype("int64")


def _median_grad(call, out, g):
    """One axis: g goes to the element at the returned index (PyTorch). Otherwise g is shared evenly
    among the elements equal to the median (there is no index to follow)."""
    x = call.args[0]
    if isinstance(out.struct_info, TupleStructInfo):
        (a,) = call.attrs["axis"]
        idx, gv = TupleGetItem(out, 1), TupleGetItem(g, 0)
        if not call.attrs["keepdims"]:
            idx, gv = R.expand_dims(idx, axis=[a]), R.expand_dims(gv, axis=[a])
        return [R.scatter_elements(R.zeros_like(x), idx, gv, axis=a)]
    mask = R.astype(R.equal(x, keep_reduced_dims(call, out)), x.struct_info.dtype)
    ties = R.sum(mask, axis=reduced_axes_attr(call), keepdims=True)
    return [R.divide(R.multiply(keep_reduced_dims(call, g), mask), ties)]


median = register("relax.median", ("x",), REDUCE_ATTRS, infer=_infer_median, kernel=median_kernel, grad=_median_grad)

# -- cumprod --------------------------------------------------------------------------------------


def cumprod_kernel(data, axis=None, dtype=None, exclusive=False):
    if axis is None:
        data, axis = data.reshape(-1), 0
    out = np.cumprod(data, axis=axis, dtype=dtype or data.dtype)
    if exclusive and out.shape[axis]:
        # Shift by one along the axis (a leading 1) instead of dividing by data: exact with zeros.
        ones = np.ones_like(np.take(out, [0], axis=axis))
        out = np.concatenate([ones, np.take(out, np.arange(out.shape[axis] - 1), axis=axis)], axis=axis)
    return out


def _cumprod_grad(call, out, g):
    """d out_j / d x_i = out_j / x_i for the j whose product includes x_i: a reversed cumulative sum
    of g * out, divided by x. Unlike PyTorch's rule this is not exact where x is zero (NaN there)."""
    x = call.args[0]
    axis, exclusive = call.attrs["axis"], call.attrs["exclusive"]
    a = 0 if axis is None else axis
    go = R.multiply(g, out)
    if out.struct_info.dtype != x.struct_info.dtype:
        go = R.astype(go, x.struct_info.dtype)
    total = R.sum(go, axis=[a], keepdims=True)
    suffix = R.subtract(total, R.cumsum(go, axis=a, exclusive=not exclusive))
    if axis is None and x.struct_info.ndim != 1:
        suffix = R.reshape(suffix, shape_expr(x.struct_info.shape))
    return [R.divide(suffix, x)]


cumprod = register(
    "relax.cumprod",
    ("data",),
    (Attr("axis", at.to_opt_int, None), Attr("dtype", at.to_opt_dtype, None), Attr("exclusive", at.to_bool, False)),
    infer=infer_cumsum,
    kernel=cumprod_kernel,
    grad=_cumprod_grad,
)
