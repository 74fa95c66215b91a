"""Loss ops: nn.nll_loss and nn.cross_entropy_with_logits (inference, kernels, gradients)."""

from __future__ import annotations

from retrograd.ir.expr import const
from retrograd.ir.struct_info import TensorStructInfo, is_int_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import activation as act_kernels
from retrograd.ops.kernels import loss as loss_kernels
from retrograd.ops.index.take_slice import in_range_indices
from retrograd.ops.cost import REDUCE, Cost, input_elements, times
from retrograd.ops.registry import Arg, Attr, InferCtx, register
from retrograd.ops.runtime_dims import axis_length
from retrograd.ops.shape_utils import same_dtype

NLL_ATTRS = (
    Attr("reduction", at.one_of("mean", "sum", "none"), "mean"),
    Attr("ignore_index", at.to_int, -100),
)


def _dims_agree(a, b) -> bool:
    return not (isinstance(a, int) and isinstance(b, int) and a != b)


def nll_output(ctx: InferCtx, p: int, t: int, w: int | None) -> TensorStructInfo:
    """nll_loss's result for predictions, targets and optional weights at argument positions p, t, w.

    Predictions are (N, C, d1, ..., dk) with targets (N, d1, ..., dk), or (C,) with a scalar target
    (the no-batch form); weights are (C,).
    """
    pred, tgt = ctx.tensor(p), ctx.tensor(t)
    if pred.ndim == 0:
        raise ctx.error("predictions must be (C,) or (N, C, d1, ...), got a scalar", p)
    if tgt.dtype and not is_int_dtype(tgt.dtype):
        raise ctx.error(f"targets must have an integer dtype, got {tgt.dtype}", t)
    if pred.ndim != -1 and tgt.ndim != -1 and tgt.ndim != pred.ndim - 1:
        raise ctx.error(f"targets must have {pred.ndim - 1} dimensions for {pred.ndim}-D predictions, got {tgt.ndim}", t)
    classes = None
    if pred.shape is not None:
        classes = pred.shape[0] if pred.ndim == 1 else pred.shape[1]
        if tgt.shape is not None and pred.ndim >= 2:
            expect = (pred.shape[0],) + pred.shape[2:]
            if not all(_dims_agree(a, b) for a, b in zip(tgt.shape, expect)):
                dims = ", ".join(str(d) for d in expect)
                raise ctx.error(f"targets must have shape ({dims}{',' if len(expect) == 1 else ''}) "
                                "(batch, then the predictions' spatial dims)", t)
    dtype = pred.dtype
    if w is not None:
        weights = ctx.tensor(w)
        if weights.ndim not in (-1, 1):
            raise ctx.error(f"weights must be 1-D (one per class), got {weights.ndim}-D", w)
        if weights.shape is not None and classes is not None and not _dims_agree(weights.shape[0], classes):
            raise ctx.error(f"weights must have one entry per class ({classes}), got {weights.shape[0]}", w)
        dtype = same_dtype(pred, weights)
        if dtype is None:
            raise ctx.error(f"weights must have the predictions' dtype {pred.dtype}, got {weights.dtype}", w)
    if ctx.attrs["reduction"] != "none":
        return TensorStructInfo((), dtype)
    if tgt.shape is not None:
        return TensorStructInfo(tgt.shape, dtype)
    ndim = tgt.ndim if tgt.ndim != -1 else (pred.ndim - 1 if pred.ndim != -1 else -1)
    return TensorStructInfo(None, dtype, ndim)


def _nll_loss_infer(ctx: InferCtx) -> TensorStructInfo:
    return nll_output(ctx, 0, 1, 2 if len(ctx.sinfo) > 2 else None)


def _nll_loss_grad(call, out, g):
    # Predictions: the explicit backward op (as TVM), -w[t] * g at each target class. Targets are
    # indices. Class weights get their true gradient (PyTorch and TVM treat them as constants).
    predictions, targets, *weights = call.args
    dpred = R.grad.nll_loss_backward(g, predictions, targets, *weights, **call.attrs)
    return [dpred, None] + ([_nll_weight_grad(call, out, g)] if weights else [])


def _nll_weight_grad(call, out, g):
    """d loss / d w[c] = sum over entries i with target c of coef_i, scattered by take_backward, with
    l_i = -p[i, t_i] (0 where ignored): coef_i = g * l_i for sum and none; for mean, loss = A / B with
    B = sum of w[t_i] over valid entries, so coef_i = g * (l_i - loss * valid_i) / B."""
    pred, targets, w = call.args
    reduction, ignore = call.attrs["reduction"], call.attrs["ignore_index"]
    per_entry = R.nn.nll_loss(pred, targets, reduction="none", ignore_index=ignore)
    if reduction == "mean":
        ones = R.ones_like(pred)
        valid = R.negative(R.nn.nll_loss(ones, targets, reduction="none", ignore_index=ignore))
        total = R.negative(R.nn.nll_loss(ones, targets, w, reduction="sum", ignore_index=ignore))
        coef = R.divide(R.multiply(g, R.subtract(per_entry, R.multiply(out, valid))), total)
    else:
        coef = R.multiply(g, per_entry)
    # Ignored entries have coef 0; clipping only keeps their (maybe out-of-range) class readable.
    shape = w.struct_info.shape
    rows = in_range_indices(targets, shape[0] if shape is not None else None, "clip")
    if rows is None:
        return R.grad.take_backward(coef, w, targets, axis=0, mode="clip")
    return R.grad.take_backward(coef, w, rows, axis=0)


nll_loss = register(
    "relax.nn.nll_loss",
    ("predictions", "targets", Arg("weights", optional=True)),
    NLL_ATTRS,
    infer=_nll_loss_infer,
    kernel=loss_kernels.nll_loss,
    grad=_nll_loss_grad,
    cost=REDUCE,
)


def _cross_entropy_infer(ctx: InferCtx) -> TensorStructInfo:
    x, y = ctx.tensor(0), ctx.tensor(1)
    dtype = same_dtype(x, y)
    if dtype is None:
        raise ctx.error(f"predictions and labels must have the same dtype, got {x.dtype} and {y.dtype}")
    if x.ndim == 0 or y.ndim == 0:
        raise ctx.error("predictions and labels must have at least one dimension")
    if x.ndim != -1 and y.ndim != -1 and x.ndim != y.ndim:
        raise ctx.error("predictions and labels must have the same shape")
    if x.shape is not None and y.shape is not None and not all(_dims_agree(a, b) for a, b in zip(x.shape, y.shape)):
        raise ctx.error("predictions and labels must have the same shape")
    return TensorStructInfo((), dtype)


def _cross_entropy_grad(call, out, g):
    # d/dx of -sum(x * y) / N is -y / N, and symmetrically for y (TVM's rule).
    x, y = call.args
    if x.struct_info.ndim > 1:
        n = x.struct_info.shape[0] if x.struct_info.shape is not None else None
        dtype = out.struct_info.dtype
        # A symbolic batch size is counted at run time.
        count = const(n, dtype) if isinstance(n, int) else R.astype(axis_length(x, 0), dtype)
        g = R.divide(g, count)
    ng = R.negative(g)
    return [R.multiply(ng, y), R.multiply(ng, x)]


cross_entropy_with_logits = register(
    "relax.nn.cross_entropy_with_logits",
    ("predictions", "labels"),
    infer=_cross_entropy_infer,
    kernel=act_kernels.cross_entropy_with_logits,
    grad=_cross_entropy_grad,
    cost=Cost("reduce", times(5.0, input_elements)),
)
