"""Each loss appended as IR equals PyTorch's (values and gradients), for every reduction."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import TrainingError
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient
from retrograd.training import CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss, append_loss
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional

IDENTITY = """
@I.ir_module
class Module:
    @R.function
    def backbone(x: R.Tensor({shape}, dtype="float64"), w: R.Tensor((), dtype="float64")) -> R.Tensor({shape}, dtype="float64"):
        with R.dataflow():
            y: R.Tensor({shape}, dtype="float64") = R.multiply(x, w)
            R.output(y)
        return y
"""


def _run(loss, pred, target):
    """(value, d value / d pred) of the appended loss, run through retrograd (prediction = x * 1)."""
    mod = retrograd.parse(IDENTITY.format(shape=tuple(pred.shape)))
    mod = append_loss(mod, loss)
    value = retrograd.build(mod)["backbone_loss"](pred, np.float64(1.0), target)
    if np.ndim(value) != 0:
        return np.asarray(value), None
    adj = Gradient("backbone_loss", require_grads=[0])(mod)
    _, (grad,) = retrograd.build(adj)["backbone_loss_adjoint"](pred, np.float64(1.0), target)
    return np.asarray(value), np.asarray(grad)


def _torch(fn, pred, target, **kw):
    p = torch.tensor(pred, requires_grad=True)
    t = torch.tensor(target)
    out = fn(p, t, **kw)
    if out.ndim == 0:
        out.backward()
        return out.detach().numpy(), p.grad.numpy()
    return out.detach().numpy(), None


def _check(loss, fn, pred, target, **kw):
    got, got_grad = _run(loss, pred, target)
    want, want_grad = _torch(fn, pred, target, **kw)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    if want_grad is not None:
        np.testing.assert_allclose(got_grad, want_grad, rtol=1e-9, atol=1e-12)


RED = ["mean", "sum", "none"]
rng = np.random.default_rng(0)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("kind", ["mse", "l1", "huber"])
def test_regression_losses(kind, reduction):
    pred, target = rng.normal(size=(5, 3)) * 2, rng.normal(size=(5, 3))
    loss, fn, kw = {
        "mse": (MSELoss(reduction), F.mse_loss, {}),
        "l1": (L1Loss(reduction), F.l1_loss, {}),
        "huber": (HuberLoss(0.7, reduction), F.huber_loss, {"delta": 0.7}),
    }[kind]
    _check(loss, fn, pred, target, reduction=reduction, **kw)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 2, 2)])
def test_cross_entropy_from_logits(reduction, weighted, smoothing, shape):
    logits = rng.normal(size=shape) * 3
    target = rng.integers(0, shape[1], size=(shape[0],) + shape[2:])
    target.flat[1] = -100  # ignored
    weight = rng.uniform(0.2, 2.0, size=shape[1]) if weighted else None
    loss = CrossEntropyLoss(weight=weight, reduction=reduction, label_smoothing=smoothing)
    kw = {"weight": None if weight is None else torch.tensor(weight)}
    _check(loss, F.cross_entropy, logits, target, reduction=reduction, label_smoothing=smoothing, **kw)


def _smoothed_nll(p, t, reduction, ignore_index, label_smoothing):
    keep = (t != ignore_index).to(p.dtype)
    nll = F.nll_loss(p, t, reduction="none", ignore_index=ignore_index)
    per = (1 - label_smoothing) * nll - label_smoothing / p.shape[1] * p.sum(1) * keep
    return {"none": per, "sum": per.sum(), "mean": per.sum() / keep.sum()}[reduction]


@pytest.mark.parametrize("reduction", RED)
def test_cross_entropy_ignore_index_and_log_probs(reduction):
    logits = rng.normal(size=(7, 5))
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    target = rng.integers(0, 5, size=7)
    target[[0, 3]] = 2
    loss = CrossEntropyLoss(ignore_index=2, reduction=reduction, from_logits=False, label_smoothing=0.1)
    # PyTorch's cross_entropy always applies log_softmax (same value on log-probabilities, another
    # gradient): the reference is the smoothed NLL written out in torch.
    _check(loss, _smoothed_nll, logp, target, reduction=reduction, ignore_index=2, label_smoothing=0.1)
    value, _ = _run(loss, logp, target)
    want, _ = _torch(F.cross_entropy, logp, target, reduction=reduction, ignore_index=2, label_smoothing=0.1)
    np.testing.assert_allclose(value, want, rtol=1e-10)
    _check(NLLLoss(ignore_index=2, reduction=reduction), F.nll_loss, logp, target, reduction=reduction, ignore_index=2)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_soft_targets(reduction, smoothing):
    logits = rng.normal(size=(4, 6))
    probs = rng.uniform(size=(4, 6))
    probs /= probs.sum(1, keepdims=True)
    weight = rng.uniform(0.5, 1.5, size=6)
    loss = CrossEntropyLoss(weight=weight, reduction=reduction, label_smoothing=smoothing, soft_targets=True)
    _check(loss, F.cross_entropy, logits, probs, reduction=reduction, label_smoothing=smoothing,
           weight=torch.tensor(weight))


def test_nll_weighted_mean():
    logp = np.log(rng.dirichlet(np.ones(3), size=8))
    target = rng.integers(0, 3, size=8)
    weight = np.array([0.5, 2.0, 1.0])
    _check(NLLLoss(weight=weight), F.nll_loss, logp, target, weight=torch.tensor(weight))


def test_append_loss_keeps_input_and_prints():
    mod = retrograd.parse(IDENTITY.format(shape=(2, 3)))
    before = mod.script()
    out = append_loss(mod, CrossEntropyLoss(label_smoothing=0.1))
    assert mod.script() == before and "backbone_loss" not in mod
    again = retrograd.parse(out.script())
    assert retrograd.structural_equal(again, out)
    assert well_formed(out) == []


def test_bad_options_are_clear():
    with pytest.raises(TrainingError, match="reduction"):
        MSELoss("avg")
    with pytest.raises(TrainingError, match="label_smoothing"):
        CrossEntropyLoss(label_smoothing=1.5)
    mod = retrograd.parse(IDENTITY.format(shape=(2, 3)))
    with pytest.raises(TrainingError, match="no function 'main'"):
        append_loss(mod, MSELoss(), func="main")
    with pytest.raises(TrainingError, match="3 classes"):
        append_loss(mod, NLLLoss(weight=[1.0, 2.0]))
