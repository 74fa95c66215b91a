"""Ops that replicate or reorder along axes: stack, tile, repeat, flip, reverse_sequence."""

from __future__ import annotations

import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import Tuple, TupleGetItem, shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import axes_of, dim_mul, dims_product


def _static_shape(call, x, what: str) -> tuple[int, ...]:
    s = x.struct_info.shape
    if s is None or not all(isinstance(d, int) for d in s):
        raise GradientError(f"{call.op.script_name}: the gradient needs the static shape of {what}", call.span)
    return tuple(s)


# -- stack ---------------------------------------------------------------------------------------


def _infer_stack(ctx: InferCtx) -> TensorStructInfo:
    fields = ctx.tuple(0).fields
    if not fields:
        raise ctx.error("needs at least one tensor", 0)
    if not all(isinstance(f, TensorStructInfo) for f in fields):
        raise ctx.error("expects a tuple of tensors", 0)
    dtypes = {f.dtype for f in fields if f.dtype}
    if len(dtypes) > 1:
        raise ctx.error(f"tensors have different dtypes {sorted(dtypes)}", 0)
    dtype = dtypes.pop() if dtypes else ""
    ndims = {f.ndim for f in fields if f.ndim != -1}
    if len(ndims) > 1:
        raise ctx.error(f"tensors have different ndims {sorted(ndims)}", 0)
    if not ndims:
        return TensorStructInfo(None, dtype, -1)
    ndim = ndims.pop()
    axis = ctx.attrs["axis"]
    (axis,) = axes_of(ctx, (0 if axis is None else axis,), ndim + 1)
    if any(f.shape is None for f in fields):
        return TensorStructInfo(None, dtype, ndim + 1)
    shape = fields[0].shape
    for f in fields[1:]:
        for i, (a, b) in enumerate(zip(shape, f.shape)):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise ctx.error(f"tensors must have identical shapes; dimension {i} differs ({a} vs {b})", 0)
            if a != b:
                return TensorStructInfo(None, dtype, ndim + 1)
    return TensorStructInfo(shape[:axis] + (len(fields),) + shape[axis:], dtype)


def stack_kernel(tensors, axis=0):
    return np.stack(tensors, axis=0 if axis is None else axis)


def _stack_grad(call, out, g):
    n = len(call.args[0].struct_info.fields)
    axis = call.attrs["axis"] or 0
    axis = axis % out.struct_info.ndim
    if n == 1:
        return [Tuple([R.squeeze(g, axis=[axis])])]
    parts = R.split(g, indices_or_sections=n, axis=axis)
    return [Tuple([R.squeeze(TupleGetItem(parts, i), axis=[axis]) for i in range(n)])]


stack = register(
    "relax.stack", ("tensors",), (Attr("axis", at.to_opt_int, 0),), infer=_infer_stack, kernel=stack_kernel, grad=_stack_grad
)

# -- tile and repeat ------------------------------------------------------------------------------


def _infer_tile(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    reps = ctx.attrs["repeats"]
    if any(r < 0 for r in reps):
        raise ctx.error(f"repeats must be non-negative, got {list(reps)}")
    if x.shape is None:
        if x.ndim == -1:
            return x
        if len(reps) > x.ndim:
            return TensorStructInfo(None, x.dtype, len(reps))
        return x if all(r == 1 for r in reps) else TensorStructInfo(None, x.dtype, x.ndim)
    n = max(len(reps), x.ndim)
    shape = (1,) * (n - x.ndim) + x.shape
    reps = (1,) * (n - len(reps)) + tuple(reps)
    return TensorStructInfo(tuple(dim_mul(d, r) for d, r in zip(shape, reps)), x.dtype)


def _tile_grad(call, out, g):
    x = call.args[0]
    shape = _static_shape(call, x, "x")
    reps = call.attrs["repeats"]
    n = max(len(reps), len(shape))
    padded = (1,) * (n - len(shape)) + shape
    reps = (1,) * (n - len(reps)) + tuple(reps)
    # The result along axis i is reps[i] copies of x's axis: split each axis into (copy, position).
    split = [v for r, d in zip(reps, padded) for v in (r, d)]
    summed = R.sum(R.reshape(g, shape_expr(split)), axis=list(range(0, 2 * n, 2)))
    return [R.reshape(summed, shape_expr(shape))]


def tile_kernel(data, repeats):
    return np.tile(data, repeats)


tile = register(
    "relax.tile", ("data",), (Attr("repeats", at.to_ints),), infer=_infer_tile,
    kernel=tile_kernel, grad=_tile_grad,
)


def _infer_repeat(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    reps, axis = ctx.attrs["repeats"], ctx.attrs["axis"]
    if reps < 0:
        raise ctx.error(f"repeats must be non-negative, got {reps}")
    if axis is not None and x.ndim != -1:
        (axis,) = axes_of(ctx, (axis,), x.ndim)
    if x.shape is None:
        if axis is None:
            return TensorStructInfo(None, x.dtype, 1)
        return x if reps == 1 else TensorStructInfo(None, x.dtype, x.ndim)
    if axis is None:
        return TensorStructInfo((dims_product(x.shape + (reps,)),), x.dtype)
    return TensorStructInfo(x.shape[:axis] + (dim_mul(x.shape[axis], reps),) + x.shape[axis + 1 :], x.dtype)


def _repeat_grad(call, out, g):
    x = call.args[0]
    shape = _static_shape(call, x, "data")
    reps, axis = call.attrs["repeats"], call.attrs["axis"]
    if axis is None:
        summed = R.sum(R.reshape(g, shape_expr((int(np.prod(shape)), reps))), axis=[1])
        return [R.reshape(summed, shape_expr(shape))]
    axis %= len(shape)
    split = shape[: axis + 1] + (reps,) + shape[axis + 1 :]
    return [R.sum(R.reshape(g, shape_expr(split)), axis=[axis + 1])]


def repeat_kernel(data, repeats, axis=None):
    return np.repeat(data, repeats, axis=axis)


repeat = register(
    "relax.repeat", ("data",), (Attr("repeats", at.to_int), Attr("axis", at.to_opt_int, None)),
    infer=_infer_repeat, kernel=repeat_kernel, grad=_repeat_grad,
)

# -- flip and reverse_sequence --------------------------------------------------------------------


def _infer_flip(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    if x.ndim != -1:
        axes_of(ctx, (ctx.attrs["axis"],), x.ndim)
    return x


def flip_kernel(data, axis):
    return np.flip(data, axis).copy()


flip = register(
    "relax.flip", ("data",), (Attr("axis", at.to_int),), infer=_infer_flip,
    kernel=flip_kernel,
    grad=lambda call, out, g: [R.flip(g, axis=call.attrs["axis"])],
)


def _infer_reverse_sequence(ctx: InferCtx) -> TensorStructInfo:
    x, lengths = ctx.tensor(0), ctx.tensor(1)
    if lengths.ndim not in (-1, 1):
        raise ctx.error(f"seq_lengths must be 1-D, got ndim {lengths.ndim}", 1)
    if lengths.dtype and lengths.dtype not in ("int32", "int64"):
        raise ctx.error(f"seq_lengths must have dtype int32 or int64, got {lengths.dtype}", 1)
    if x.ndim == -1:
        return x
    seq, batch = axes_of(ctx, (ctx.attrs["seq_axis"], ctx.attrs["batch_axis"]), x.ndim, what="seq_axis/batch_axis")
    if x.shape is not None and lengths.shape is not None:
        a, b = lengths.shape[0], x.shape[batch]
        if isinstance(a, int) and isinstance(b, int) and a != b:
            raise ctx.error(f"seq_lengths has {a} entries but data.shape[{batch}] is {b}", 1)
    return x


def reverse_sequence_kernel(data, seq_lengths, seq_axis=1, batch_axis=0):
    seq_axis, batch_axis = seq_axis % data.ndim, batch_axis % data.ndim
    n = data.shape[seq_axis]
    lengths = np.clip(np.asarray(seq_lengths, np.int64), 0, n)
    pos = np.arange(n)
    # Position p of batch b reads L_b - 1 - p while p < L_b, else itself.
    src = np.where(pos[None, :] < lengths[:, None], lengths[:, None] - 1 - pos[None, :], pos[None, :])
    shape = [1] * data.ndim
    shape[batch_axis], shape[seq_axis] = data.shape[batch_axis], n
    order = (0, 1) if batch_axis < seq_axis else (1, 0)
    src = np.transpose(src, order).reshape(shape)
    return np.take_along_axis(data, np.broadcast_to(src, data.shape), axis=seq_axis)


reverse_sequence = register(
    "relax.reverse_sequence",
    ("data", "seq_lengths"),
    (Attr("seq_axis", at.to_int, 1), Attr("batch_axis", at.to_int, 0)),
    infer=_infer_reverse_sequence,
    kernel=reverse_sequence_kernel,
    # Reversing the first L entries is its own inverse: the adjoint reverses g the same way.
    grad=lambda call, out, g: [R.reverse_sequence(g, call.args[1], **call.attrs), None],
)
