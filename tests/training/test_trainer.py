"""setup_trainer and the Trainer: per-step losses equal PyTorch's, print/parse round trip, saving, errors."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError, TrainingError
from retrograd.ir.well_formed import well_formed
from retrograd.training import (
    SGD, Adam, CrossEntropyLoss, MSELoss, MomentumSGD, Trainer, initial_value, setup_trainer,
)
from optional import need  # noqa: E402

MLP = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 6), dtype="float32"), w1: R.Tensor((6, 16), dtype="float32"), b1: R.Tensor((16,), dtype="float32"), w2: R.Tensor((16, 4), dtype="float32"), b2: R.Tensor((4,), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        with R.dataflow():
            h = R.nn.relu(R.add(R.matmul(x, w1), b1))
            y = R.add(R.matmul(h, w2), b2)
            R.output(y)
        return y
"""


def _data(seed=0, n=32):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype("float32"), rng.integers(0, 4, size=n)


def _trainer(loss=None, opt=None, seed=0, **kw):
    mod = setup_trainer(retrograd.parse(MLP), loss or CrossEntropyLoss(), opt or Adam(0.01), **kw)
    t = Trainer(mod)
    t.init_params("xavier_uniform", seed=seed)
    return t


def _torch_losses(params, x, y, make_opt, steps, loss_fn):
    torch = need("torch")
    ts = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = make_opt(list(ts.values()))
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        h = torch.relu(torch.tensor(x) @ ts["w1"] + ts["b1"])
        out = loss_fn(h @ ts["w2"] + ts["b2"], torch.tensor(y))
        out.backward()
        opt.step()
        losses.append(out.item())
    return losses, {k: v.detach().numpy() for k, v in ts.items()}


@pytest.mark.parametrize("which", ["adam", "nesterov", "mse_sgd"])
def test_per_step_losses_match_torch(which):
    torch = need("torch")
    x, y = _data()
    if which == "adam":
        loss, opt = CrossEntropyLoss(label_smoothing=0.1), Adam(0.01, weight_decay=1e-3)
        make = lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=1e-3)  # noqa: E731
        fn = lambda o, t: torch.nn.functional.cross_entropy(o, t, label_smoothing=0.1)  # noqa: E731
    elif which == "nesterov":
        loss, opt = CrossEntropyLoss(), SGD(0.1, momentum=0.9, nesterov=True)
        make = lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)  # noqa: E731
        fn = torch.nn.functional.cross_entropy
    else:
        y = np.random.default_rng(1).normal(size=(32, 4)).astype("float32")
        loss, opt = MSELoss(), SGD(0.05, clip_norm=0.5)
        make = lambda ps: torch.optim.SGD(ps, lr=0.05)  # noqa: E731
        fn = torch.nn.functional.mse_loss
    t = _trainer(loss, opt)
    start = dict(t.params)
    ours = [t.step(x, y) for _ in range(40)]
    if which == "mse_sgd":  # clipping: compare with torch's clip_grad_norm_ in the loop
        ts = {k: torch.tensor(v, requires_grad=True) for k, v in start.items()}
        topt = make(list(ts.values()))
        theirs = []
        for _ in range(40):
            topt.zero_grad()
            out = fn(torch.relu(torch.tensor(x) @ ts["w1"] + ts["b1"]) @ ts["w2"] + ts["b2"], torch.tensor(y))
            out.backward()
            torch.nn.utils.clip_grad_norm_(list(ts.values()), 0.5)
            topt.step()
            theirs.append(out.item())
        final = {k: v.detach().numpy() for k, v in ts.items()}
    else:
        theirs, final = _torch_losses(start, x, y, make, 40, fn)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    for k in final:
        np.testing.assert_allclose(t.params[k], final[k], rtol=1e-4, atol=1e-5)
    assert ours[-1] < ours[0]


# Dropout on the hidden layer: the step also carries the dropout key (tests/training/test_dropout.py).
MLP_DROPOUT = MLP.replace("y = R.add(R.matmul(h, w2), b2)", "d = R.nn.dropout(h, rate=0.5)\n            y = R.add(R.matmul(d[0], w2), b2)")
FUNCTIONS = {"backbone", "backbone_loss", "optimizer", "train_step"}


@pytest.mark.parametrize("text, functions", [
    (MLP, FUNCTIONS | {"backbone_loss_adjoint"}),
    (MLP_DROPOUT, FUNCTIONS | {"backbone_loss_train", "backbone_loss_train_adjoint"}),
], ids=["plain", "dropout"])
def test_module_prints_parses_and_steps_the_same(text, functions):
    backbone = retrograd.parse(text)
    before = backbone.script()
    mod = setup_trainer(backbone, CrossEntropyLoss(), MomentumSGD(0.1))
    assert backbone.script() == before and list(backbone.keys()) == ["main"]
    assert well_formed(mod) == []
    assert set(mod.keys()) == functions
    again = retrograd.parse(mod.script())
    assert retrograd.structural_equal(again, mod)
    x, y = _data()
    a, b = Trainer(mod), Trainer(again)
    a.init_params(seed=3)
    b.load_state_dict(a.state_dict())  # parameters and state (with the dropout key)
    for _ in range(3):
        assert a.step(x, y) == b.step(x, y)


def test_train_step_equals_adjoint_then_optimizer():
    mod = setup_trainer(retrograd.parse(MLP), CrossEntropyLoss(), Adam(0.05))
    t = Trainer(mod)
    t.init_params(seed=1)
    x, y = _data()
    names = t.param_names
    params = [t.params[n] for n in names]
    loss, grads = t.exe["backbone_loss_adjoint"](x, *params, y)
    new_p, new_s = t.exe["optimizer"](tuple(params), tuple(grads), tuple(t.state[n] for n in t.state_names))
    got = t.step(x, y)
    assert got == float(loss)
    for n, p in zip(names, new_p):
        np.testing.assert_array_equal(t.params[n], p)


def test_export_load_and_resume(tmp_path):
    x, y = _data()
    t = _trainer()
    for _ in range(3):
        t.step(x, y)
    t.export_params(tmp_path / "p.npz")
    with np.load(tmp_path / "p.npz", allow_pickle=False) as data:
        assert sorted(data.files) == sorted(t.param_names)
    u = _trainer(seed=9)
    u.load_params(tmp_path / "p.npz")
    for n in t.param_names:
        np.testing.assert_array_equal(u.params[n], t.params[n])
    np.testing.assert_array_equal(u.predict(x), t.predict(x))
    t.save_state(tmp_path / "s.npz")
    v = _trainer(seed=5)
    v.load_state(tmp_path / "s.npz")
    assert v.steps_done == 3
    assert [v.step(x, y) for _ in range(4)] == [t.step(x, y) for _ in range(4)]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_bfloat16_parameters_export_load_and_resume_exactly(tmp_path, backend):
    """.npz keeps bfloat16 as raw bytes: reading back views them as the parameters' declared dtype, so a
    bfloat16 model's export/load round trip and resumed steps equal the uninterrupted run."""
    ml_dtypes = need("ml_dtypes")
    if backend == "torch":
        need("torch")
    mod = setup_trainer(retrograd.parse(MLP.replace("float32", "bfloat16")), CrossEntropyLoss(), Adam(0.01))
    x, y = _data()
    x = x.astype(ml_dtypes.bfloat16)
    t = Trainer(mod, backend=backend)
    t.init_params("xavier_uniform", seed=0)
    for _ in range(2):
        t.step(x, y)
    t.export_params(tmp_path / "p.npz")
    t.save_state(tmp_path / "s.npz")
    u = Trainer(mod, backend=backend)
    u.load_params(tmp_path / "p.npz")
    ours, theirs = u.state_dict()["params"], t.state_dict()["params"]
    for n in t.param_names:
        assert str(ours[n].dtype) == "bfloat16"
        np.testing.assert_array_equal(ours[n].view(np.uint16), theirs[n].view(np.uint16))
    u.load_state(tmp_path / "s.npz")
    assert [float(u.step(x, y)) for _ in range(3)] == [float(t.step(x, y)) for _ in range(3)]


def test_initialisers():
    rng = np.random.default_rng(0)
    w = initial_value("he_normal", (400, 300), "float32", rng)
    assert w.dtype == np.float32 and abs(w.std() - np.sqrt(2 / 400)) < 0.01 * np.sqrt(2 / 400) * 5
    u = initial_value("xavier_uniform", (8, 3, 5, 5), "float64", rng)
    bound = np.sqrt(6 / (3 * 25 + 8 * 25))
    assert np.abs(u).max() <= bound and np.abs(u).max() > 0.9 * bound
    assert not initial_value("he_uniform", (7,), "float32", rng).any()
    assert not initial_value("he_uniform", (1, 7, 1, 1), "float32", rng).any()
    a, b = _trainer(seed=4), _trainer(seed=4)
    for n in a.param_names:
        np.testing.assert_array_equal(a.params[n], b.params[n])
    assert not np.array_equal(a.params["w1"], _trainer(seed=5).params["w1"])


def test_clear_errors(tmp_path):
    mod = setup_trainer(retrograd.parse(MLP), CrossEntropyLoss(), SGD(0.1))
    t = Trainer(mod)
    x, y = _data()
    with pytest.raises(TrainingError, match="init_params"):
        t.predict(x)
    with pytest.raises(TrainingError, match="init_params"):
        t.step(x, y)
    with pytest.raises(TrainingError, match="w2"):
        t.set_params({"w1": np.zeros((6, 16), "float32"), "b1": np.zeros(16, "float32"),
                      "w2": np.zeros((16, 5), "float32"), "b2": np.zeros(4, "float32")})
    with pytest.raises(TrainingError, match="b1.*float32"):
        t.set_params({"w1": np.zeros((6, 16), "float32"), "b1": np.zeros(16, "float64"),
                      "w2": np.zeros((16, 4), "float32"), "b2": np.zeros(4, "float32")})
    with pytest.raises(TrainingError, match="missing parameter 'b2'"):
        t.set_params({"w1": np.zeros((6, 16), "float32"), "b1": np.zeros(16, "float32"),
                      "w2": np.zeros((16, 4), "float32")})
    t.init_params()
    with pytest.raises(DiagnosticError, match="x"):
        t.step(x.astype("float64"), y)
    with pytest.raises(TrainingError, match="takes 2 arrays"):
        t.step(x)
    with pytest.raises(TrainingError, match="scalar"):
        setup_trainer(retrograd.parse(MLP), CrossEntropyLoss(reduction="none"), SGD(0.1))
    np.savez(tmp_path / "bad.npz", w1=np.zeros((6, 16), "float32"))
    with pytest.raises(TrainingError, match="missing parameter"):
        t.load_params(tmp_path / "bad.npz")
    with pytest.raises(TrainingError, match="cannot read"):
        t.load_params(tmp_path / "nope.npz")
    with pytest.raises(TrainingError, match="no parameter to train"):
        setup_trainer(retrograd.parse(MLP), CrossEntropyLoss(), SGD(0.1), num_inputs=5)
    with pytest.raises(TrainingError, match="unknown initialisation"):
        t.init_params("glorot")


def test_loss_returning_backbone():
    text = """
@R.function
def main(x: R.Tensor((8, 3), dtype="float64"), y: R.Tensor((8,), dtype="float64"), w: R.Tensor((3,), dtype="float64")) -> R.Tensor((), dtype="float64"):
    r = R.subtract(R.matmul(x, w), y)
    return R.mean(R.multiply(r, r))
"""
    mod = setup_trainer(retrograd.parse(text), None, SGD(0.1), num_inputs=2)
    t = Trainer(mod)
    t.init_params("zeros")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 3))
    w_true = np.array([1.0, -2.0, 0.5])
    y = x @ w_true
    w = np.zeros(3)
    for _ in range(50):  # the reference: gradient descent on the mean squared error, by hand
        t.step(x, y)
        w = w - 0.1 * (2 / 8) * x.T @ (x @ w - y)
    np.testing.assert_allclose(t.params["w"], w, rtol=1e-12)


def test_checkpoint_option():
    x, y = _data()
    if not hasattr(retrograd.passes, "Checkpoint"):
        with pytest.raises(TrainingError, match="checkpoint pass is not available"):
            setup_trainer(retrograd.parse(MLP), CrossEntropyLoss(), SGD(0.1), checkpoint="60%")
        return
    static = MLP.replace('"n"', "32")  # the planner needs static shapes
    plain = setup_trainer(retrograd.parse(static), CrossEntropyLoss(), SGD(0.1))
    with pytest.raises(DiagnosticError) as info:  # an impossible budget says which one is feasible
        setup_trainer(retrograd.parse(static), CrossEntropyLoss(), SGD(0.1), checkpoint=1)
    least = info.value.least_feasible
    ckpt = setup_trainer(retrograd.parse(static), CrossEntropyLoss(), SGD(0.1), checkpoint=least)
    assert well_formed(ckpt) == []
    a, b = Trainer(plain), Trainer(ckpt)
    a.init_params(seed=2)
    b.set_params(a.params)
    for _ in range(3):
        np.testing.assert_allclose(b.step(x, y), a.step(x, y), rtol=1e-6)
    for n in a.param_names:
        np.testing.assert_allclose(b.params[n], a.params[n], rtol=1e-5, atol=1e-6)
    assert b.exe.stats.peak_live_bytes <= least < a.exe.stats.peak_live_bytes
