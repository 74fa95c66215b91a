"""Pooling and convolution whose windows are mostly padding (or far wider than the data) are computed
from their in-bounds taps (kernels/window_gather.py, kernels/conv_gather.py): the same values as the
regular kernels on ordinary geometries, and right (against a naive reference that enumerates input
positions, never taps) on attribute magnitudes the regular kernels could not lay out."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.ops import grad as grad_ops
from retrograd.ops.kernels import conv, conv_gather, conv_nd, pool, pool_nd, window_gather
from retrograd.passes import Gradient

BIG = 10**7


@pytest.fixture
def forced(monkeypatch):
    """Every geometry counts as degenerate: the gathered kernels run where the regular ones would."""
    monkeypatch.setattr(window_gather.Axis, "degenerate", lambda self: True)
    monkeypatch.setattr(conv_gather.TAxis, "degenerate", lambda self: True)


def _pool_cases(rng, nd, count):
    for _ in range(count):
        sp = tuple(int(v) for v in rng.integers(1, 6, nd))
        kw = dict(pool_size=tuple(int(v) for v in rng.integers(1, 4, nd)), strides=tuple(int(v) for v in rng.integers(1, 4, nd)),
                  dilation=tuple(int(v) for v in rng.integers(1, 3, nd)), padding=tuple(int(v) for v in rng.integers(0, 3, 2 * nd)),
                  ceil_mode=bool(rng.integers(2)), count_include_pad=bool(rng.integers(2)))
        x = rng.standard_normal((2, 3) + sp).astype("float32")
        if rng.integers(3) == 0:
            x = np.round(x)  # ties: the first maximum in row-major window order wins
        yield x, kw


def _pool_results(x, kw, nd):
    if nd == 2:
        y = pool.max_pool2d(x, **kw)
        g = np.random.default_rng(5).standard_normal(y.shape).astype("float32")
        u = np.random.default_rng(6).standard_normal(x.shape).astype("float32")
        return [y, pool.avg_pool2d(x, **kw), pool.max_pool2d_backward(g, x, **kw), pool.avg_pool2d_backward(g, x, **kw),
                grad_ops.max_pool2d_backward_grad_kernel(u, x, layout="NCHW", out_layout=None, **kw)]
    y = pool_nd.max_pool3d(x, **kw)
    g = np.random.default_rng(5).standard_normal(y.shape).astype("float32")
    u = np.random.default_rng(6).standard_normal(x.shape).astype("float32")
    return [y, pool_nd.avg_pool3d(x, **kw), pool_nd.max_pool3d_backward(g, x, **kw), pool_nd.avg_pool3d_backward(g, x, **kw),
            pool_nd.max_pool3d_backward_grad(u, x, grad_ops.max_pool2d_backward_grad_kernel, **kw)]


@pytest.mark.parametrize("nd", [2, 3])
def test_gathered_pooling_equals_the_regular_kernels(nd, monkeypatch):
    rng = np.random.default_rng(nd)
    checked = 0
    for x, kw in _pool_cases(rng, nd, 60):
        try:
            want = _pool_results(x, kw, nd)
        except Exception:  # noqa: BLE001 - a window that does not fit: both paths refuse it alike
            continue
        with monkeypatch.context() as m:
            m.setattr(window_gather.Axis, "degenerate", lambda self: True)
            got = _pool_results(x, kw, nd)
        for w, g in zip(want, got):
            assert w.shape == g.shape
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=str(kw))
        checked += 1
    assert checked > 30


@pytest.mark.parametrize("nd", [2, 3])
def test_gathered_convolutions_equal_the_regular_kernels(nd, monkeypatch):
    rng = np.random.default_rng(10 + nd)
    fn, fnt = (conv.conv2d, conv.conv2d_transpose) if nd == 2 else (conv_nd.conv3d, conv_nd.conv3d_transpose)
    checked = 0
    for _ in range(40):
        sp, ks = tuple(int(v) for v in rng.integers(1, 6, nd)), tuple(int(v) for v in rng.integers(1, 4, nd))
        s, d = tuple(int(v) for v in rng.integers(1, 3, nd)), tuple(int(v) for v in rng.integers(1, 3, nd))
        groups = int(rng.choice([1, 2]))
        kw = dict(strides=s, padding=tuple(int(v) for v in rng.integers(0, 3, 2 * nd)), dilation=d, groups=groups)
        out_pad = tuple(int(rng.integers(0, max(a, b))) for a, b in zip(s, d))
        x = rng.standard_normal((2, 2 * groups) + sp).astype("float32")
        w = rng.standard_normal((2 * groups, 2) + ks).astype("float32")
        wt = rng.standard_normal((2 * groups, 2) + ks).astype("float32")
        for call in (lambda: fn(x, w, **kw), lambda: fnt(x, wt, output_padding=out_pad, **kw)):
            try:
                want = call()
            except Exception:  # noqa: BLE001 - both paths refuse a geometry that does not fit
                continue
            with monkeypatch.context() as m:
                m.setattr(window_gather.Axis, "degenerate", lambda self: True)
                m.setattr(conv_gather.TAxis, "degenerate", lambda self: True)
                got = call()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=str(kw))
            checked += 1
    assert checked > 40


def _naive_positions(n, k, s, d, p0, n_out):
    """For each window, the input positions it reads, found by enumerating the input (never the taps)."""
    out = []
    for o in range(n_out):
        hits = [i for i in range(n) if (i + p0 - o * s) % d == 0 and 0 <= (i + p0 - o * s) // d < k]
        out.append(hits)
    return out


def test_a_pool_of_huge_windows_strides_and_padding_on_a_small_input():
    x = np.arange(16, dtype="float32").reshape(1, 1, 4, 4) - 5
    kw = dict(pool_size=(BIG, 3), strides=(BIG, 2), padding=(BIG - 2, 1, BIG, 1), dilation=(1, 1), ceil_mode=True)
    win = pool.Window2d("max_pool2d", (4, 4), kw["pool_size"], kw["strides"], kw["padding"], kw["dilation"], True)
    rows = _naive_positions(4, BIG, BIG, 1, BIG - 2, win.oh)
    cols = _naive_positions(4, 3, 2, 1, 1, win.ow)
    want_max = np.full((win.oh, win.ow), -np.inf, "float32")
    want_avg = np.zeros((win.oh, win.ow), "float32")
    for a, r in enumerate(rows):
        for b, c in enumerate(cols):
            cells = x[0, 0][np.ix_(r, c)]
            if cells.size:
                want_max[a, b], want_avg[a, b] = cells.max(), cells.mean()
    np.testing.assert_array_equal(pool.max_pool2d(x, **kw)[0, 0], want_max)
    np.testing.assert_allclose(pool.avg_pool2d(x, **kw)[0, 0], want_avg, rtol=1e-6)
    # The gradient of the sum of maxima: one per window, at its first maximum (the bottom-right here).
    dx = pool.max_pool2d_backward(np.ones((1, 1, win.oh, win.ow), "float32"), x, **kw)
    want_dx = np.zeros((4, 4), "float32")
    for r in rows:
        for c in cols:
            if r and c:
                sub = x[0, 0][np.ix_(r, c)]
                i, j = np.unravel_index(np.argmax(sub), sub.shape)
                want_dx[r[i], c[j]] += 1
    np.testing.assert_array_equal(dx[0, 0], want_dx)


def test_a_convolution_with_huge_strides_padding_and_dilation_on_a_small_input():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 4, 4)).astype("float32")
    w = rng.standard_normal((3, 2, 3, 3)).astype("float32")
    kw = dict(strides=(BIG, 1), padding=(BIG, 1, BIG, 1), dilation=(BIG, 2))
    y = conv.conv2d(x, w, **kw)
    # Naive: out[f, a, b] = sum over (c, i, j) of x[c, pos] * w[f, c, i, j] for in-bounds positions.
    oh, ow = y.shape[2:]
    want = np.zeros((3, oh, ow))
    for a in range(oh):
        for b in range(ow):
            for i in range(3):
                for j in range(3):
                    r, c = a * BIG - BIG + i * BIG, b * 1 - 1 + j * 2
                    if 0 <= r < 4 and 0 <= c < 4:
                        want[:, a, b] += w[:, :, i, j] @ x[0, :, r, c]
    np.testing.assert_allclose(y[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call", [
    "R.nn.max_pool2d(x, [10000000, 10000000], strides=[10000000, 10000000], padding=[10000000, 10000000, 10000000, 10000000])",
    "R.nn.avg_pool3d(x3, [2, 2, 2], strides=[10000000, 10000000, 10000000], padding=[10000000, 10000000, 10000000, 10000000, 10000000, 10000000], ceil_mode=True)",
    "R.nn.max_pool1d(x1, [10000000], strides=[10000000], padding=[10000000, 10000000], count_include_pad=True)",
    "R.nn.conv3d(x3, w3, strides=[10000000, 10000000, 10000000], padding=[10000000, 10000000, 10000000, 10000000, 10000000, 10000000])",
    "R.nn.conv2d(x, w, strides=[10000000, 10000000], padding=[10000000, 10000000, 10000000, 10000000], dilation=[10000000, 10000000])",
])
def test_window_ops_with_huge_attributes_run_and_differentiate_like_their_reference(call):
    """Forward and gradient, through the executor, against finite differences (windows of padding only
    are -inf in a max pool: the sum clamps them)."""
    text = ('@R.function\ndef main(x: R.Tensor((1, 2, 4, 4), "float32"), w: R.Tensor((2, 2, 3, 3), "float32"), '
            'x1: R.Tensor((1, 2, 4), "float32"), x3: R.Tensor((1, 2, 3, 3, 3), "float32"), '
            f'w3: R.Tensor((2, 2, 2, 2, 2), "float32")):\n    y = {call}\n'
            '    z = R.sum(R.maximum(y, R.const(-100.0, "float32")))\n    return z\n')
    mod = Gradient("main")(retrograd.parse(text))
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(s).astype("float32") for s in ((1, 2, 4, 4), (2, 2, 3, 3), (1, 2, 4), (1, 2, 3, 3, 3), (2, 2, 2, 2, 2))]
    value, grads = retrograd.build(mod)["main_adjoint"](*args)
    f = retrograd.build(mod)["main"]
    assert np.isclose(float(value), float(f(*args)))
    for k, (a, g) in enumerate(zip(args, grads)):
        for idx in list(np.ndindex(a.shape))[:: max(1, a.size // 6)]:
            hi, lo = [list(args) for _ in range(2)]
            hi[k], lo[k] = a.copy(), a.copy()
            hi[k][idx] += 1e-2
            lo[k][idx] -= 1e-2
            fd = (float(f(*hi)) - float(f(*lo))) / 2e-2
            assert abs(fd - float(g[idx])) < 2e-2, (k, idx, fd, g[idx])
