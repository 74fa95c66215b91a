"""Kernel fixes of issue 9: nll_loss on an empty batch (PyTorch's values), uint64 indices beyond int64 in take."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from retrograd.errors import KernelError
from retrograd.ops.kernels import index, loss
from optional import need  # noqa: E402


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


BIG = np.array([2**63 + 5, 3, 2**64 - 1], dtype=np.uint64)


def _naive_rows(mode, size):
    """Python ints (no wrap-around) mapped by the definition of each mode; None: dropped."""
    out = []
    for i in (int(v) for v in BIG):
        if mode == "clip":
            out.append(min(i, size - 1))
        elif mode == "wrap":
            out.append(i % size)
        else:
            out.append(i if i < size else None)
    return out


@pytest.mark.parametrize("mode", ["clip", "wrap", "nan"])
def test_take_and_take_backward_read_uint64_beyond_int64_as_unsigned(mode):
    x = np.arange(10.0) * 1.5
    rows = _naive_rows(mode, 10)
    expected = np.array([np.nan if r is None else x[r] for r in rows])
    np.testing.assert_array_equal(index.take(x, BIG, axis=0, mode=mode), expected)
    g = np.array([1.0, 10.0, 100.0])
    dense = np.zeros(10)
    for r, v in zip(rows, g):
        if r is not None:
            dense[r] += v
    np.testing.assert_array_equal(index.take_backward(g, x, BIG, axis=0, mode=mode), dense)


def test_take_fast_refuses_uint64_beyond_int64_instead_of_reading_from_the_end():
    with pytest.raises(KernelError, match=str(2**63 + 5)):
        index.take(np.arange(10.0), BIG, axis=0)
    with pytest.raises(KernelError, match="out of range"):
        index.take_backward(np.ones(3), np.arange(10.0), BIG, axis=0)


def test_nll_loss_refuses_uint64_targets_beyond_int64():
    with pytest.raises(KernelError, match="out of range"):
        loss.nll_loss(np.zeros((3, 4)), BIG, reduction="sum")
