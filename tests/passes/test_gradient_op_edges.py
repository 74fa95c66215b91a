"""Gradients through the Gradient pass where an op's rule has an edge: power at a zero base (a finite exponent
gradient), nll_loss class weights (their true gradient), maximum/minimum ties (TVM's rule: the first argument
wins); against naive references, float64 finite differences and PyTorch when installed."""

from __future__ import annotations

import numpy as np
import pytest
from passes.helpers import TVM_IMPORTS

import retrograd
from retrograd.passes import Gradient
from retrograd.runtime import build
from retrograd.testing import check_gradients
from optional import need  # noqa: E402


GEM = TVM_IMPORTS + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6,), "float64"), p: R.Tensor((), "float64")) -> R.Tensor((), "float64"):
        r = R.nn.relu(x)
        q = R.power(r, p)
        s = R.sum(q)
        return s
"""


def _gem_inputs():
    return [np.array([-1.0, 0.0, 0.5, 2.0, 0.0, 1.5]), np.array(2.5)]


def test_power_at_base_zero_has_a_finite_exponent_gradient():
    mod = retrograd.parse(GEM)
    x, p = _gem_inputs()
    _, (gx, gp) = build(Gradient("main")(mod))["main_adjoint"](x, p)
    r = np.maximum(x, 0)
    pos = r > 0
    # naive reference: d/dp sum r^p = sum over r > 0 of r^p log r; zeros contribute nothing (0^p is flat in p)
    assert float(gp) == pytest.approx(float(np.sum(r[pos] ** p * np.log(r[pos]))), rel=1e-12)
    np.testing.assert_allclose(gx, np.where(pos, p * r ** (p - 1), 0.0), rtol=1e-12)
    report = check_gradients(mod, "main", [x, p])
    assert report.ok and report.checked == 7, str(report)


def test_power_base_zero_matches_pytorch():
    torch = need("torch")
    mod = retrograd.parse(GEM)
    x, p = _gem_inputs()
    _, (gx, gp) = build(Gradient("main")(mod))["main_adjoint"](x, p)
    tx = torch.tensor(x, requires_grad=True)
    tp = torch.tensor(p, requires_grad=True)
    torch.relu(tx).pow(tp).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gp, tp.grad.numpy(), rtol=1e-12)


def test_power_zero_exponent_at_zero_base_matches_pytorch():
    torch = need("torch")
    text = GEM.replace("r = R.nn.relu(x)", "r = R.multiply(x, x)")
    mod = retrograd.parse(text)
    x, p = np.array([0.0, 1.0, -2.0, 0.0, 3.0, 0.5]), np.array(0.0)
    _, (gx, gp) = build(Gradient("main")(mod))["main_adjoint"](x, p)
    tx = torch.tensor(x, requires_grad=True)
    tp = torch.tensor(p, requires_grad=True)
    (tx * tx).pow(tp).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gp, tp.grad.numpy(), rtol=1e-12)


NLL = TVM_IMPORTS + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(PSHAPE, "float64"), t: R.Tensor(TSHAPE, "int64"), w: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        lp = R.nn.log_softmax(x, axis=AXIS)
        s = R.nn.nll_loss(lp, t, w, reduction="RED", ignore_index=IGNORE)
        return s
"""


def _nll_case(pshape, red, ignore):
    tshape = (pshape[0],) + pshape[2:] if len(pshape) > 1 else ()
    axis = 1 if len(pshape) > 1 else 0
    text = (NLL.replace("PSHAPE", repr(pshape)).replace("TSHAPE", repr(tshape)).replace("AXIS", str(axis))
            .replace("RED", red).replace("IGNORE", str(ignore)))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(pshape)
    t = rng.integers(0, 4, size=tshape).astype("int64")
    if t.ndim:
        t.reshape(-1)[1] = ignore if ignore == -100 else t.reshape(-1)[1]
    w = rng.uniform(0.5, 2.0, 4)
    return retrograd.parse(text), [x, t, w]


NLL_CASES = [((5, 4), "mean", -100), ((5, 4), "sum", -100), ((3, 4, 2), "mean", 2), ((3, 4, 2), "sum", 0), ((4,), "mean", -100)]


@pytest.mark.parametrize("pshape,red,ignore", NLL_CASES)
def test_nll_loss_class_weights_get_their_true_gradient(pshape, red, ignore):
    mod, args = _nll_case(pshape, red, ignore)
    report = check_gradients(mod, "main", args)
    assert report.ok and report.checked == int(np.prod(pshape)) + 4, str(report)
    _, (_, gw) = build(Gradient("main")(mod))["main_adjoint"](*args)
    # One sample under mean: w[t] cancels (loss = -p[t]), so only there is the weights' gradient zero.
    assert (np.abs(gw).max() > 0) != (len(pshape) == 1 and red == "mean")


@pytest.mark.parametrize("pshape,red,ignore", NLL_CASES)
def test_nll_loss_class_weight_gradient_matches_pytorch(pshape, red, ignore):
    torch = need("torch")
    mod, (x, t, w) = _nll_case(pshape, red, ignore)
    _, (gx, gw) = build(Gradient("main")(mod))["main_adjoint"](x, t, w)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    axis = 1 if len(pshape) > 1 else 0
    lp = torch.log_softmax(tx, dim=axis)
    # PyTorch's nll_loss refuses a weight gradient: the same loss spelled with gather, which autograd follows.
    tt = torch.tensor(t)
    valid = tt != ignore
    safe = torch.where(valid, tt, torch.zeros_like(tt))
    picked = lp.gather(axis, safe.unsqueeze(axis)).squeeze(axis)
    wt = tw[safe] * valid
    total = -(wt * picked).sum()
    (total / wt.sum() if red == "mean" else total).backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-10, atol=1e-12)


TIES = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6,), "float64"), y: R.Tensor((6,), "float64"), c: R.Tensor((6,), "float64")) -> R.Tensor((), "float64"):
        m = R.OP(x, y)
        s = R.sum(R.multiply(m, c))
        return s
"""


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_ties_route_the_whole_gradient_as_tvm_does(op):
    # TVM's rules: x1 gets g where x1 >= x2 for maximum and where x1 < x2 for minimum (test_gradient_tvm
    # checks them against TVM's compiled adjoint).
    x = np.array([1.0, 2.0, 3.0, -1.0, 0.0, 5.0])
    y = np.array([1.0, 3.0, 2.0, -1.0, 0.0, 4.0])  # ties at 0, 3 and 4
    c = np.arange(1.0, 7.0)
    mod = Gradient("main")(retrograd.parse(TIES.replace("OP", op)))
    _, (gx, gy, _) = retrograd.build(mod)["main_adjoint"](x, y, c)
    first = [(a >= b) if op == "maximum" else (a < b) for a, b in zip(x, y)]
    np.testing.assert_array_equal(gx, [ci if f else 0.0 for ci, f in zip(c, first)])
    np.testing.assert_array_equal(gy, [0.0 if f else ci for ci, f in zip(c, first)])
