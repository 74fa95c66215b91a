"""Statistical ops (TVM's statistical.py): sum, mean, variance, std, prod, max, min over axes (axis=None
reduces all), median (values and indices along one axis), cumsum and cumprod."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import GradientError, KernelError
from retrograd.ir.expr import Expr, TupleGetItem, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_int_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_bool, to_opt_dtype, to_opt_int, to_opt_ints
from retrograd.ops.cost import REDUCE
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.rule_helpers import scalar, shape_of
from retrograd.ops.shape_utils import axes_of, dims_product


def infer_reduce(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    axis, keepdims = ctx.attrs["axis"], ctx.attrs["keepdims"]
    if x.ndim == -1:
        ndim = 0 if axis is None and not keepdims else -1
        return TensorStructInfo(() if ndim == 0 else None, x.dtype, ndim)
    axes = tuple(range(x.ndim)) if axis is None else axes_of(ctx, axis, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim if keepdims else x.ndim - len(axes))
    if keepdims:
        return TensorStructInfo(tuple(1 if i in axes else d for i, d in enumerate(x.shape)), x.dtype)
    return TensorStructInfo(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def infer_cumsum(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    dtype = ctx.attrs["dtype"] or x.dtype
    axis = ctx.attrs["axis"]
    if axis is not None and x.ndim != -1:
        axes_of(ctx, (axis,), x.ndim)
    if axis is not None:
        return TensorStructInfo(x.shape, dtype, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, dtype, 1)
    return TensorStructInfo((dims_product(x.shape),), dtype)


# -- kernels ------------------------------------------------------------------------------------


# Results are in C order whatever the input's layout (NumPy's follows it): see retrograd/analysis/layout.py.


def sum_kernel(x, axis=None, keepdims=False):
    # dtype=x.dtype: NumPy would widen int32 sums to int64; TVM keeps the input dtype.
    return np.asarray(np.sum(x, axis=axis, keepdims=keepdims, dtype=x.dtype), order="C")


def mean_kernel(x, axis=None, keepdims=False):
    count = x.size if axis is None else math.prod(x.shape[a] for a in axis)
    if count == 0:
        raise KernelError(f"R.mean: mean over an empty axis of a tensor shaped {x.shape}")
    if is_int_dtype(str(x.dtype)):
        # Integer mean truncates toward zero, like TVM's integer division.
        total = np.sum(x, axis=axis, keepdims=keepdims, dtype=np.int64)
        return np.asarray(np.trunc(total / count), dtype=x.dtype, order="C")
    return np.asarray(np.mean(x, axis=axis, keepdims=keepdims), dtype=x.dtype, order="C")


def variance_kernel(x, axis=None, keepdims=False):
    if (x.size if axis is None else math.prod(x.shape[a] for a in axis)) == 0:
        raise KernelError(f"R.variance: variance over an empty axis of a tensor shaped {x.shape}")
    # Population variance (ddof=0), as TVM computes it.
    return np.asarray(np.var(x, axis=axis, keepdims=keepdims), dtype=x.dtype, order="C")


def extremum_kernel(name, fn):
    def kernel(x, axis=None, keepdims=False):
        reduced = range(x.ndim) if axis is None else axis
        if any(x.shape[a] == 0 for a in reduced):
            raise KernelError(f"R.{name}: reduction over an empty axis of a tensor shaped {x.shape}")
        return np.asarray(fn(x, axis=axis, keepdims=keepdims), order="C")

    return kernel


def cumsum_kernel(x, axis=None, dtype=None, exclusive=False):
    if axis is None:
        x, axis = x.reshape(-1), 0
    out = np.cumsum(x, axis=axis, dtype=dtype or x.dtype, out=np.empty(x.shape, dtype or x.dtype))
    if exclusive:
        # Shift by one along the axis instead of subtracting x: exact for floats.
        shifted = np.zeros_like(out)
        src = [slice(None)] * out.ndim
        dst = [slice(None)] * out.ndim
        src[axis], dst[axis] = slice(None, -1), slice(1, None)
        shifted[tuple(dst)] = out[tuple(src)]
        out = shifted
    return out


# -- gradient rules -----------------------------------------------------------------------------


def reduced_axes(call) -> tuple[int, ...]:
    ndim = call.args[0].struct_info.ndim
    axis = call.attrs["axis"]
    if ndim == -1 and (axis is None or any(a < 0 for a in axis)):
        raise GradientError(
            f"the gradient of {call.op.name} needs the rank of its input to place axis {axis}", getattr(call, "span", None)
        )
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in axis)


def reduced_axes_attr(call) -> list[int] | None:
    """The reduced axes as an axis attribute: None (all) for a full reduction, whatever the rank."""
    return None if call.attrs["axis"] is None else list(reduced_axes(call))


def keep_reduced_dims(call, v: Expr) -> Expr:
    """Put back the reduced axes (as size 1) so v broadcasts against the input."""
    axis = call.attrs["axis"]
    if call.attrs["keepdims"] or not axis:
        return v
    return R.expand_dims(v, axis=list(reduced_axes(call)))


def broadcast_like(v: Expr, x: Expr) -> Expr:
    """v broadcast to x's shape; when that shape is unknown, adding zeros_like(x) does the same."""
    s = x.struct_info
    if s.shape is None:
        return R.add(v, R.zeros_like(x))
    return R.broadcast_to(v, shape_of(x))


def reduced_count(call) -> Expr:
    """The number of reduced elements: a constant, or a computed tensor when dims are symbolic."""
    x = call.args[0]
    if x.struct_info.shape is not None:
        dims = [x.struct_info.shape[a] for a in reduced_axes(call)]
        if all(isinstance(d, int) for d in dims):
            return scalar(float(math.prod(dims)), x)
    return R.sum(R.ones_like(x), axis=reduced_axes_attr(call), keepdims=True)


def _sum_grad(call, out, g):
    return [broadcast_like(keep_reduced_dims(call, g), call.args[0])]


def _mean_grad(call, out, g):
    return [broadcast_like(R.divide(keep_reduced_dims(call, g), reduced_count(call)), call.args[0])]


def _variance_grad(call, out, g):
    x = call.args[0]
    centered = R.subtract(x, R.mean(x, axis=reduced_axes_attr(call), keepdims=True))
    two_over_n = R.divide(scalar(2.0, x), reduced_count(call))
    return [R.multiply(R.multiply(keep_reduced_dims(call, g), two_over_n), centered)]


def _extremum_grad(call, out, g):
    # TVM has no rule; we split g evenly among tied extrema (PyTorch's amax/amin rule).
    x = call.args[0]
    mask = R.astype(R.equal(x, keep_reduced_dims(call, out)), x.struct_info.dtype)
    ties = R.sum(mask, axis=reduced_axes_attr(call), keepdims=True)
    return [R.divide(R.multiply(keep_reduced_dims(call, g), mask), ties)]


def _cumsum_grad(call, out, g):
    x = call.args[0]
    axis, exclusive = call.attrs["axis"], call.attrs["exclusive"]
    a = 0 if axis is None else axis
    total = R.sum(g, axis=[a], keepdims=True)
    # The adjoint of a cumulative sum is the cumulative sum from the end: total minus a prefix sum.
    grad = R.subtract(total, R.cumsum(g, axis=a, exclusive=not exclusive))
    if axis is None and x.struct_info.ndim != 1:
        grad = R.reshape(grad, shape_of(x, call))
    if out.struct_info.dtype != x.struct_info.dtype:
        grad = R.astype(grad, x.struct_info.dtype)
    return [grad]


REDUCE_ATTRS = (Attr("axis", to_opt_ints, None), Attr("keepdims", to_bool, False))


def _reduce(name, kernel, grad):
    return register(f"relax.{name}", ("x",), REDUCE_ATTRS, infer=infer_reduce, kernel=kernel, grad=grad, cost=REDUCE)


sum = _reduce("sum", sum_kernel, _sum_grad)
mean = _reduce("mean", mean_kernel, _mean_grad)
variance = _reduce("variance", variance_kernel, _variance_grad)
max = _reduce("max", extremum_kernel("max", np.max), _extremum_grad)
min = _reduce("min", extremum_kernel("min", np.min), _extremum_grad)
cumsum = register(
    "relax.cumsum",
    ("data",),
    (Attr("axis", to_opt_int, None), Attr("dtype", to_opt_dtype, None), Attr("exclusive", to_bool, False)),
    infer=infer_cumsum,
    kernel=cumsum_kernel,
    grad=_cumsum_grad,
    cost=REDUCE,
)


# -- prod, std, median, cumprod ----------------------------------------------------------------


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
        # A fresh array: `vals` views the partitioned copy of all of x (the result would hold its buffer).
        return np.array(vals, dtype=x.dtype, order="C")
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
