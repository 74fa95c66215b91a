"""nll_loss and nll_loss_backward against a naive per-entry loop, finite differences, and PyTorch."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from ops.helpers import UINT64_BEYOND_INT64

from retrograd.errors import KernelError
from retrograd.ops.kernels import loss
from optional import need  # noqa: E402


def naive_nll(pred, tgt, weights, reduction, ignore_index):
    """Per-entry losses by loops; (C,) predictions with a scalar target are one sample."""
    squeeze = pred.ndim == 1
    if squeeze:
        pred, tgt = pred[None], np.asarray(tgt)[None]
    c = pred.shape[1]
    w = np.ones(c) if weights is None else weights
    losses = np.zeros(tgt.shape)
    total_w = 0.0
    for idx in itertools.product(*map(range, tgt.shape)):
        t = int(tgt[idx])
        if t == ignore_index:
            continue
        losses[idx] = -w[t] * pred[(idx[0], t) + idx[1:]]
        total_w += w[t]
    if reduction == "none":
        return (losses[0] if squeeze else losses), total_w
    return (losses.sum() if reduction == "sum" else losses.sum() / total_w), total_w


def naive_nll_backward(g, pred, tgt, weights, reduction, ignore_index):
    squeeze = pred.ndim == 1
    if squeeze:
        pred, tgt = pred[None], np.asarray(tgt)[None]
        g = np.asarray(g)[None] if reduction == "none" else g
    c = pred.shape[1]
    w = np.ones(c) if weights is None else weights
    _, total_w = naive_nll(pred, tgt, weights, "sum", ignore_index)
    dx = np.zeros(pred.shape)
    for idx in itertools.product(*map(range, tgt.shape)):
        t = int(tgt[idx])
        if t == ignore_index:
            continue
        gi = g[idx] if reduction == "none" else g
        scale = 1.0 / total_w if reduction == "mean" else 1.0
        dx[(idx[0], t) + idx[1:]] = -w[t] * gi * scale
    return dx[0] if squeeze else dx


def _case(pred_shape, seed=0, ignore=(), weighted=True, ignore_index=-100):
    rng = np.random.default_rng(seed)
    pred = rng.standard_normal(pred_shape)
    c = pred_shape[0] if len(pred_shape) == 1 else pred_shape[1]
    tshape = () if len(pred_shape) == 1 else (pred_shape[0],) + pred_shape[2:]
    tgt = rng.integers(0, c, tshape)
    for idx in ignore:
        tgt[idx] = ignore_index
    weights = rng.uniform(0.5, 2.0, c) if weighted else None
    return pred, tgt, weights


CASES = [
    ((6, 5), [(0,), (3,)], True, -100),
    ((6, 5), [], False, -100),
    ((6, 5), [(2,)], False, 3),  # unweighted rows with one ignored: the plain-rows shortcut must step aside
    ((9, 4), [], False, 1),  # ignore_index a valid class, hit only where random targets happen to be 1
    ((4, 3, 2, 3), [(0, 1, 2), (2, 0, 0)], True, -100),  # (N, C, d1, d2)
    ((3, 4, 5), [(1, 1)], False, 2),  # ignore_index that is also a valid class
    ((7,), [], True, -100),  # no-batch form
    ((1, 1), [], True, -100),  # one sample, one class
]
REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_matches_naive(case, reduction):
    shape, ignore, weighted, ii = case
    pred, tgt, w = _case(shape, ignore=ignore, weighted=weighted, ignore_index=ii)
    got = loss.nll_loss(pred, tgt, w, reduction=reduction, ignore_index=ii)
    expect, _ = naive_nll(pred, tgt, w, reduction, ii)
    assert got.shape == np.shape(expect) and got.dtype == pred.dtype
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_backward_matches_naive_and_finite_differences(case, reduction):
    shape, ignore, weighted, ii = case
    pred, tgt, w = _case(shape, ignore=ignore, weighted=weighted, ignore_index=ii)
    out = loss.nll_loss(pred, tgt, w, reduction=reduction, ignore_index=ii)
    g = np.random.default_rng(1).standard_normal(out.shape)
    got = loss.nll_loss_backward(g, pred, tgt, w, reduction=reduction, ignore_index=ii)
    np.testing.assert_allclose(got, naive_nll_backward(g, pred, tgt, w, reduction, ii), rtol=1e-12, atol=1e-14)
    numeric = np.zeros_like(pred)
    for idx in np.ndindex(pred.shape):
        e = np.zeros_like(pred)
        e[idx] = 1e-6
        up = loss.nll_loss(pred + e, tgt, w, reduction=reduction, ignore_index=ii)
        down = loss.nll_loss(pred - e, tgt, w, reduction=reduction, ignore_index=ii)
        numeric[idx] = np.vdot(g, up - down) / 2e-6
    np.testing.assert_allclose(got, numeric, rtol=1e-6, atol=1e-8)


def test_all_ignored_mean_is_nan_forward_and_zero_backward():
    pred, tgt, w = _case((3, 4), ignore=[(0,), (1,), (2,)])
    with np.errstate(divide="raise", invalid="raise"):  # no warning escapes either
        assert np.isnan(loss.nll_loss(pred, tgt, w, reduction="mean"))
        dx = loss.nll_loss_backward(np.float64(1.0), pred, tgt, w, reduction="mean")
    np.testing.assert_array_equal(dx, np.zeros_like(pred))
    assert loss.nll_loss(pred, tgt, w, reduction="sum") == 0


def test_ignored_entries_reading_minus_inf_make_no_nan():
    pred = np.array([[-np.inf, 0.0], [np.log(0.5), np.log(0.5)]])  # class 0 of sample 0 is -inf
    tgt = np.array([-100, 1])
    got = loss.nll_loss(pred, tgt, reduction="none")
    np.testing.assert_allclose(got, [0.0, np.log(2.0)])


def test_float32_dtype_and_inputs_untouched():
    pred, tgt, w = _case((5, 4))
    p32, w32 = pred.astype("float32"), w.astype("float32")
    snapshot = (p32.copy(), tgt.copy(), w32.copy())
    assert loss.nll_loss(p32, tgt, w32).dtype == np.float32
    assert loss.nll_loss_backward(np.float32(1), p32, tgt, w32).dtype == np.float32
    for a, b in zip((p32, tgt, w32), snapshot):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: loss.nll_loss(np.zeros((2, 3)), np.array([0, 3])), "target 3 out of range for 3 classes"),
        (lambda: loss.nll_loss(np.zeros((2, 3)), np.array([0, -1])), "target -1 out of range"),
        (lambda: loss.nll_loss_backward(np.float64(1), np.zeros((2, 3)), np.array([7, 0])), "target 7"),
        (lambda: loss.nll_loss(np.zeros((2, 3)), np.array([0, 1, 2])), "targets have shape"),
        (lambda: loss.nll_loss(np.zeros((2, 3)), np.array([0.0, 1.0])), "integer dtype"),
        (lambda: loss.nll_loss(np.zeros((2, 3)), np.array([0, 1]), np.ones(4)), "weights have shape"),
        (lambda: loss.nll_loss(np.zeros((2, 3)), np.array([0, 1]), reduction="avg"), "reduction"),
        (lambda: loss.nll_loss(np.zeros(()), np.array(0)), "scalar"),
        (lambda: loss.nll_loss_backward(np.ones(2), np.zeros((2, 3)), np.array([0, 1])), "must be a scalar"),
        (lambda: loss.nll_loss_backward(np.ones(3), np.zeros((2, 3)), np.array([0, 1]), reduction="none"), "output_grad"),
    ],
)
def test_bad_inputs_raise_kernel_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_against_torch(case, reduction):
    torch = need("torch")
    shape, ignore, weighted, ii = case
    pred, tgt, w = _case(shape, ignore=ignore, weighted=weighted, ignore_index=ii)
    pt = torch.tensor(pred, requires_grad=True)
    out = torch.nn.functional.nll_loss(
        pt, torch.tensor(tgt), None if w is None else torch.tensor(w), reduction=reduction, ignore_index=ii
    )
    g = np.random.default_rng(2).standard_normal(tuple(out.shape))
    out.backward(torch.tensor(g))
    np.testing.assert_allclose(loss.nll_loss(pred, tgt, w, reduction=reduction, ignore_index=ii), out.detach().numpy(), rtol=1e-12)
    got = loss.nll_loss_backward(g, pred, tgt, w, reduction=reduction, ignore_index=ii)
    np.testing.assert_allclose(got, pt.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_all_ignored_against_torch():
    torch = need("torch")
    pred, tgt, w = _case((3, 4), ignore=[(0,), (1,), (2,)])
    pt = torch.tensor(pred, requires_grad=True)
    out = torch.nn.functional.nll_loss(pt, torch.tensor(tgt), torch.tensor(w))
    out.backward()
    assert np.isnan(out.item()) and np.isnan(loss.nll_loss(pred, tgt, w))
    np.testing.assert_array_equal(loss.nll_loss_backward(np.float64(1), pred, tgt, w), pt.grad.numpy())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pred_shape", [(0, 4), (0, 4, 3)])
def test_nll_loss_on_an_empty_batch_matches_pytorch(reduction, weighted, pred_shape):
    pred = np.zeros(pred_shape)
    tgt = np.zeros((0,) + pred_shape[2:], dtype="int64")
    w = np.linspace(0.5, 2.0, 4) if weighted else None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = loss.nll_loss(pred, tgt, w, reduction=reduction)
        g = np.zeros(tgt.shape) if reduction == "none" else np.array(1.0)
        grad = loss.nll_loss_backward(g, pred, tgt, w, reduction=reduction)
    # PyTorch's documented values: nan for mean (0 / 0), 0 for sum, an empty tensor for none.
    if reduction == "mean":
        assert np.isnan(value)
    elif reduction == "sum":
        assert value == 0.0
    else:
        assert value.shape == tgt.shape
    assert grad.shape == pred.shape
    torch = need("torch")
    tp = torch.tensor(pred, requires_grad=True)
    ref = torch.nn.functional.nll_loss(tp, torch.tensor(tgt), None if w is None else torch.tensor(w), reduction=reduction)
    np.testing.assert_array_equal(np.asarray(value), ref.detach().numpy())
    if reduction != "mean":
        ref.sum().backward()
        np.testing.assert_array_equal(grad, tp.grad.numpy())


def test_nll_loss_refuses_uint64_targets_beyond_int64():
    with pytest.raises(KernelError, match="out of range"):
        loss.nll_loss(np.zeros((3, 4)), UINT64_BEYOND_INT64, reduction="sum")
