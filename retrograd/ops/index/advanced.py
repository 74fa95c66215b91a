"""Advanced indexing and slice writes: index_tensor, index_put, slice_scatter, dynamic_strided_slice (+ backward)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import GradientError, KernelError
from retrograd.ir.expr import PrimValue, Tuple, TupleGetItem, const, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_int_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.rule_helpers import scalar
from retrograd.ops.create import prim_arg
from retrograd.ops.kernels.index import checked_indices
from retrograd.ops.registry import Arg, Attr, InferCtx, register
from retrograd.ops.shape_utils import axes_of


def _index_fields(ctx: InferCtx, i: int) -> list[TensorStructInfo]:
    """The index tensors: a tuple's fields (a lone tensor counts as one), each of an integer dtype."""
    s = ctx.sinfo[i]
    fields = list(s.fields) if isinstance(s, TupleStructInfo) else [s]
    for k, f in enumerate(fields):
        if not isinstance(f, TensorStructInfo):
            raise ctx.error(f"expects index tensors; field {k} is {f}", i)
        if f.dtype and not is_int_dtype(f.dtype):
            raise ctx.error(f"index tensor {k} must have an integer dtype, got {f.dtype}", i)
    if not fields:
        raise ctx.error("needs at least one index tensor", i)
    return fields


def _broadcast_all(ctx: InferCtx, fields, arg: int):
    """The broadcast shape of the index tensors; None when some shape is unknown or two symbolic dims
    may differ (TVM then gives up on the shape too). Two different static sizes are an error."""
    if any(f.shape is None for f in fields):
        return None
    out: list = [1] * max(len(f.shape) for f in fields)
    for f in fields:
        for k, d in enumerate(reversed(f.shape)):
            i = len(out) - 1 - k
            cur = out[i]
            if cur == 1 or cur == d:
                out[i] = d
            elif d == 1:
                continue
            elif isinstance(cur, int) and isinstance(d, int):
                raise ctx.error(f"index tensors cannot be broadcast together ({cur} vs {d} at axis {i})", arg)
            else:
                return None
    return tuple(out)


def _coords(op, data, indices):
    indices = indices if isinstance(indices, tuple) else (indices,)
    return tuple(checked_indices(op, idx, data.shape[a], "fast", a)[0] for a, idx in enumerate(indices))


# -- index_tensor ---------------------------------------------------------------------------------


def _infer_index_tensor(ctx: InferCtx) -> TensorStructInfo:
    data = ctx.tensor(0)
    fields = _index_fields(ctx, 1)
    if data.ndim != -1 and len(fields) > data.ndim:
        raise ctx.error(f"{len(fields)} index tensors for a tensor of ndim {data.ndim}", 1)
    shape = _broadcast_all(ctx, fields, 1)
    if data.ndim == -1 or shape is None:
        return TensorStructInfo(None, data.dtype, -1)
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, len(shape) + data.ndim - len(fields))
    return TensorStructInfo(shape + data.shape[len(fields) :], data.dtype)


def _index_tensor_grad(call, out, g):
    """Accumulate g into zeros at the indexed positions (index_put with accumulate). With fewer index
    tensors than dimensions, the trailing dimensions are spelled out as broadcast aranges first."""
    data, indices = call.args
    fields = list(indices.fields) if isinstance(indices, Tuple) else [TupleGetItem(indices, i) for i in range(len(indices.struct_info.fields))]
    ndim = data.struct_info.ndim
    if len(fields) < ndim:
        shape, lead = data.struct_info.shape, out.struct_info.shape
        if shape is None or lead is None or not all(isinstance(d, int) for d in shape):
            raise GradientError("R.index_tensor: the gradient needs static shapes when fewer indices than dims", call.span)
        n_lead = len(lead) - (ndim - len(fields))
        fields = [R.reshape(f, shape_expr(tuple(f.struct_info.shape) + (1,) * (ndim - len(fields)))) if f.struct_info.shape is not None else f for f in fields]
        for a in range(len(fields), ndim):
            tail = [1] * (len(lead) - n_lead)
            tail[a - (ndim - (len(lead) - n_lead))] = shape[a]
            fields.append(const(np.arange(shape[a]).reshape(tail), "int64"))
    return [R.index_put(R.zeros_like(data), Tuple(fields), g, accumulate=True), None]


def index_tensor_kernel(data, indices):
    return np.array(data[_coords("R.index_tensor", data, indices)])


index_tensor = register(
    "relax.index_tensor",
    ("data", Arg("indices", "tuple")),
    infer=_infer_index_tensor,
    kernel=index_tensor_kernel,
    grad=_index_tensor_grad,
)

# -- index_put ------------------------------------------------------------------------------------


def _infer_index_put(ctx: InferCtx) -> TensorStructInfo:
    data, values = ctx.tensor(0), ctx.tensor(2)
    fields = _index_fields(ctx, 1)
    if data.ndim == -1:
        return data
    for k, f in enumerate(fields):
        if f.ndim == 0:
            raise ctx.error(f"index tensor {k} must have at least one dimension", 1)
    if len(fields) != data.ndim:
        raise ctx.error(f"needs one index tensor per dimension: {len(fields)} for a tensor of ndim {data.ndim}", 1)
    if data.dtype and values.dtype and data.dtype != values.dtype:
        raise ctx.error(f"data and values must have the same dtype, got {data.dtype} and {values.dtype}", 2)
    shape = _broadcast_all(ctx, fields, 1)
    if shape is not None and values.shape is not None:
        pairs = list(zip(reversed(shape), reversed(values.shape)))
        static_clash = any(isinstance(d, int) and isinstance(v, int) and v not in (1, d) for d, v in pairs)
        if static_clash or len(values.shape) > len(shape):
            raise ctx.error(f"values of shape {list(values.shape)} do not broadcast to the indexed shape {list(shape)}", 2)
    return data


def index_put_kernel(data, indices, values, accumulate=False):
    out = data.copy()
    coords = _coords("R.index_put", data, indices)
    if accumulate:
        np.add.at(out, coords, values)
    else:
        out[coords] = values
    return out


def _index_put_grad(call, out, g):
    """values read g where they were written; data keeps g except where it was overwritten. Without
    accumulate, of duplicate indices only the last write lands and only it gets g (PyTorch hands g to
    every duplicate; we keep that rule only when the indexed shape is symbolic)."""
    data, indices, values = call.args
    landed = R.index_tensor(g, indices)
    if call.attrs["accumulate"]:
        return [g, None, landed]
    kept = R.index_put(g, indices, R.zeros_like(values), accumulate=False)
    s = indices.struct_info
    shapes = [f.shape for f in (s.fields if isinstance(s, TupleStructInfo) else [s])]
    if all(sh is not None and all(isinstance(d, int) for d in sh) for sh in shapes):
        shape = np.broadcast_shapes(*(tuple(sh) for sh in shapes))
        # Write each position's id, read the ids back: a write landed where it reads its own id.
        ids = const(np.arange(1, math.prod(shape) + 1).reshape(shape), data.struct_info.dtype)
        won = R.equal(R.index_tensor(R.index_put(R.zeros_like(data), indices, ids), indices), ids)
        landed = R.where(won, landed, scalar(0, g))
    return [kept, None, landed]


index_put = register(
    "relax.index_put",
    ("data", Arg("indices", "tuple"), "values"),
    (Attr("accumulate", at.to_bool, False),),
    infer=_infer_index_put,
    kernel=index_put_kernel,
    grad=_index_put_grad,
)

# -- slice_scatter --------------------------------------------------------------------------------


def _infer_slice_scatter(ctx: InferCtx) -> TensorStructInfo:
    data, src = ctx.tensor(0), ctx.tensor(1)
    start, end, step = (prim_arg(ctx, i) for i in (2, 3, 4))
    for i, p in zip((2, 3, 4), (start, end, step)):
        if not is_int_dtype(p.dtype):
            raise ctx.error(f"expects an integer, got dtype {p.dtype}", i)
    if data.ndim == -1:
        return data
    (axis,) = axes_of(ctx, (ctx.attrs["axis"],), data.ndim)
    if src.ndim != -1 and src.ndim != data.ndim:
        raise ctx.error(f"src must have the rank of data ({data.ndim}), got {src.ndim}", 1)
    if data.dtype and src.dtype and data.dtype != src.dtype:
        raise ctx.error(f"data and src must have the same dtype, got {data.dtype} and {src.dtype}", 1)
    b, e, s = start.value, end.value, step.value
    if s is not None and s < 1:
        raise ctx.error(f"step must be >= 1, got {s}", 4)
    if b is not None and e is not None and e < b:
        raise ctx.error(f"start ({b}) must be <= end ({e})", 3)
    if data.shape is not None and src.shape is not None:
        for i, (d, w) in enumerate(zip(data.shape, src.shape)):
            if i != axis and isinstance(d, int) and isinstance(w, int) and d != w:
                raise ctx.error(f"src must match data off the scatter axis {axis}; dimension {i} is {w}, data's {d}", 1)
        if None not in (b, e, s) and isinstance(src.shape[axis], int) and src.shape[axis] != -(-(e - b) // s):
            raise ctx.error(f"src has {src.shape[axis]} elements along axis {axis}, the slice {b}:{e}:{s} has {-(-(e - b) // s)}", 1)
    return data


def slice_scatter_kernel(input_tensor, src, start, end, step, axis=0):
    axis %= input_tensor.ndim
    if not 0 <= start <= end <= input_tensor.shape[axis]:
        raise KernelError(f"R.slice_scatter: slice {start}:{end} out of range for axis {axis} of size {input_tensor.shape[axis]}")
    out = input_tensor.copy()
    index = [slice(None)] * out.ndim
    index[axis] = slice(start, end, step)
    out[tuple(index)] = src
    return out


def _slice_scatter_grad(call, out, g):
    data, src, start, end, step = call.args
    axis = call.attrs["axis"]
    if not all(isinstance(p, PrimValue) for p in (start, end, step)):
        raise GradientError("R.slice_scatter: the gradient needs literal start, end and step", call.span)
    kept = R.slice_scatter(g, R.zeros_like(src), start, end, step, axis=axis)
    written = R.strided_slice(g, axes=[axis], begin=[start.value], end=[end.value], strides=[step.value])
    return [kept, written, None, None, None]


slice_scatter = register(
    "relax.slice_scatter",
    ("input_tensor", "src", Arg("start", "prim"), Arg("end", "prim"), Arg("step", "prim")),
    (Attr("axis", at.to_int, 0),),
    infer=_infer_slice_scatter,
    kernel=slice_scatter_kernel,
    grad=_slice_scatter_grad,
)

# -- dynamic_strided_slice --------------------------------------------------------------------------


def _check_slice_values(ctx: InferCtx, x: TensorStructInfo, first: int) -> None:
    """begin, end, strides at arguments first..first + 2: 1-D integer tensors, one value per dim of x."""
    for i in range(first, first + 3):
        t = ctx.tensor(i)
        if t.ndim not in (1, -1):
            raise ctx.error(f"expects a 1-D tensor of values, got ndim {t.ndim}", i)
        if t.dtype and not is_int_dtype(t.dtype):
            raise ctx.error(f"expects an integer tensor, got dtype {t.dtype}", i)
        if x.ndim != -1 and t.shape is not None and isinstance(t.shape[0], int) and t.shape[0] != x.ndim:
            raise ctx.error(f"needs one value per dimension of x ({x.ndim}), got {t.shape[0]}", i)


def _infer_dynamic_strided_slice(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    _check_slice_values(ctx, x, 1)
    # The sizes depend on the values of begin/end/strides: only the ndim is known.
    return TensorStructInfo(None, x.dtype, x.ndim)


def _slices(begin, end, strides, who: str) -> tuple:
    if np.any(np.asarray(strides) == 0):
        raise KernelError(f"{who}: strides must be non-zero")
    # Python slices clamp out-of-range begin/end the way TVM's strided_slice does.
    return tuple(slice(int(b), int(e), int(s)) for b, e, s in zip(begin, end, strides))


def dynamic_strided_slice_kernel(x, begin, end, strides):
    return np.array(x[_slices(begin, end, strides, "R.dynamic_strided_slice")])


def _dynamic_strided_slice_grad(call, out, g):
    # The slice's extent is known only at run time: a backward op scatters g into zeros shaped like x.
    return [R.grad.dynamic_strided_slice_backward(g, *call.args), None, None, None]


dynamic_strided_slice = register(
    "relax.dynamic_strided_slice",
    ("x", "begin", "end", "strides"),
    infer=_infer_dynamic_strided_slice,
    kernel=dynamic_strided_slice_kernel,
    grad=_dynamic_strided_slice_grad,
)


def _infer_dynamic_strided_slice_backward(ctx: InferCtx) -> TensorStructInfo:
    g, x = ctx.tensor(0), ctx.tensor(1)
    _check_slice_values(ctx, x, 2)
    if g.ndim != -1 and x.ndim != -1 and g.ndim != x.ndim or g.dtype and x.dtype and g.dtype != x.dtype:
        raise ctx.error(f"output_grad must have the rank and dtype of x ({x.ndim}-D {x.dtype}), got {g}", 0)
    return x


def dynamic_strided_slice_backward_kernel(output_grad, x, begin, end, strides):
    """Zeros shaped like x with output_grad written at the sliced positions."""
    out = np.zeros(np.shape(x), np.asarray(x).dtype)
    index = _slices(begin, end, strides, "R.grad.dynamic_strided_slice_backward")
    if out[index].shape != np.shape(output_grad):
        raise KernelError(f"R.grad.dynamic_strided_slice_backward: output_grad has shape {np.shape(output_grad)}, "
                          f"the slice {out[index].shape}")
    out[index] = output_grad
    return out


dynamic_strided_slice_backward = register(
    "relax.grad.dynamic_strided_slice_backward",
    ("output_grad", "x", "begin", "end", "strides"),
    infer=_infer_dynamic_strided_slice_backward,
    kernel=dynamic_strided_slice_backward_kernel,
    # Linear in output_grad: its adjoint reads the slice back. x only gives the shape.
    grad=lambda call, out, g: [R.dynamic_strided_slice(g, *call.args[2:]), None, None, None, None],
)
