"""Dropout in training: a fresh mask per step and per call, eval mode for predict/evaluate, exact resume,
checkpointing, and PyTorch given the same masks (the printed step: test_trainer.py)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.ops.kernels.dropout import dropout
from retrograd.runtime import build
from retrograd.training import SGD, Adam, CrossEntropyLoss, Trainer, setup_trainer
from retrograd.training.dropout_mode import DROPOUT_KEY, count_dropouts, train_mode
from optional import need  # noqa: E402

# Two dropout calls with the default seed on same-shaped values: they must not share a mask.
NET = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 6), dtype="float32"), w1: R.Tensor((6, 16), dtype="float32"), b1: R.Tensor((16,), dtype="float32"), w2: R.Tensor((16, 16), dtype="float32"), b2: R.Tensor((16,), dtype="float32"), w3: R.Tensor((16, 4), dtype="float32"), b3: R.Tensor((4,), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        with R.dataflow():
            h1 = R.nn.relu(R.add(R.matmul(x, w1), b1))
            d1 = R.nn.dropout(h1, rate=0.3)
            h2 = R.nn.relu(R.add(R.matmul(d1[0], w2), b2))
            d2 = R.nn.dropout(h2, rate=0.3)
            y = R.add(R.matmul(d2[0], w3), b3)
            R.output(y)
        return y
"""
RATE = 0.3


def _plain_net(text=NET):
    """The same network without dropout (what eval mode must compute)."""
    return text.replace("R.nn.dropout(h1, rate=0.3)", "(h1,)").replace("R.nn.dropout(h2, rate=0.3)", "(h2,)")


def _data(seed=0, n=32):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype("float32"), rng.integers(0, 4, size=n)


def _trainer(text=NET, opt=None, seed=0, **kw):
    t = Trainer(setup_trainer(retrograd.parse(text), CrossEntropyLoss(), opt or Adam(0.01), **kw))
    t.init_params("xavier_uniform", seed=seed)
    return t


def _args(t, x, y, key):
    return [x, *(t.params[n] for n in t.param_names), y, np.array(key, "int64")]


# -- the op's key ------------------------------------------------------------------------------------

def _naive_keep(shape, rate, seed, key):
    """The documented draw, element by element: PCG64(SeedSequence([seed, key mod 2**64])) 64-bit outputs
    split into their low then high 32 bits; kept where the draw is >= ceil(rate * 2**32)."""
    n = int(np.prod(shape))
    raw = np.random.PCG64(np.random.SeedSequence([seed, key % 2**64])).random_raw((n + 1) // 2)
    draws = []
    for r in raw.tolist():
        draws += [r & 0xFFFFFFFF, r >> 32]
    threshold = math.ceil(Fraction(rate) * 2**32)
    return np.array([d >= threshold for d in draws[:n]]).reshape(shape)


@pytest.mark.parametrize("rate, seed, key", [(0.3, 0, 0), (0.5, 7, -1), (0.25, 3, 2**40 + 5), (0.9, 1, 12)])
def test_keyed_mask_is_the_documented_draw_and_the_result_is_masked_and_scaled(rate, seed, key):
    x = np.random.default_rng(1).normal(size=(5, 7))
    y, mask = dropout(x, np.array(key, "int64"), rate=rate, training=True, seed=seed)
    keep = _naive_keep(x.shape, rate, seed, key)
    np.testing.assert_array_equal(mask, keep.astype(np.float64))
    expected = np.where(keep, x / (1 - rate), 0.0)
    np.testing.assert_allclose(y, expected, rtol=1e-15, atol=0)
    assert y.dtype == mask.dtype == np.float64


def test_keyed_masks_keep_at_the_rate_and_differ_between_keys():
    binom = need("scipy.stats").binom
    x = np.ones((300, 400), "float32")
    n = x.size
    masks = [dropout(x, np.array(k, "int64"), rate=RATE, training=True, seed=5)[1].astype(bool) for k in range(4)]
    lo, hi = binom.ppf(1e-7, n, 1 - RATE), binom.isf(1e-7, n, 1 - RATE)
    for m in masks:
        assert lo <= m.sum() <= hi
    # different keys: independent masks, each pair agreeing on kept elements at rate (1 - rate)^2
    p = (1 - RATE) ** 2
    for a in range(4):
        for b in range(a + 1, 4):
            both = (masks[a] & masks[b]).sum()
            assert binom.ppf(1e-7, n, p) <= both <= binom.isf(1e-7, n, p)
    # the key is taken modulo 2**64: int64 -1 and uint64 2**64 - 1 are one key; another seed, another mask
    m1 = dropout(x, np.array(-1, "int64"), rate=RATE, training=True, seed=5)[1]
    m2 = dropout(x, np.array(2**64 - 1, "uint64"), rate=RATE, training=True, seed=5)[1]
    np.testing.assert_array_equal(m1, m2)
    assert (dropout(x, np.array(0, "int64"), rate=RATE, training=True, seed=6)[1].astype(bool) != masks[0]).any()


def test_keyed_mask_edge_rates_and_inference():
    x = np.random.default_rng(2).normal(size=(4, 3)).astype("float32")
    k = np.array(3, "int64")
    y0, m0 = dropout(x, k, rate=0.0, training=True)
    np.testing.assert_array_equal(y0, x)
    assert (m0 == 1).all()
    y1, m1 = dropout(x, k, rate=1.0, training=True)
    assert not y1.any() and not m1.any()
    yi, mi = dropout(x, k, rate=0.5)
    np.testing.assert_array_equal(yi, x)
    assert (mi == 1).all()


KEYED = """
@R.function
def main(x: R.Tensor((3, 4), "float32"), k: R.Tensor((), "int64")):
    with R.dataflow():
        t = R.nn.dropout(x, KEY, rate=0.25, training=True)
        y = t[0]
        R.output(y)
    return y
"""


def test_key_is_a_keyword_operand_that_prints_and_parses_back():
    mod = retrograd.parse(KEYED.replace("KEY", "key=k"))
    text = mod.script()
    assert "R.nn.dropout(x, key=k, rate=0.25, training=True)" in text
    retrograd.assert_structural_equal(retrograd.parse(text), mod)
    x = np.random.default_rng(0).normal(size=(3, 4)).astype("float32")
    got = build(mod)["main"](x, np.array(9, "int64"))
    np.testing.assert_array_equal(got, dropout(x, np.array(9, "int64"), rate=0.25, training=True)[0])
    # a positional value after the data is TVM's rate, as before
    tvm_form = retrograd.parse(KEYED.replace("KEY, ", "").replace("rate=0.25, training=True", "0.75"))
    assert "R.nn.dropout(x, rate=0.75)" in tvm_form.script()


@pytest.mark.parametrize("key_type, message", [
    ('R.Tensor((), "float32")', "the key must be an integer tensor, got dtype float32"),
    ('R.Tensor((2,), "int64")', "the key must be 0-d, got 1-D"),
])
def test_bad_keys_are_located_errors(key_type, message):
    text = KEYED.replace("KEY", "key=k").replace('R.Tensor((), "int64")', key_type)
    with pytest.raises(retrograd.errors.TypeInferenceError, match=message) as info:
        retrograd.parse(text)
    assert info.value.span is not None and "argument 'key'" in str(info.value)


def test_gradient_at_a_fixed_key_matches_float64_finite_differences():
    from retrograd.testing import check_gradients

    text = """
@R.function
def main(x: R.Tensor((4, 5), "float64"), w: R.Tensor((5, 3), "float64"), k: R.Tensor((), "int64")) -> R.Tensor((), "float64"):
    with R.dataflow():
        d = R.nn.dropout(R.tanh(R.matmul(x, w)), key=k, rate=0.4, training=True, seed=2)
        s = R.sum(R.multiply(d[0], d[0]))
        R.output(s)
    return s
"""
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(4, 5)), rng.normal(size=(5, 3))
    mod = retrograd.parse(text)
    for key in (0, 1):
        report = check_gradients(mod, "main", [x, w, np.array(key, "int64")], require_grads=[0, 1])
        assert report.ok, report


# -- train and eval modes ---------------------------------------------------------------------------

def test_calls_get_their_own_stream_and_each_key_a_fresh_mask():
    text = """
@R.function
def main(a: R.Tensor((40, 50), "float32")):
    with R.dataflow():
        d1 = R.nn.dropout(a, rate=0.5)
        d2 = R.nn.dropout(a, rate=0.5)
        out = (d1[1], d2[1])
        R.output(out)
    return out
"""
    func = retrograd.parse(text)["main"]
    assert count_dropouts(func) == 2
    trained = train_mode(func)
    assert [p.name_hint for p in trained.params] == ["a", DROPOUT_KEY]
    ex = build(retrograd.IRModule({"main": trained}))
    a = np.ones((40, 50), "float32")
    (m1, m2), (n1, n2), (again, _) = (ex["main"](a, np.array(k, "int64")) for k in (0, 1, 0))
    assert (m1 != m2).any() and (m1 != n1).any() and (m2 != n2).any()
    np.testing.assert_array_equal(m1, again)
    # the documented rule: call k of n draws with seed * n + k
    np.testing.assert_array_equal(m2, dropout(a, np.array(0, "int64"), rate=0.5, training=True, seed=1)[1])


def test_predict_and_evaluate_run_dropout_as_the_identity():
    x, y = _data()
    t = _trainer()
    plain = Trainer(setup_trainer(retrograd.parse(_plain_net()), CrossEntropyLoss(), Adam(0.01)))
    for _ in range(2):
        t.step(x, y)
    plain.set_params(t.params)
    np.testing.assert_array_equal(t.predict(x), plain.predict(x))
    np.testing.assert_array_equal(t.predict(x), t.predict(x))
    assert t.evaluate(x, y) == t.evaluate(x, y) == plain.evaluate(x, y)
    assert "training" not in t.mod["backbone"].script() + t.mod["backbone_loss"].script()


def test_the_step_key_changes_the_loss_and_advances_by_one():
    x, y = _data()
    t = _trainer(seed=3)
    assert t.state_names[-1] == DROPOUT_KEY and int(t.state[DROPOUT_KEY]) == 3 << 32
    assert int(_trainer(seed=4).state[DROPOUT_KEY]) == 4 << 32
    losses = [float(t.exe["backbone_loss_train"](*_args(t, x, y, k))) for k in (0, 1, 0)]
    assert losses[0] != losses[1] and losses[0] == losses[2]
    for i in range(3):  # each step's loss (before its update) is the train-mode loss at the state's key
        expected = float(t.exe["backbone_loss_train"](*_args(t, x, y, (3 << 32) + i)))
        assert t.step(x, y) == expected
        assert int(t.state[DROPOUT_KEY]) == (3 << 32) + i + 1


def test_train_mode_false_trains_without_dropout():
    x, y = _data()
    t = _trainer(train_mode=False, seed=1)
    plain = _trainer(_plain_net(), seed=1)
    assert DROPOUT_KEY not in t.state_names and "backbone_loss_train" not in t.mod
    assert [t.step(x, y) for _ in range(4)] == [plain.step(x, y) for _ in range(4)]


def test_save_and_resume_reproduce_the_next_losses_exactly(tmp_path):
    x, y = _data()
    t = _trainer(seed=2)
    for _ in range(3):
        t.step(x, y)
    t.save_state(tmp_path / "s.npz")
    u = _trainer(seed=7)
    u.load_state(tmp_path / "s.npz")
    assert int(u.state[DROPOUT_KEY]) == (2 << 32) + 3
    assert [u.step(x, y) for _ in range(4)] == [t.step(x, y) for _ in range(4)]
    # without the key (parameters only), the masks, hence the losses, differ
    v = _trainer(seed=7)
    v.set_params(u.params)
    w = _trainer(seed=7)
    w.load_state_dict(u.state_dict())
    assert v.step(x, y) != w.step(x, y)


def test_checkpointed_step_recomputes_the_same_masks_bitwise():
    if not hasattr(retrograd.passes, "Checkpoint"):
        pytest.skip("no checkpoint pass")
    static = NET.replace('"n"', "32")
    plain = setup_trainer(retrograd.parse(static), CrossEntropyLoss(), SGD(0.1))
    with pytest.raises(retrograd.errors.DiagnosticError) as info:
        setup_trainer(retrograd.parse(static), CrossEntropyLoss(), SGD(0.1), checkpoint=1)
    least = info.value.least_feasible
    ckpt = setup_trainer(retrograd.parse(static), CrossEntropyLoss(), SGD(0.1), checkpoint=least)
    assert well_formed(ckpt) == []
    assert count_dropouts(ckpt["train_step"]) > count_dropouts(plain["train_step"])  # recomputed, not kept
    x, y = _data()
    a, b = Trainer(plain), Trainer(ckpt)
    a.init_params(seed=2)
    b.init_params(seed=2)
    for _ in range(3):
        assert a.step(x, y) == b.step(x, y)
        for n in a.param_names:
            np.testing.assert_array_equal(b.params[n], a.params[n])


def test_steps_match_torch_given_the_same_masks():
    torch = need("torch")
    x, y = _data()
    t = _trainer(opt=Adam(0.01), seed=1)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in t.params.items()}
    opt = torch.optim.Adam(list(p.values()), lr=0.01)
    ones = np.ones((len(x), 16), "float32")
    ours, theirs = [], []
    for _ in range(6):
        key = t.state[DROPOUT_KEY]
        # the masks this step draws: calls 0 and 1 of 2, default seed 0 -> seeds 0 and 1
        m1, m2 = (torch.tensor(dropout(ones, key, rate=RATE, training=True, seed=s)[1]) for s in (0, 1))
        ours.append(t.step(x, y))
        opt.zero_grad()
        h1 = torch.relu(torch.tensor(x) @ p["w1"] + p["b1"]) * m1 / (1 - RATE)
        h2 = torch.relu(h1 @ p["w2"] + p["b2"]) * m2 / (1 - RATE)
        out = torch.nn.functional.cross_entropy(h2 @ p["w3"] + p["b3"], torch.tensor(y))
        out.backward()
        opt.step()
        theirs.append(out.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    for k, v in p.items():
        np.testing.assert_allclose(t.params[k], v.detach().numpy(), rtol=1e-4, atol=1e-5)
