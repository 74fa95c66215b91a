"""Each optimizer's IR update equals torch.optim's over 100 steps on random problems."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import TrainingError
from retrograd.ir.expr import Var
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.well_formed import well_formed
from retrograd.training import SGD, Adam, AdamW, MomentumSGD
from optional import need  # noqa: E402

torch = need("torch")

SHAPES = [(4, 3), (3,), (2, 2, 2)]


def _problem(seed, dtype):
    rng = np.random.default_rng(seed)
    params = [rng.normal(size=s).astype(dtype) for s in SHAPES]
    targets = [rng.normal(size=s).astype(dtype) for s in SHAPES]
    scales = [rng.uniform(0.1, 3.0, size=s).astype(dtype) for s in SHAPES]

    def grads(ps):  # of sum(scale * (p - t)**2 / 2 + 0.05 p**4): curved, so errors would grow
        return [(s * (p - t) + 0.2 * p**3).astype(dtype) for p, t, s in zip(ps, targets, scales)]

    return params, grads


def _module(opt, params):
    vars_ = [Var(f"w{i}", TensorStructInfo(p.shape, str(p.dtype))) for i, p in enumerate(params)]
    return IRModule({"optimizer": opt.function(vars_)})


def _run_ours(opt, params, grads, steps):
    mod = _module(opt, params)
    assert well_formed(mod) == []
    fn = retrograd.build(mod)["optimizer"]
    state = opt.init_state(params)
    for _ in range(steps):
        params, state = fn(tuple(params), tuple(grads(params)), tuple(state))
        params, state = [np.asarray(p) for p in params], [np.asarray(s) for s in state]
    return params, state


def _run_torch(make, params, grads, steps, clip=None):
    ts = [torch.tensor(p, requires_grad=True) for p in params]
    opt = make(ts)
    for _ in range(steps):
        for t, g in zip(ts, grads([t.detach().numpy() for t in ts])):
            t.grad = torch.tensor(g)
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(ts, clip)
        opt.step()
    return [t.detach().numpy() for t in ts], opt


CASES = {
    "sgd": (lambda: SGD(0.05), lambda ps: torch.optim.SGD(ps, lr=0.05)),
    "sgd_wd": (lambda: SGD(0.05, weight_decay=0.1), lambda ps: torch.optim.SGD(ps, lr=0.05, weight_decay=0.1)),
    "momentum": (lambda: MomentumSGD(0.03, 0.9, dampening=0.3, weight_decay=0.01),
                 lambda ps: torch.optim.SGD(ps, lr=0.03, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    "nesterov": (lambda: SGD(0.03, momentum=0.8, nesterov=True),
                 lambda ps: torch.optim.SGD(ps, lr=0.03, momentum=0.8, nesterov=True)),
    "adam": (lambda: Adam(0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05),
             lambda ps: torch.optim.Adam(ps, lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.05)),
    "adamw": (lambda: AdamW(0.02, weight_decay=0.1),
              lambda ps: torch.optim.AdamW(ps, lr=0.02, weight_decay=0.1)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_torch_over_100_steps(name, seed, dtype):
    ours, theirs = CASES[name]
    params, grads = _problem(seed, dtype)
    got, state = _run_ours(ours(), params, grads, 100)
    want, _ = _run_torch(theirs, params, grads, 100)
    tol = 1e-6 if dtype == "float64" else 2e-5
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    assert float(state[0]) == 100.0


@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_state_matches_torch(name):
    ours, theirs = CASES[name]
    params, grads = _problem(3, "float64")
    opt = ours()
    _, state = _run_ours(opt, params, grads, 30)
    _, topt = _run_torch(theirs, params, grads, 30)
    names = opt.state_names([f"w{i}" for i in range(len(params))])
    tstate = list(topt.state.values())
    for i in range(len(params)):
        if name == "momentum":
            np.testing.assert_allclose(state[names.index(f"w{i}_momentum")], tstate[i]["momentum_buffer"], rtol=1e-10)
        else:
            np.testing.assert_allclose(state[names.index(f"w{i}_m")], tstate[i]["exp_avg"], rtol=1e-10)
            np.testing.assert_allclose(state[names.index(f"w{i}_v")], tstate[i]["exp_avg_sq"], rtol=1e-10)


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_clip_by_global_norm_matches_torch(name):
    params, grads = _problem(5, "float64")
    big = lambda ps: [10 * g for g in grads(ps)]  # noqa: E731 - always clipped at first
    ours = SGD(0.01, clip_norm=1.5) if name == "sgd" else Adam(0.01, clip_norm=1.5)
    make = (lambda ps: torch.optim.SGD(ps, lr=0.01)) if name == "sgd" else (lambda ps: torch.optim.Adam(ps, lr=0.01))
    got, _ = _run_ours(ours, params, big, 100)
    want, _ = _run_torch(make, params, big, 100, clip=1.5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_mixed_dtypes_and_printing_round_trip():
    params = [np.ones((2, 2), "float32"), np.ones(3, "float64")]
    mod = _module(Adam(0.1, clip_norm=1.0), params)
    text = mod.script()
    assert "bias_correction1" in text and "w0_m" in text
    again = retrograd.parse(text)
    assert retrograd.structural_equal(again, mod)
    grads = (np.full((2, 2), 0.5, "float32"), np.full(3, -0.25, "float64"))
    state = tuple(Adam(0.1).init_state(params))
    a = retrograd.build(mod)["optimizer"](tuple(params), grads, state)
    b = retrograd.build(again)["optimizer"](tuple(params), grads, state)
    for x, y in zip(a[0] + a[1], b[0] + b[1]):
        np.testing.assert_array_equal(x, y)
    assert a[0][0].dtype == np.float32 and a[0][1].dtype == np.float64


def test_bad_hyperparameters():
    with pytest.raises(TrainingError, match="learning rate"):
        SGD(-1.0)
    with pytest.raises(TrainingError, match="Nesterov"):
        SGD(0.1, nesterov=True)
    with pytest.raises(TrainingError, match="betas"):
        Adam(betas=(0.9, 1.0))
    with pytest.raises(TrainingError, match="'k' must be a float"):
        SGD(0.1).function([Var("k", TensorStructInfo((2,), "int64"))])
