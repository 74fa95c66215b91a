"""Kernels split over threads (ops/kernels/parallel.py, runtime/split.py): every split path against the
naive references of the kernel tests, the executor's split elementwise ops against NumPy, and the
thread pool's own contract (errors, nesting, BLAS threads restored, settings)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ops.ref_nn import naive_avg_backward, naive_conv2d, naive_conv2d_transpose, naive_max, naive_max_backward, naive_weight_grad, tvm_weight_grad

import retrograd
import retrograd.tuning as tuning
from retrograd.ops.kernels import conv, parallel, pool
from retrograd.runtime import split
from optional import need  # noqa: E402


@pytest.fixture(params=[1, 2, 3])
def threads(request, monkeypatch):
    """Kernels on 1-3 threads, splitting even the smallest work."""
    monkeypatch.setattr(tuning, "MIN_PART_NS", 0)
    monkeypatch.setattr(tuning, "WAKE_NS", 0)
    monkeypatch.setattr(tuning, "MATMUL_MIN_PART_NS", 0)
    # BLAS work splits only when BLAS can be held to one thread: say it can (threadpoolctl may be absent).
    monkeypatch.setattr(parallel, "_blas_single_by_env", lambda: True)
    parallel.set_num_threads(request.param)
    yield request.param
    parallel.set_num_threads(None)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("s,p,d", [((1, 1), (1, 1, 1, 1), (1, 1)), ((2, 2), (0, 1, 2, 0), (1, 1)), ((1, 2), (0, 0, 0, 0), (2, 1))])
def test_conv2d_and_gradients_split_over_images(threads, s, p, d):
    x, w = _rand((5, 3, 9, 8), 0), _rand((4, 3, 3, 3), 1)
    y = conv.conv2d(x, w, strides=s, padding=p, dilation=d)
    np.testing.assert_allclose(y, naive_conv2d(x, w, s, p, d, 1), rtol=1e-10, atol=1e-12)
    gy = _rand(y.shape, 2)
    np.testing.assert_allclose(tvm_weight_grad(x, gy, w.shape, s, p, d, 1), naive_weight_grad(x, gy, w.shape, s, p, d, 1),
                               rtol=1e-10, atol=1e-11)
    oph = (x.shape[2] + p[0] + p[2] - d[0] * 2 - 1) % s[0]
    opw = (x.shape[3] + p[1] + p[3] - d[1] * 2 - 1) % s[1]
    dx = conv.conv2d_transpose(gy, w, strides=s, padding=p, dilation=d, output_padding=(oph, opw))
    np.testing.assert_allclose(dx, naive_conv2d_transpose(gy, w, s, p, (oph, opw), d, 1), rtol=1e-10, atol=1e-11)


def test_split_results_do_not_depend_on_the_thread_count(monkeypatch):
    x, w = _rand((7, 4, 10, 10), 3).astype(np.float32), _rand((6, 4, 3, 3), 4).astype(np.float32)
    monkeypatch.setattr(tuning, "MIN_PART_NS", 0)
    monkeypatch.setattr(tuning, "WAKE_NS", 0)
    monkeypatch.setattr(parallel, "_blas_single_by_env", lambda: True)
    outs = []
    for t in (1, 2, 4):
        parallel.set_num_threads(t)
        outs.append((conv.conv2d(x, w, padding=1), conv.conv2d_transpose(x[:, :4], w[:4, :3]),
                     pool.max_pool2d(x, pool_size=3, strides=2)))
    parallel.set_num_threads(None)
    for other in outs[1:]:
        # Pooling is the same arithmetic on any thread; a GEMM's blocking may depend on how many
        # columns it gets (OpenBLAS's AVX-512 kernels round edge columns differently): equal to rounding.
        for a, b in zip(outs[0][:2], other[:2]):
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)
        assert np.array_equal(outs[0][2], other[2])


@pytest.mark.parametrize("k,s,p", [((2, 2), (2, 2), (0, 0, 0, 0)), ((3, 3), (2, 2), (1, 1, 1, 1)), ((3, 2), (1, 1), (0, 1, 0, 1))])
def test_pooling_split_over_planes(threads, k, s, p):
    # Integers as floats: ties between taps, so the first-maximum rule is exercised in every part.
    x = np.random.default_rng(5).integers(0, 4, (3, 5, 11, 9)).astype(np.float64)
    attrs = {"pool_size": k, "strides": s, "padding": p}
    y = pool.max_pool2d(x, **attrs)
    np.testing.assert_array_equal(y, naive_max(x, k, s, p, (1, 1), False))
    g = _rand(y.shape, 6)
    np.testing.assert_allclose(pool.max_pool2d_backward(g, x, **attrs), naive_max_backward(g, x, k, s, p, (1, 1), False),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(pool.avg_pool2d_backward(g, x, **attrs), naive_avg_backward(g, x, k, s, p, (1, 1), False, False),
                               rtol=1e-12, atol=1e-12)


SPLIT_MODULE = """
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((64, 16, 32, 32), dtype="float32"), b: R.Tensor((1, 16, 1, 1), dtype="float32"), g: R.Tensor((64, 16, 32, 32), dtype="float32")):
        with R.dataflow():
            h = R.add(x, b)
            r = R.nn.relu(h)
            m = R.greater(r, R.const(0.5, "float32"))
            d = R.where(m, g, R.const(0.0, "float32"))
            e = R.multiply(d, r)
            out = R.subtract(e, x)
            R.output(out, r)
        return (out, r)
"""


def test_executor_splits_large_elementwise_results(threads):
    assert split.splittable([retrograd.parse(SPLIT_MODULE)["main"].params[0].struct_info] * 2,
                            retrograd.parse(SPLIT_MODULE)["main"].params[0].struct_info, 4 << 20)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 16, 32, 32)).astype(np.float32)
    b = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, -0.0, np.inf, 0.5]
    out, r = retrograd.build(retrograd.parse(SPLIT_MODULE))["main"](x, b, g)
    h = x + b
    r_ref = np.where(h > 0, h, np.float32(0))
    r_ref[np.isnan(h)] = 0  # TVM's relu: NaN gives 0
    d_ref = np.where(r_ref > 0.5, g, np.float32(0))
    np.testing.assert_array_equal(r, r_ref)
    np.testing.assert_array_equal(out, d_ref * r_ref - x)
    assert x[0, 0, 0, 3] == 0.5  # the parameter was not overwritten by an in-place part


def test_small_and_mixed_results_are_not_split():
    from retrograd.ir.struct_info import TensorStructInfo

    big = TensorStructInfo((1024, 1024), "float32")
    assert not split.splittable([big, big], big, 1 << 10)  # too small to pay for threads
    assert not split.splittable([big, TensorStructInfo((1024, 1024), "float64")], big, 4 << 20)  # a cast
    assert not split.splittable([big], TensorStructInfo((1024, 1024), "int32"), 4 << 20)
    assert not split.splittable([big], TensorStructInfo((1024, "n"), "float32"), 4 << 20)


def test_a_failing_part_raises_after_every_part_finished(monkeypatch):
    monkeypatch.setattr(tuning, "MIN_PART_NS", 0)
    monkeypatch.setattr(tuning, "WAKE_NS", 0)
    parallel.set_num_threads(3)
    done = []

    def part(sl):
        if sl.start == 0:
            raise ValueError("part 0 failed")
        done.append(sl)
        return sl

    try:
        with pytest.raises(ValueError, match="part 0 failed"):
            parallel.run_parts(part, 9, 1.0)
        assert sorted(s.start for s in done) == [3, 6]
    finally:
        parallel.set_num_threads(None)


def test_parts_cover_the_range_and_nested_calls_run_inline(monkeypatch):
    monkeypatch.setattr(tuning, "MIN_PART_NS", 0)
    monkeypatch.setattr(tuning, "WAKE_NS", 0)
    parallel.set_num_threads(4)
    try:
        seen = []

        def inner(sl):
            return threading.current_thread().name, sl

        def outer(sl):
            seen.append(parallel.run_parts(inner, 8, 1.0))  # inside a part: one inline part
            return sl

        parts = parallel.run_parts(outer, 10, 1.0)
        assert [(s.start, s.stop) for s in parts] == [(0, 2), (2, 5), (5, 7), (7, 10)]
        assert all(len(r) == 1 and r[0][1] == slice(0, 8) for r in seen)
        assert parallel.split(5, 3) == [slice(0, 1), slice(1, 3), slice(3, 5)]
        assert parallel.split(2, 4) == [slice(0, 1), slice(1, 2)]
    finally:
        parallel.set_num_threads(None)


def _split_in_two(blas, seen: list) -> None:
    """A BLAS-holding split into parts on two threads; each part records the BLAS libraries' thread counts."""
    parallel.set_num_threads(2)
    try:
        parallel.run_parts(lambda sl: seen.append([c.get_num_threads() for c in blas]), 4, 1e9, blas=True)
    finally:
        parallel.set_num_threads(None)


def test_blas_threads_are_restored_after_a_split():
    threadpoolctl = need("threadpoolctl")
    blas = [c for c in threadpoolctl.ThreadpoolController().lib_controllers if c.user_api == "blas"]
    if not blas:
        pytest.skip("no BLAS library found by threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = [c.get_num_threads() for c in blas]
        seen = []
        _split_in_two(blas, seen)
        assert all(v == [1] * len(blas) for v in seen)  # one BLAS thread inside the parts
        assert [c.get_num_threads() for c in blas] == before


def test_thread_settings(monkeypatch):
    with pytest.raises(ValueError, match="positive int"):
        parallel.set_num_threads(0)
    with pytest.raises(ValueError, match="positive int"):
        parallel.set_num_threads(True)
    monkeypatch.setenv("RETROGRAD_NUM_THREADS", "3")
    parallel.set_num_threads(None)
    assert parallel.get_num_threads() == 3
    monkeypatch.delenv("RETROGRAD_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    parallel.set_num_threads(None)
    assert parallel.get_num_threads() == 1
    assert parallel.parts_for(100, 1e12) == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    parallel.set_num_threads(None)
    assert retrograd.get_num_threads() == parallel.get_num_threads() >= 1


@pytest.mark.parametrize("sa,sb", [((37, 5), (5, 3)), ((3, 5), (5, 41)), ((6, 4, 5), (6, 5, 3)), ((6, 4, 5), (5, 7)),
                                   ((2, 3, 4, 5), (2, 1, 5, 6)), ((1, 4, 5), (3, 5, 2)), ((5,), (5, 4)), ((7, 5), (5,)),
                                   ((0, 5), (5, 3)), ((4, 0), (0, 3)), ((2, 3, 4), (2, 4, 0)), ((2, 0, 4), (2, 4, 3))])
def test_split_matmul_equals_a_naive_product(threads, sa, sb):
    from retrograd.ops.kernels.matmul import matmul_parts as matmul

    rng = np.random.default_rng(8)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    a2 = a if a.ndim > 1 else a[None]
    b2 = b if b.ndim > 1 else b[:, None]
    naive = (a2[..., :, :, None] * b2[..., None, :, :]).sum(-2)  # broadcasting sum of products
    if a.ndim == 1:
        naive = naive[..., 0, :]
    if b.ndim == 1:
        naive = naive[..., 0]
    got = matmul(a, b)
    assert got.shape == naive.shape
    np.testing.assert_allclose(got, naive, rtol=1e-12, atol=1e-12)
    ints = matmul(a2.astype(np.int64), b2.astype(np.int64))  # not split: integer products
    np.testing.assert_array_equal(ints, np.matmul(a2.astype(np.int64), b2.astype(np.int64)))


def test_split_parts_keep_the_callers_numpy_error_state(threads):
    import warnings

    x = np.full((64, 1024, 8), 3e38, np.float32)
    mod = retrograd.parse("""
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((64, 1024, 8), dtype="float32")):
        with R.dataflow():
            y = R.multiply(x, R.const(10.0, "float32"))
            R.output(y)
        return y
""")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning from a part would fail here
        y = retrograd.build(mod)["main"](x)
    assert np.isinf(y).all()


def test_an_interrupted_wait_retires_the_workers(monkeypatch):
    import time

    monkeypatch.setattr(tuning, "MIN_PART_NS", 0)

    monkeypatch.setattr(tuning, "WAKE_NS", 0)
    parallel.set_num_threads(2)
    try:
        parallel.run_parts(lambda sl: sl, 4, 1.0)  # the worker exists
        worker = parallel._workers[0]

        def interrupted():
            raise KeyboardInterrupt

        monkeypatch.setattr(worker, "join", interrupted)
        with pytest.raises(KeyboardInterrupt):
            parallel.run_parts(lambda sl: time.sleep(0.05) or sl, 4, 1.0)
        assert worker not in parallel._workers
        monkeypatch.undo()
        parallel.set_num_threads(2)
        monkeypatch.setattr(tuning, "MIN_PART_NS", 0)
        monkeypatch.setattr(tuning, "WAKE_NS", 0)
        got = parallel.run_parts(lambda sl: (sl.start, sl.stop), 4, 1.0)  # a fresh worker, right results
        assert got == [(0, 2), (2, 4)]
    finally:
        parallel.set_num_threads(None)


def test_large_elementwise_results_make_a_module_split():
    assert retrograd.build(retrograd.parse(SPLIT_MODULE))._splits  # large elementwise results split


@pytest.mark.parametrize("shape,to", [((7, 5, 3, 4), (1, 5, 1, 1)), ((7, 5, 3), (5, 3)), ((6, 4), (1,)), ((0, 3), (3,)), ((5,), ())])
def test_collapse_sum_splits_the_batch(threads, shape, to):
    from retrograd.ops.manipulate.shape import collapse_sum

    x = _rand(shape, 9)
    lead = len(shape) - len(to)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(to) if s == 1 and shape[lead + i] != 1)
    naive = np.zeros(to)
    for idx in np.ndindex(*shape):  # every element added into the cell it collapses to
        cell = tuple(0 if (lead + i) in axes else idx[lead + i] for i in range(len(to)))
        naive[cell] += x[idx]
    np.testing.assert_allclose(collapse_sum(x, to), naive, rtol=1e-12, atol=1e-12)


def test_the_callers_part_is_larger_by_the_workers_wake_up(monkeypatch):
    """A worker starts WAKE_NS after the caller's own part: the caller takes that much more work, and
    a split must leave each worker at least MIN_PART_NS."""
    monkeypatch.setattr(tuning, "MIN_PART_NS", 50)
    monkeypatch.setattr(tuning, "WAKE_NS", 100)
    parallel.set_num_threads(2)
    try:
        assert parallel.parts_for(1000, 149) == 1  # (149 - 100) / 50 < 1: the worker's share is too small
        assert parallel.parts_for(1000, 400) == 2
        for n, parts, lead in [(1000, 2, 0.25), (7, 3, 0.1), (10, 4, 0.0), (3, 2, 0.4)]:
            slices = parallel.split(n, parts, lead)
            sizes = [s.stop - s.start for s in slices]
            assert slices[0].start == 0 and slices[-1].stop == n
            assert all(a.stop == b.start for a, b in zip(slices, slices[1:])) and min(sizes) > 0
            want_first = n * (1 + lead * (parts - 1)) / parts
            assert abs(sizes[0] - want_first) <= 1
        got = parallel.run_parts(lambda sl: (sl.start, sl.stop), 1000, 400)
        assert got == [(0, 625), (625, 1000)]  # lead 100 / 400: the caller takes (1 + 1/4) / 2
    finally:
        parallel.set_num_threads(None)


def test_blas_loaded_after_the_first_split_is_held_too():
    """scipy (imported after retrograd's first split) brings its own OpenBLAS: inside a part it is held to
    one thread as well."""
    threadpoolctl = need("threadpoolctl")
    _split_in_two([], [])  # the BLAS controllers are found now
    need("scipy.linalg")
    blas = [c for c in threadpoolctl.ThreadpoolController().lib_controllers if c.user_api == "blas"]
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        seen = []
        _split_in_two(blas, seen)
        assert seen and all(v == [1] * len(blas) for v in seen)
