"""Reductions: sum, mean, variance, max, min over axes (TVM: axis=None reduces all), and cumsum."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import GradientError, KernelError
from retrograd.ir.expr import Expr
from retrograd.ir.struct_info import TensorStructInfo, is_int_dtype
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_bool, to_opt_dtype, to_opt_int, to_opt_ints
from retrograd.ops.elementwise import scalar, shape_of
from retrograd.ops.cost import REDUCE
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import dims_product, normalize_axis


def axes_of(ctx: InferCtx, axes, ndim: int, arg: int = 0, what: str = "axis") -> tuple[int, ...]:
    """Normalize a list of axes against ndim: in range, no repeats; errors name the op and argument."""
    out = []
    for a in axes:
        n = normalize_axis(a, ndim)
        if n is None:
            raise ctx.error(f"{what} {a} is out of range for a tensor of ndim {ndim} (expected [{-ndim}, {ndim}))", arg)
        if n in out:
            raise ctx.error(f"{what} {a} is repeated in {list(axes)}", arg)
        out.append(n)
    return tuple(out)


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
