"""Independent heavy kernels run two at a time (runtime/pairs.py): the same values, the same measured
peak, errors at the moved kernel's own binding, and the pairing rule on instruction lists."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import retrograd
from retrograd.errors import ExecutionError
from retrograd.ops.kernels import parallel
from retrograd.runtime import pairs

TWO_CONVS = """
@R.function
def main(x: R.Tensor(("n", "c", 16, 16), dtype="float32"), y: R.Tensor(("n", "d", 16, 16), dtype="float32"), w1: R.Tensor((16, 16, 3, 3), dtype="float32"), w2: R.Tensor((16, 16, 3, 3), dtype="float32")) -> R.Tensor(("n", 16, 16, 16), dtype="float32"):
    with R.dataflow():
        a = R.nn.conv2d(x, w1, padding=[1, 1, 1, 1])
        b = R.nn.conv2d(y, w2, padding=[1, 1, 1, 1])
        s = R.add(a, b)
        R.output(s)
    return s
"""


def naive_conv(x, w):
    """'Same' 3x3 cross-correlation in float64 from sliding windows."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # n, c, h, w, 3, 3
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64))


def _lowered_fns(ex, name="main"):
    ex[name]  # a function is lowered on first use
    return [ins[0].__name__ for ins in ex._programs[name].block.code]


@pytest.fixture
def set_threads():
    """parallel.set_num_threads, reset to the environment's default after the test."""
    yield parallel.set_num_threads
    parallel.set_num_threads(None)


@pytest.fixture
def two_threads(set_threads):
    set_threads(2)


def _inputs(seed=0, c=16, d=16):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in ((8, c, 16, 16), (8, d, 16, 16), (16, 16, 3, 3), (16, 16, 3, 3))]


def test_two_independent_convolutions_run_as_a_pair_with_the_same_values_and_peak(two_threads, monkeypatch):
    mod = retrograd.parse(TWO_CONVS)
    ex = retrograd.build(mod)
    assert _lowered_fns(ex)[:2] == ["fork", "take"]
    x, y, w1, w2 = _inputs()
    got = ex["main"](x, y, w1, w2)
    np.testing.assert_allclose(got, naive_conv(x, w1) + naive_conv(y, w2), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(pairs, "partners", lambda ins: {})
    alone = retrograd.build(mod)
    assert "fork" not in _lowered_fns(alone)
    np.testing.assert_allclose(alone["main"](x, y, w1, w2), got, rtol=1e-6, atol=1e-5)
    assert ex.stats.peak_live_bytes == alone.stats.peak_live_bytes > 0


def test_one_thread_runs_the_pair_in_order(set_threads, monkeypatch):
    ex = retrograd.build(retrograd.parse(TWO_CONVS))
    x, y, w1, w2 = _inputs(1)
    started = []
    monkeypatch.setattr(parallel, "_get_workers", lambda n: started.append(n) or [])
    set_threads(1)
    got = ex["main"](x, y, w1, w2)
    assert not started
    np.testing.assert_allclose(got, naive_conv(x, w1) + naive_conv(y, w2), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", ["a", "b"])
def test_an_error_is_raised_at_the_failing_binding(two_threads, bad):
    """The moved kernel (b) fails on the kernel thread: its error surfaces at its own binding, with
    its inputs; a failure of the kernel run in place (a) waits for the other before surfacing."""
    ex = retrograd.build(retrograd.parse(TWO_CONVS))
    x, y, w1, w2 = _inputs(2, c=15 if bad == "a" else 16, d=15 if bad == "b" else 16)
    with pytest.raises(ExecutionError) as info:
        ex["main"](x, y, w1, w2)
    first = str(info.value).splitlines()[0]
    assert f"binding '{bad}' = R.nn.conv2d(" in first and "data has 15 channels" in first
    # The executor (and its kernel thread) stays usable.
    x, y, w1, w2 = _inputs(3)
    np.testing.assert_allclose(ex["main"](x, y, w1, w2), naive_conv(x, w1) + naive_conv(y, w2), rtol=1e-4, atol=1e-4)


def test_small_inputs_run_in_order(two_threads, monkeypatch):
    """Below PAIR_MIN_BYTES of inputs the hand-off would cost more than it saves."""
    ex = retrograd.build(retrograd.parse(TWO_CONVS))
    called = []
    real = parallel.run_pair
    monkeypatch.setattr(parallel, "run_pair", lambda here, aside: called.append(1) or real(here, aside))
    x, y, w1, w2 = _inputs(4)
    ex["main"](x, y, w1, w2)
    assert called == [1]
    x, y = x[:1], y[:1]  # 16 KiB each
    np.testing.assert_allclose(ex["main"](x, y, w1, w2), naive_conv(x, w1) + naive_conv(y, w2), rtol=1e-4, atol=1e-4)
    assert called == [1]


def _ins(out, reads=(), cost=10e6, moves=True, special=False):
    return SimpleNamespace(out=out, reads=set(reads), pair_cost=cost, moves=moves, special=special)


def test_partners_rule():
    # Independent and balanced: paired.
    assert pairs.partners([_ins(1, {0}), _ins(2, {0})]) == {0: 1}
    # The later one reads the earlier's result, or a value computed between them: not moved.
    assert pairs.partners([_ins(1, {0}), _ins(2, {1})]) == {}
    assert pairs.partners([_ins(1, {0}), _ins(2, {0}, cost=0), _ins(3, {2})]) == {}
    # A cheap instruction between them does not matter when the later one does not read it.
    assert pairs.partners([_ins(1, {0}), _ins(2, {0}, cost=0), _ins(3, {0})]) == {0: 2}
    # Too unbalanced, not movable, or past an If / a call: not paired.
    assert pairs.partners([_ins(1, {0}), _ins(2, {0}, cost=30e6)]) == {}
    assert pairs.partners([_ins(1, {0}), _ins(2, {0}, moves=False)]) == {}
    assert pairs.partners([_ins(1, {0}), _ins(2, {0}, cost=0, special=True), _ins(3, {0})]) == {}
    # Each kernel in one pair at most.
    assert pairs.partners([_ins(1, {0}), _ins(2, {0}), _ins(3, {0}), _ins(4, {0})]) == {0: 1, 2: 3}


def test_digits_step_pairs_its_convolution_gradients(two_threads, monkeypatch):
    """The data and weight gradients of the digits CNN's second convolution run as a pair; the step's
    loss and gradients equal the unpaired build's."""
    from retrograd.examples.digits import MODEL
    from retrograd.training import SGD, NLLLoss, setup_trainer

    mod = setup_trainer(retrograd.parse(MODEL), NLLLoss(), SGD(0.01))
    func = mod["train_step"]
    rng = np.random.default_rng(5)
    args = []
    for p in func.params:
        shape = [d if isinstance(d, int) else 32 for d in p.struct_info.shape]
        dtype = p.struct_info.dtype
        args.append(rng.integers(0, 10, shape).astype(dtype) if dtype == "int64" else (0.1 * rng.standard_normal(shape)).astype(dtype))
    ex = retrograd.build(mod)
    assert "fork" in _lowered_fns(ex, "train_step")
    got = ex["train_step"](*args)
    monkeypatch.setattr(pairs, "partners", lambda ins: {})
    want = retrograd.build(mod)["train_step"](*args)
    from retrograd.ir.nested import tuple_leaves

    for g, w in zip(tuple_leaves(got), tuple_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_no_pair_when_blas_threads_cannot_be_held(two_threads, monkeypatch):
    """Without threadpoolctl (and BLAS not kept to one thread by the environment), two kernels at once
    would each start BLAS threads: the pair runs in order."""
    monkeypatch.setattr(parallel, "_blas", [])
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    assert parallel.run_pair(lambda: 1, lambda: 2) is None
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert parallel.run_pair(lambda: 1, lambda: 2) == (1, (2, None))
