"""Loss functions as IR, and `append_loss`, which joins one to a backbone function as `<name>_loss`."""

from __future__ import annotations

import numpy as np

from retrograd.errors import TrainingError
from retrograd.ir.block import VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.copy import fresh_var
from retrograd.ir.expr import Expr, Function, Tuple, TupleGetItem, Var, const
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ir.text import format_sinfo
from retrograd.ops.api import R
from retrograd.training.inline import inline_body

REDUCTIONS = ("mean", "sum", "none")


class Loss:
    """A loss of a prediction and targets: declares the targets' types and emits its bindings."""

    name = "loss"

    def __init__(self, reduction: str = "mean"):
        if reduction not in REDUCTIONS:
            raise TrainingError(f"{self.name}: unknown reduction {reduction!r} (reductions: {', '.join(REDUCTIONS)})")
        self.reduction = reduction

    def target_sinfo(self, pred: TensorStructInfo) -> TensorStructInfo:
        """The struct info of the targets for predictions `pred` (default: the same as the predictions)."""
        return pred

    def emit(self, bb: BlockBuilder, pred: Expr, target: Expr) -> Expr:  # pragma: no cover - overridden
        raise NotImplementedError

    def _reduce(self, bb: BlockBuilder, per_element: Expr) -> Expr:
        if self.reduction == "mean":
            return bb.emit(R.mean(per_element), "loss")
        if self.reduction == "sum":
            return bb.emit(R.sum(per_element), "loss")
        return per_element

    def __repr__(self) -> str:
        return f"{type(self).__name__}(reduction={self.reduction!r})"


class MSELoss(Loss):
    """Mean squared error `(p - y)**2`, as torch.nn.MSELoss."""

    name = "mse"

    def emit(self, bb, pred, target):
        diff = bb.emit(R.subtract(pred, target), "diff")
        return self._reduce(bb, bb.emit(R.multiply(diff, diff), "sq"))


class L1Loss(Loss):
    """Mean absolute error `|p - y|`, as torch.nn.L1Loss."""

    name = "l1"

    def emit(self, bb, pred, target):
        diff = bb.emit(R.subtract(pred, target), "diff")
        return self._reduce(bb, bb.emit(R.abs(diff), "absdiff"))


class HuberLoss(Loss):
    """`0.5 d**2` where `|d| < delta`, else `delta * (|d| - 0.5 delta)`, as torch.nn.HuberLoss."""

    name = "huber"

    def __init__(self, delta: float = 1.0, reduction: str = "mean"):
        super().__init__(reduction)
        if not delta > 0:
            raise TrainingError(f"huber: delta must be positive, got {delta}")
        self.delta = float(delta)

    def emit(self, bb, pred, target):
        dtype = pred.struct_info.dtype
        d = bb.emit(R.subtract(pred, target), "diff")
        a = bb.emit(R.abs(d), "absdiff")
        quad = bb.emit(R.multiply(bb.emit(R.multiply(d, d)), const(0.5, dtype)), "quad")
        lin = bb.emit(R.multiply(bb.emit(R.subtract(a, const(0.5 * self.delta, dtype))), const(self.delta, dtype)), "lin")
        small = bb.emit(R.less(a, const(self.delta, dtype)), "small")
        return self._reduce(bb, bb.emit(R.where(small, quad, lin), "huber"))


class NLLLoss(Loss):
    """Negative log-likelihood of log-probabilities (N, C, d...) at integer targets (N, d...), as torch.nn.NLLLoss."""

    name = "nll"

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", target_dtype: str = "int64"):
        super().__init__(reduction)
        self.weight = None if weight is None else np.asarray(weight)
        if self.weight is not None and self.weight.ndim != 1:
            raise TrainingError(f"{self.name}: class weights must be 1-D, got shape {self.weight.shape}")
        self.ignore_index = int(ignore_index)
        self.target_dtype = target_dtype

    def target_sinfo(self, pred):
        if pred.ndim == -1:
            return TensorStructInfo(None, self.target_dtype, -1)
        if pred.ndim == 0:
            raise TrainingError(f"{self.name}: predictions must have a class dimension, got a scalar")
        if pred.shape is None:
            return TensorStructInfo(None, self.target_dtype, pred.ndim - 1)
        shape = () if pred.ndim == 1 else (pred.shape[0],) + tuple(pred.shape[2:])
        return TensorStructInfo(shape, self.target_dtype)

    def _weights(self, pred) -> Expr | None:
        if self.weight is None:
            return None
        classes = pred.struct_info.shape[0 if pred.struct_info.ndim == 1 else 1] if pred.struct_info.shape else None
        if isinstance(classes, int) and classes != self.weight.shape[0]:
            raise TrainingError(f"{self.name}: {self.weight.shape[0]} class weights for {classes} classes")
        return const(self.weight.astype(pred.struct_info.dtype))

    def log_probs(self, bb, pred):
        return pred

    def emit(self, bb, pred, target):
        lp = self.log_probs(bb, pred)
        w = self._weights(pred)
        extra = () if w is None else (w,)
        return bb.emit(R.nn.nll_loss(lp, target, *extra, reduction=self.reduction, ignore_index=self.ignore_index), "loss")


class CrossEntropyLoss(NLLLoss):
    """torch.nn.CrossEntropyLoss: from logits (log_softmax first) or from log-probabilities (`from_logits=False`).

    Targets are class indices (an integer tensor, with `ignore_index` and class `weight`) or, when
    `soft_targets=True`, class probabilities shaped like the predictions. `label_smoothing` mixes
    the one-hot target with the uniform distribution, as PyTorch does.
    """

    name = "cross_entropy"

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0,
                 from_logits: bool = True, soft_targets: bool = False, target_dtype: str = "int64"):
        super().__init__(weight, ignore_index, reduction, target_dtype)
        if not 0.0 <= label_smoothing <= 1.0:
            raise TrainingError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)
        self.from_logits = from_logits
        self.soft_targets = soft_targets

    def target_sinfo(self, pred):
        return pred if self.soft_targets else super().target_sinfo(pred)

    def log_probs(self, bb, pred):
        if not self.from_logits:
            return pred
        axis = 0 if pred.struct_info.ndim == 1 else 1
        return bb.emit(R.nn.log_softmax(pred, axis=axis), "log_probs")

    def emit(self, bb, pred, target):
        if self.soft_targets:
            return self._emit_soft(bb, pred, target)
        if self.label_smoothing == 0.0:
            return super().emit(bb, pred, target)
        return self._emit_smoothed(bb, pred, target)

    def _class_axis(self, pred) -> int:
        return 0 if pred.struct_info.ndim == 1 else 1

    def _weighted_lp(self, bb, pred, lp):
        w = self._weights(pred)
        if w is None:
            return lp
        if pred.struct_info.ndim > 2:  # weights run along axis 1
            w = const(w.data.reshape((-1,) + (1,) * (pred.struct_info.ndim - 2)))
        return bb.emit(R.multiply(lp, w), "weighted")

    def _emit_smoothed(self, bb, pred, target):
        dtype = pred.struct_info.dtype
        eps = self.label_smoothing
        lp = self.log_probs(bb, pred)
        classes = _classes(pred, self._class_axis(pred))
        w = self._weights(pred)
        extra = () if w is None else (w,)
        nll = bb.emit(R.nn.nll_loss(lp, target, *extra, reduction="none", ignore_index=self.ignore_index), "nll")
        kept = bb.emit(R.not_equal(target, const(self.ignore_index, target.struct_info.dtype)), "kept")
        keptf = bb.emit(R.astype(kept, dtype), "kept_f")
        smooth = bb.emit(R.negative(bb.emit(R.sum(self._weighted_lp(bb, pred, lp), axis=[self._class_axis(pred)]))))
        smooth = bb.emit(R.multiply(smooth, keptf), "smooth")
        per = bb.emit(R.add(bb.emit(R.multiply(nll, const(1.0 - eps, dtype))),
                            bb.emit(R.multiply(smooth, const(eps / classes, dtype)))), "per_target")
        if self.reduction == "none":
            return per
        total = bb.emit(R.sum(per), "total")
        if self.reduction == "sum":
            return total
        if w is None:
            denom = bb.emit(R.sum(keptf), "count")
        else:  # the weights of the kept targets, as PyTorch divides by
            safe = bb.emit(R.where(kept, target, const(0, target.struct_info.dtype)))
            denom = bb.emit(R.sum(bb.emit(R.multiply(bb.emit(R.take(w, safe, axis=0)), keptf))), "weight_sum")
        return bb.emit(R.divide(total, denom), "loss")

    def _emit_soft(self, bb, pred, target):
        dtype = pred.struct_info.dtype
        axis = self._class_axis(pred)
        lp = self.log_probs(bb, pred)
        if self.label_smoothing:
            eps = self.label_smoothing
            target = bb.emit(R.add(bb.emit(R.multiply(target, const(1.0 - eps, dtype))),
                                   const(eps / _classes(pred, axis), dtype)), "smoothed")
        prod = bb.emit(R.multiply(self._weighted_lp(bb, pred, lp), target))
        per = bb.emit(R.negative(bb.emit(R.sum(prod, axis=[axis]))), "per_sample")
        if self.reduction == "mean" and pred.struct_info.ndim == 1:
            return bb.emit(R.sum(per), "loss")
        return self._reduce(bb, per)

    def __repr__(self) -> str:
        return (f"CrossEntropyLoss(reduction={self.reduction!r}, label_smoothing={self.label_smoothing}, "
                f"from_logits={self.from_logits}, soft_targets={self.soft_targets})")


def _classes(pred, axis: int) -> int:
    shape = pred.struct_info.shape
    if shape is None or not isinstance(shape[axis], int):
        raise TrainingError("cross_entropy: label smoothing needs a static number of classes, got "
                            f"{format_sinfo(pred.struct_info, brief=True)}")
    return shape[axis]


def append_loss(mod: IRModule, loss: Loss, func: str = "backbone", output_index: int = 0,
                new_name: str | None = None, also_return: list[int] | None = None) -> IRModule:
    """`mod` with `<func>_loss(params..., targets)`: the backbone inlined, then `loss` of its output.

    The backbone returns the prediction (or a tuple whose field `output_index` is the prediction).
    `also_return` (fields of the backbone's tuple) makes the function return `(loss, those fields...)`:
    how training keeps an imported model's new buffer values. The input module is not changed.
    """
    if func not in mod:
        raise TrainingError(f"append_loss: the module has no function '{func}' (functions: {', '.join(mod.keys())})")
    backbone = mod[func]
    params = [fresh_var(p, promote=True) for p in backbone.params]
    bb = BlockBuilder(mod)
    bb.begin_scope()
    result = inline_body(bb, backbone, params)
    pred = result
    if isinstance(pred.struct_info, TupleStructInfo):
        pred = pred.fields[output_index] if isinstance(pred, Tuple) else bb.emit(TupleGetItem(pred, output_index))
    psinfo = pred.struct_info
    if not isinstance(psinfo, TensorStructInfo) or not is_float_dtype(psinfo.dtype or ""):
        raise TrainingError(f"append_loss: '{func}' must return a float tensor prediction, got "
                            f"{format_sinfo(psinfo, brief=True)}")
    target = Var("targets", loss.target_sinfo(psinfo))
    bb.begin_block(dataflow=True)
    out = loss.emit(bb, pred, target)
    if also_return:
        kept = [result.fields[i] if isinstance(result, Tuple) else bb.emit(TupleGetItem(result, i)) for i in also_return]
        out = bb.emit(Tuple([out, *kept]))
    bindings = bb.current_bindings()
    if bindings and bindings[-1].var is out:  # make the last binding the block's output, not an alias of it
        result = Var(out.name_hint, out.struct_info)
        bindings[-1] = VarBinding(result, bindings[-1].value)
    else:
        result = bb.emit_output(out, "loss")
    bb.end_block()
    seq = bb.end_scope(result)
    name = new_name or f"{func}_loss"
    attrs = dict(backbone.attrs)
    if "global_symbol" in attrs:
        attrs["global_symbol"] = name
    return mod.with_function(name, Function(tuple(params) + (target,), seq, seq.struct_info, True, False, attrs))
