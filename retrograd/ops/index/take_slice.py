"""Indexing ops: strided_slice, take.

strided_slice keeps axes, begin, end and strides as attributes (tuples of ints), not Tuple arguments:
TVM 0.27 prints them positionally as tuple literals, `R.strided_slice(x, (0,), (1,), (3,), assume_inbound=False)`,
so the op lists them in `print_positional` and the printer writes them that way (stopping at a None
strides); `bind` already maps those positional values to attributes in schema order.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import Constant, Expr, PrimValue, Tuple, shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import index as index_kernels
from retrograd.ops.cost import ELEMENTWISE, VIEW
from retrograd.ops import views
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.runtime_dims import axis_positions
from retrograd.ops.shape_utils import axes_of


# -- strided_slice ------------------------------------------------------------------------------


def _infer_strided_slice(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    axes, begin, end, strides = (ctx.attrs[k] for k in ("axes", "begin", "end", "strides"))
    strides = strides if strides is not None else (1,) * len(axes)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise ctx.error(
            f"axes, begin, end and strides must have the same length, got {len(axes)}, {len(begin)}, "
            f"{len(end)}, {len(strides)}"
        )
    if 0 in strides:
        raise ctx.error(f"strides must be non-zero, got {list(strides)}")
    if x.ndim == -1:
        return x
    axes = axes_of(ctx, axes, x.ndim)
    if x.shape is None:
        return x
    shape = list(x.shape)
    for a, b, e, s in zip(axes, begin, end, strides):
        if not isinstance(shape[a], int):
            return TensorStructInfo(None, x.dtype, x.ndim)
        shape[a] = len(range(*slice(b, e, s).indices(shape[a])))
    return TensorStructInfo(tuple(shape), x.dtype)


def strided_slice_kernel(x, axes, begin, end, strides=None, assume_inbound=False):
    # Python slices clamp out-of-range begin/end exactly as TVM does when assume_inbound is False.
    index = [slice(None)] * x.ndim
    for i, (a, b, e) in enumerate(zip(axes, begin, end)):
        index[a] = slice(b, e, strides[i] if strides is not None else 1)
    return x[tuple(index)]


def _strided_slice_grad(call, out, g):
    """Scatter g back into zeros shaped like x with ops we have (TVM has no backward op for slices):
    per sliced axis, interleave zeros between elements for strides > 1 (concat + reshape), reverse for
    negative strides, and pad with zero blocks before and after."""
    x = call.args[0]
    xs, os_ = x.struct_info.shape, out.struct_info.shape
    if xs is None or os_ is None:
        return [_strided_slice_grad_dynamic(call, g)]
    dtype = x.struct_info.dtype
    strides = call.attrs["strides"] or (1,) * len(call.attrs["axes"])
    shape = list(os_)

    def zeros(axis, length):
        return R.zeros(shape_expr(shape[:axis] + [length] + shape[axis + 1 :]), dtype=dtype)

    for a, b, e, s in zip(call.attrs["axes"], call.attrs["begin"], call.attrs["end"], strides):
        a = a % len(xs)
        if not isinstance(xs[a], int):
            raise GradientError("R.strided_slice: the gradient needs a static size on sliced axes", call.span)
        n = xs[a]
        idx = range(*slice(b, e, s).indices(n))
        m = len(idx)
        if m == 0:
            shape[a] = n
            g = zeros(a, n)
            continue
        if s < 0:
            g = R.strided_slice(g, axes=[a], begin=[m - 1], end=[-(m + 1)], strides=[-1])
            s, start = -s, idx[-1]
        else:
            start = idx[0]
        if s > 1 and m > 1:
            gap = R.zeros(shape_expr(shape[:a] + [m, s - 1] + shape[a + 1 :]), dtype=dtype)
            wide = R.concat(Tuple([R.expand_dims(g, axis=[a + 1]), gap]), axis=a + 1)
            g = R.reshape(wide, shape_expr(shape[:a] + [m * s] + shape[a + 1 :]))
            g = R.strided_slice(g, axes=[a], begin=[0], end=[(m - 1) * s + 1])
        length = (m - 1) * s + 1
        parts = []
        if start:
            parts.append(zeros(a, start))
        parts.append(g)
        if n - start - length:
            parts.append(zeros(a, n - start - length))
        g = R.concat(Tuple(parts), axis=a) if len(parts) > 1 else g
        shape[a] = n
    return [g]


def _strided_slice_grad_dynamic(call, g):
    """The same scatter for sizes known only at run time: per sliced axis (last first), the sliced
    positions of that axis (a run-time arange sliced like x) index a take_backward into a template
    shaped like x on the axes done and like the slice on the others."""
    x = call.args[0]
    ndim = x.struct_info.ndim
    if ndim == -1:
        raise GradientError("R.strided_slice: the gradient needs the rank of its input", call.span)
    strides = call.attrs["strides"] or (1,) * len(call.attrs["axes"])
    items = [(a % ndim, b, e, s) for a, b, e, s in zip(call.attrs["axes"], call.attrs["begin"], call.attrs["end"], strides)]
    for k in range(len(items) - 1, -1, -1):
        a, b, e, s = items[k]
        rest = items[:k]
        template = x if not rest else R.strided_slice(x, *(list(t) for t in zip(*rest)))
        where = R.strided_slice(axis_positions(x, a), axes=[0], begin=[b], end=[e], strides=[s])
        g = R.grad.take_backward(g, template, where, axis=a)
    return g


strided_slice = register(
    "relax.strided_slice",
    ("x",),
    (
        Attr("axes", at.to_ints),
        Attr("begin", at.to_ints),
        Attr("end", at.to_ints),
        Attr("strides", at.to_opt_ints, None),
        Attr("assume_inbound", at.to_bool, False),
    ),
    infer=_infer_strided_slice,
    kernel=strided_slice_kernel,
    grad=_strided_slice_grad,
    print_positional=("axes", "begin", "end", "strides"),
    aliases=(0,), view=views.strided_slice,  # a basic slice: a NumPy view of x
    cost=VIEW,
)

# -- take --------------------------------------------------------------------------------------------------


def _infer_take(ctx: InferCtx) -> TensorStructInfo:
    x, idx = ctx.tensor(0), ctx.tensor(1)
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise ctx.error(f"indices must have an integer dtype, got {idx.dtype}", 1)
    axis = ctx.attrs["axis"]
    if axis is None:
        if x.ndim not in (1, -1):
            raise ctx.error(f"axis=None needs a 1-D tensor (as in TVM), got ndim {x.ndim}", 0)
        return TensorStructInfo(idx.shape, x.dtype, idx.ndim)
    if x.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    (axis,) = axes_of(ctx, (axis,), x.ndim)
    if idx.ndim == -1:
        return TensorStructInfo(None, x.dtype, -1)
    if x.shape is None or idx.shape is None:
        return TensorStructInfo(None, x.dtype, x.ndim - 1 + idx.ndim)
    return TensorStructInfo(x.shape[:axis] + idx.shape + x.shape[axis + 1 :], x.dtype)


def in_range_indices(indices: Expr, size, mode: str) -> Expr | None:
    """The indices take(mode=clip|wrap) really reads along an axis of `size`, as an expression (or None
    when size is not a static positive int): with them, mode "fast" addresses the same elements."""
    if mode not in ("clip", "wrap") or not isinstance(size, int) or size <= 0:
        return None
    if mode == "clip":
        return R.clip(indices, PrimValue(0), PrimValue(size - 1))
    dtype = indices.struct_info.dtype
    return R.floor_mod(indices, Constant(np.array(size, dtype=dtype), TensorStructInfo((), dtype)))


def _take_grad(call, out, g):
    x, idx = call.args
    axis, mode = call.attrs["axis"], call.attrs["mode"]
    s = x.struct_info
    size = s.shape[0 if axis is None else axis] if getattr(s, "shape", None) is not None else None
    fixed = in_range_indices(idx, size, mode)
    if fixed is not None:
        # TVM's take_backward has no mode: clip/wrap become in-range indices, which it reads as they are.
        idx, mode = fixed, "fast"
    return [R.grad.take_backward(g, x, idx, axis=axis, mode=mode), None]


def take_kernel(x, indices, axis=None, mode="fast"):
    return index_kernels.take(x, indices, axis=axis, mode=mode)


take = register(
    "relax.take",
    ("x", "indices"),
    (Attr("axis", at.to_opt_int, None), Attr("mode", at.one_of("fast", "nan", "wrap", "clip"), "fast")),
    infer=_infer_take,
    kernel=take_kernel,
    grad=_take_grad,
    cost=ELEMENTWISE,
)
