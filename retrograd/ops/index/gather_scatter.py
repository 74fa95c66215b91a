"""Element and N-d gathers and scatters: gather_elements, gather_nd, scatter_elements, scatter_nd."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import Tuple, const
from retrograd.ir.struct_info import TensorStructInfo, is_int_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import scatter as kernels
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.rule_helpers import scalar
from retrograd.ops.shape_utils import axes_of


def index_tensor(ctx: InferCtx, i: int, int64: bool = False) -> TensorStructInfo:
    """Argument i as an integer tensor (TVM's gather_nd insists on int64)."""
    t = ctx.tensor(i)
    if t.dtype and (t.dtype != "int64" if int64 else not is_int_dtype(t.dtype)):
        raise ctx.error(f"expects {'an int64' if int64 else 'an integer'} tensor, got dtype {t.dtype}", i)
    return t


def _same_dims(ctx: InferCtx, a: TensorStructInfo, b: TensorStructInfo, arg: int, what: str) -> None:
    if a.shape is None or b.shape is None:
        return
    for x, y in zip(a.shape, b.shape):
        if isinstance(x, int) and isinstance(y, int) and x != y:
            raise ctx.error(f"{what}: shapes {list(a.shape)} and {list(b.shape)} differ", arg)


# -- element gathers and scatters ----------------------------------------------------------------


def _infer_gather_elements(ctx: InferCtx) -> TensorStructInfo:
    data, idx = ctx.tensor(0), index_tensor(ctx, 1)
    if data.ndim == -1 or idx.ndim == -1:
        return TensorStructInfo(None, data.dtype, -1)
    axes_of(ctx, (ctx.attrs["axis"],), data.ndim)
    if data.ndim != idx.ndim:
        raise ctx.error(f"data and indices must have the same rank, got {data.ndim} and {idx.ndim}")
    return TensorStructInfo(idx.shape, data.dtype, idx.ndim)


def _infer_scatter_elements(ctx: InferCtx) -> TensorStructInfo:
    data, idx, upd = ctx.tensor(0), index_tensor(ctx, 1), ctx.tensor(2)
    if data.ndim == -1:
        return data
    if idx.ndim != -1 and upd.ndim != -1:
        if data.ndim != idx.ndim or idx.ndim != upd.ndim:
            raise ctx.error(f"data, indices and updates must have the same rank, got {data.ndim}, {idx.ndim}, {upd.ndim}")
    if data.dtype and upd.dtype and data.dtype != upd.dtype:
        raise ctx.error(f"data and updates must have the same dtype, got {data.dtype} and {upd.dtype}", 2)
    axes_of(ctx, (ctx.attrs["axis"],), data.ndim)
    _same_dims(ctx, idx, upd, 2, "indices and updates must have the same shape")
    return data


def _scatter_grad(gather, updates_grad_args):
    """update: data keeps g outside the written positions; add: all of g. Updates read g where they
    land; under update, an update overwritten by a later duplicate gets none (exact, where PyTorch's
    rule hands g to every duplicate; we keep PyTorch's rule only when the updates' shape is symbolic).
    max / min and mul: PyTorch's scatter_reduce rules (amax / amin share g evenly among the values equal
    to the result, data included; prod divides the result by each factor, zeros handled)."""

    def grad(call, out, g):
        data, idx, upd = call.args
        reduction = call.attrs["reduction"]
        extra = updates_grad_args(call)
        if reduction in ("max", "min", "mul"):
            return _reducing_scatter_grad(call, out, g, lambda x: gather(x, idx, **extra))
        if reduction not in ("update", "add"):
            raise GradientError(f"{call.op.script_name}: no gradient for reduction {reduction!r} (TVM's halving mean)", call.span)
        landed = gather(g, idx, **extra)
        if reduction == "add":
            return [g, None, landed]
        d = call.op(g, idx, R.zeros_like(upd), **call.attrs)
        shape = upd.struct_info.shape
        if shape is not None and all(isinstance(n, int) for n in shape):
            # Scatter each update's id, read the ids back: an update won where it reads its own id.
            ids = const(np.arange(1, math.prod(shape) + 1).reshape(shape), upd.struct_info.dtype)
            won = R.equal(gather(call.op(R.zeros_like(data), idx, ids, **call.attrs), idx, **extra), ids)
            landed = R.where(won, landed, R.zeros_like(upd))
        return [d, None, landed]

    return grad


def _reducing_scatter_grad(call, out, g, gather):
    data, idx, upd = call.args
    dtype = out.struct_info.dtype
    one, zero = scalar(1, out), scalar(0, out)

    def scatter(base, updates, reduction):
        return call.op(base, idx, updates, **{**call.attrs, "reduction": reduction})

    if call.attrs["reduction"] != "mul":
        data_ties = R.astype(R.equal(data, out), dtype=dtype)
        upd_ties = R.astype(R.equal(upd, gather(out)), dtype=dtype)
        share = R.divide(g, R.maximum(scatter(data_ties, upd_ties, "add"), one))
        return [R.multiply(data_ties, share), None, R.multiply(upd_ties, gather(share))]
    # A factor's gradient is the product of the others: result / factor, or, for the only zero at its
    # position, the product with that zero replaced by one (two zeros: 0).
    free_data = R.where(R.equal(data, zero), one, data)
    data_grad = R.divide(R.multiply(g, scatter(free_data, upd, "mul")), free_data)
    upd_zero = R.equal(upd, zero)
    lone_zero = R.logical_and(upd_zero, R.equal(gather(scatter(R.zeros_like(data), R.astype(upd_zero, dtype=dtype), "add")), one))
    without_it = gather(R.multiply(g, scatter(data, R.where(lone_zero, one, upd), "mul")))
    upd_grad = R.where(lone_zero, without_it, R.divide(gather(R.multiply(g, out)), R.where(upd_zero, one, upd)))
    return [data_grad, None, upd_grad]


def _gather_elements_grad(call, out, g):
    data, idx = call.args
    return [R.scatter_elements(R.zeros_like(data), idx, g, axis=call.attrs["axis"], reduction="add"), None]


gather_elements = register(
    "relax.gather_elements",
    ("data", "indices"),
    (Attr("axis", at.to_int, 0),),
    infer=_infer_gather_elements,
    kernel=kernels.gather_elements,
    grad=_gather_elements_grad,
)
scatter_elements = register(
    "relax.scatter_elements",
    ("data", "indices", "updates"),
    (Attr("axis", at.to_int, 0), Attr("reduction", at.one_of("update", "add", "mul", "mean", "min", "max"), "update")),
    infer=_infer_scatter_elements,
    kernel=kernels.scatter_elements,
    grad=_scatter_grad(R.gather_elements, lambda call: {"axis": call.attrs["axis"]}),
)

# -- N-d gathers and scatters --------------------------------------------------------------------


def _infer_gather_nd(ctx: InferCtx) -> TensorStructInfo:
    data, idx = ctx.tensor(0), index_tensor(ctx, 1, int64=True)
    b = ctx.attrs["batch_dims"]
    if b < 0:
        raise ctx.error(f"batch_dims must be >= 0, got {b}")
    if data.ndim == -1 or idx.ndim == -1:
        return TensorStructInfo(None, data.dtype, -1)
    if b > data.ndim:
        raise ctx.error(f"batch_dims must be in [0, data.ndim={data.ndim}], got {b}")
    if b > idx.ndim - 1:
        raise ctx.error(f"batch_dims cannot exceed indices.ndim - 1 = {idx.ndim - 1}, got {b}")
    if idx.shape is None or not isinstance(idx.shape[-1], int):
        return TensorStructInfo(None, data.dtype, -1)
    m = idx.shape[-1]
    if m > data.ndim - b:
        raise ctx.error(f"the last dimension of indices ({m}) exceeds the rank of data minus batch_dims ({data.ndim - b})", 1)
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, idx.ndim - 1 + data.ndim - b - m)
    return TensorStructInfo(idx.shape[:-1] + data.shape[b + m :], data.dtype)


def _infer_scatter_nd(ctx: InferCtx) -> TensorStructInfo:
    data, idx, upd = ctx.tensor(0), index_tensor(ctx, 1), ctx.tensor(2)
    if not data.dtype or not upd.dtype:
        raise ctx.error("data and updates must have known dtypes")
    if data.dtype != upd.dtype:
        raise ctx.error(f"data and updates must have the same dtype, got {data.dtype} and {upd.dtype}", 2)
    if data.shape is not None and idx.shape is not None and upd.shape is not None:
        k = idx.shape[-1] if idx.shape else None
        if not isinstance(k, int):
            raise ctx.error(f"needs a static last axis of indices, got {list(idx.shape)}", 1)
        if k > data.ndim:
            raise ctx.error(f"the last axis of indices ({k}) exceeds the rank of data ({data.ndim})", 1)
        expected = idx.shape[:-1] + data.shape[k:]
        if len(expected) != len(upd.shape):
            raise ctx.error(f"updates must have rank {len(expected)} (indices.shape[:-1] + data.shape[{k}:])", 2)
        _same_dims(ctx, TensorStructInfo(expected, upd.dtype), upd, 2, "updates must be indices.shape[:-1] + data.shape[k:]")
    return data


def _gather_nd_grad(call, out, g):
    data, idx = call.args
    b = call.attrs["batch_dims"]
    if b:
        # Spell the batch coordinates out as leading index columns: a plain (batch_dims=0) scatter.
        shape = idx.struct_info.shape
        if shape is None or not all(isinstance(n, int) for n in shape):
            raise GradientError("R.gather_nd: the gradient with batch_dims needs static index shapes", call.span)
        lead = tuple(shape[:-1])
        grids = np.stack([np.broadcast_to(np.arange(lead[i]).reshape((-1,) + (1,) * (len(lead) - i - 1)), lead) for i in range(b)], -1)
        idx = R.concat(Tuple([const(grids.astype("int64"), "int64"), R.astype(idx, "int64")]), axis=-1)
    return [R.scatter_nd(R.zeros_like(data), idx, g, reduction="add"), None]


gather_nd = register(
    "relax.gather_nd",
    ("data", "indices"),
    (Attr("batch_dims", at.to_int, 0),),
    infer=_infer_gather_nd,
    kernel=kernels.gather_nd,
    grad=_gather_nd_grad,
)
scatter_nd = register(
    "relax.scatter_nd",
    ("data", "indices", "updates"),
    (Attr("reduction", at.one_of("update", "add", "mul", "min", "max"), "update"),),
    infer=_infer_scatter_nd,
    kernel=kernels.scatter_nd,
    grad=_scatter_grad(R.gather_nd, lambda call: {}),
)
