"""Negative log-likelihood loss and its gradient (PyTorch semantics: class weights, ignore_index, reductions)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import check_float

_REDUCTIONS = ("mean", "sum", "none")


class _Nll:
    """Predictions as (N, C, D), targets as (N, D) with ignored entries set to class 0, per-entry weights."""

    def __init__(self, op, predictions, targets, weights, reduction, ignore_index):
        pred = np.asarray(predictions)
        tgt = np.asarray(targets)
        check_float(op, "predictions", pred)
        if tgt.dtype.kind not in "iu":
            raise KernelError(f"{op}: targets must have an integer dtype, got {tgt.dtype}")
        if reduction not in _REDUCTIONS:
            raise KernelError(f"{op}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        if pred.ndim == 0:
            raise KernelError(f"{op}: predictions must be (C,) or (N, C, d1, ...), got a scalar")
        # (C,) with a scalar target is the no-batch form: one sample of C classes.
        lead = () if pred.ndim == 1 else (pred.shape[0],)
        expect = lead + pred.shape[2:]
        if tgt.shape != expect:
            raise KernelError(f"{op}: targets have shape {tgt.shape}, expected {expect} for predictions {pred.shape}")
        n = lead[0] if lead else 1
        self.c = c = pred.shape[0] if pred.ndim == 1 else pred.shape[1]
        # Spelled out, not -1: a batch of 0 leaves -1 undetermined.
        d = math.prod(pred.shape[2:])
        self.pred = pred.reshape(n, c, d)
        self.shape, self.tshape, self.dtype = pred.shape, tgt.shape, pred.dtype
        t = tgt.reshape(n, d)
        self.valid = t != ignore_index
        if t.dtype.kind == "u" and t.dtype.itemsize >= np.dtype(np.intp).itemsize:
            t = np.minimum(t, c)  # beyond intp a cast would wrap to a negative class; c stays out of range
        self.t = np.where(self.valid, t, 0).astype(np.intp, copy=False)
        bad = (self.t < 0) | (self.t >= c)
        if bad.any():
            raise KernelError(f"{op}: target {self.t[bad][0]} out of range for {c} classes")
        if weights is None:
            self.w = self.valid.astype(pred.dtype)
        else:
            w = np.asarray(weights)
            check_float(op, "weights", w)
            if w.shape != (c,):
                raise KernelError(f"{op}: weights have shape {w.shape}, expected ({c},)")
            self.w = w.astype(pred.dtype, copy=False)[self.t] * self.valid
        self.reduction = reduction


def _plain_rows(pred, tgt, weights, reduction, ignore_index):
    """Targets of the common case, (N, C) float predictions with in-range (N,) targets, no weights and
    none ignored; None sends the call down the general path (which also reports every error)."""
    if (
        weights is not None
        or pred.ndim != 2
        or tgt.ndim != 1
        or tgt.shape[0] != pred.shape[0]
        or tgt.size == 0
        or tgt.dtype.kind not in "iu"
        or pred.dtype.kind != "f"
        or reduction not in _REDUCTIONS
    ):
        return None
    lo, hi = tgt.min(), tgt.max()
    if lo < 0 or hi >= pred.shape[1] or (lo <= ignore_index <= hi and (tgt == ignore_index).any()):
        return None
    return tgt


def nll_loss(predictions, targets, weights=None, *, reduction="mean", ignore_index=-100):
    """-w[t] * predictions[t] per entry, then reduced; `mean` divides by the weight of non-ignored
    entries, so an all-ignored batch gives nan, as in PyTorch."""
    pred, tgt = np.asarray(predictions), np.asarray(targets)
    t = _plain_rows(pred, tgt, weights, reduction, ignore_index)
    if t is not None:
        picked = pred[np.arange(t.shape[0]), t]
        if reduction == "none":
            return -picked
        total = -picked.sum(dtype=pred.dtype)
        return np.asarray(total / t.shape[0] if reduction == "mean" else total, dtype=pred.dtype)
    s = _Nll("nll_loss", predictions, targets, weights, reduction, ignore_index)
    picked = np.take_along_axis(s.pred, s.t[:, None, :], axis=1)[:, 0, :]
    # Ignored entries read class 0, which may hold -inf: zero them so 0 * -inf makes no nan.
    losses = -s.w * np.where(s.valid, picked, 0)
    if reduction == "none":
        return np.asarray(losses.reshape(s.tshape), order="C")
    total = losses.sum(dtype=s.dtype)
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            total = total / s.w.sum(dtype=s.dtype)
    return np.asarray(total, dtype=s.dtype)


def nll_loss_backward(output_grad, predictions, targets, weights=None, *, reduction="mean", ignore_index=-100):
    """Gradient of nll_loss w.r.t. predictions: -w[t] * g at each target class, 0 elsewhere; zeros when
    every target is ignored under `mean` (PyTorch's backward), not nan."""
    op = "nll_loss_backward"
    pred, g = np.asarray(predictions), np.asarray(output_grad)
    t = _plain_rows(pred, np.asarray(targets), weights, reduction, ignore_index)
    if t is not None and (g.shape == t.shape if reduction == "none" else g.size == 1):
        n = t.shape[0]
        out = np.zeros(pred.shape, pred.dtype)
        coef = g.astype(pred.dtype, copy=False) if reduction == "none" else g.reshape(()).astype(pred.dtype)
        out[np.arange(n), t] = -coef / n if reduction == "mean" else -coef
        return out
    s = _Nll(op, predictions, targets, weights, reduction, ignore_index)
    if reduction == "none":
        if g.shape != s.tshape:
            raise KernelError(f"{op}: output_grad has shape {g.shape}, expected {s.tshape} for reduction 'none'")
        coef = -s.w * g.reshape(s.w.shape)
    else:
        if g.size != 1:
            raise KernelError(f"{op}: output_grad must be a scalar for reduction {reduction!r}, got shape {g.shape}")
        scale = g.reshape(()).astype(s.dtype)
        if reduction == "mean":
            total = s.w.sum(dtype=s.dtype)
            scale = scale / total if total != 0 else s.dtype.type(0)
        coef = s.w * -scale
    n, c, d = s.pred.shape
    out = np.zeros(n * c * d, s.dtype)
    # One flat store: entry (i, k) of the targets lands at (i, t[i, k], k); positions are distinct.
    flat = (np.arange(n) * (c * d))[:, None] + s.t * d + np.arange(d)
    out[flat.reshape(-1)] = coef.reshape(-1)
    return out.reshape(s.shape)
