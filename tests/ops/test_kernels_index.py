"""take and take_backward against naive loops over the indices, NumPy's take, and PyTorch."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ops.helpers import UINT64_BEYOND_INT64

from retrograd.errors import KernelError
from retrograd.ops.kernels import index
from optional import need  # noqa: E402


def naive_take(x, idx, axis, mode):
    src = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis % x.ndim
    n = src.shape[ax]
    out_shape = src.shape[:ax] + np.shape(idx) + src.shape[ax + 1 :]
    out = np.zeros(out_shape, src.dtype)
    for pos in itertools.product(*map(range, np.shape(idx))):
        i = int(np.asarray(idx)[pos])
        if mode == "clip":
            i = min(max(i, 0), n - 1)
        elif mode == "wrap":
            i %= n
        elif i < 0:
            i += n
        pre = (slice(None),) * ax
        if mode == "nan" and not 0 <= int(np.asarray(idx)[pos]) < n:
            out[pre + pos] = np.nan
        else:
            out[pre + pos] = np.take(src, i, axis=ax)
    return out


def naive_take_backward(g, x, idx, axis):
    src_shape = (x.size,) if axis is None else x.shape
    ax = 0 if axis is None else axis % x.ndim
    dx = np.zeros(src_shape)
    n = src_shape[ax]
    for pos in itertools.product(*map(range, np.shape(idx))):
        i = int(np.asarray(idx)[pos]) % n
        pre = (slice(None),) * ax
        dx[pre + (i,)] += g[pre + pos]
    return dx.reshape(x.shape)


X = np.random.default_rng(0).standard_normal((5, 4, 3))
CASES = [  # (indices, axis): duplicates, negatives, 0-d and empty indices, every axis form
    (np.array([0, 4, 4, -1, 2, -5]), 0),
    (np.array([[1, 1], [-2, 3]]), 1),
    (np.array([2, 0, 0, 0]), -1),
    (np.array(3), 0),
    (np.array([], dtype=np.int64), 2),
    (np.array([[0, 59], [-60, 7]]), None),  # flattened
    (np.array([1, 1, 1], dtype=np.int32), 2),
    (np.array([4, 0], dtype=np.uint8), 0),
]


@pytest.mark.parametrize("idx, axis", CASES)
def test_take_matches_naive_and_numpy(idx, axis):
    got = index.take(X, idx, axis=axis)
    np.testing.assert_array_equal(got, naive_take(X, idx, axis, "fast"))
    np.testing.assert_array_equal(got, np.take(X, idx, axis=axis))


@pytest.mark.parametrize("mode", ["clip", "wrap", "nan"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_take_modes(mode, axis):
    idx = np.array([[-7, -1, 0], [3, 4, 100]])
    np.testing.assert_array_equal(index.take(X, idx, axis=axis, mode=mode), naive_take(X, idx, axis, mode))


@pytest.mark.parametrize("idx, axis", CASES)
def test_take_backward_matches_naive(idx, axis):
    g = np.random.default_rng(1).standard_normal(np.take(X, idx, axis=axis).shape)
    got = index.take_backward(g, X, idx, axis=axis)
    assert got.shape == X.shape and got.dtype == X.dtype
    np.testing.assert_allclose(got, naive_take_backward(g, X, idx, axis), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "counts",
    [
        [1] * 50,  # all distinct: one round
        [3, 1, 2, 5, 1],  # a few duplicates: rounds, then the tail
        [2000, 1, 1],  # one heavy index: the reduceat tail
        [3] * 300 + [40] * 2,  # three full rounds (>= 256 rows each), then a tail of two heavy indices
    ],
)
@pytest.mark.parametrize("axis", [0, 1])
def test_take_backward_duplicates_accumulate(counts, axis):
    rng = np.random.default_rng(2)
    rows = len(counts) + 3
    x = np.zeros((rows, 6)) if axis == 0 else np.zeros((6, rows))
    idx = rng.permutation(np.repeat(np.arange(len(counts)), counts))
    idx = np.where(rng.random(idx.size) < 0.3, idx - rows, idx)  # some as negative indices
    g = rng.standard_normal(np.take(x, idx, axis=axis).shape)
    got = index.take_backward(g, x, idx, axis=axis)
    expect = np.zeros_like(x)
    np.add.at(expect, (idx % rows,) if axis == 0 else (slice(None), idx % rows), g)
    np.testing.assert_allclose(got, expect, rtol=1e-10, atol=1e-12)


def test_take_backward_float32_and_inputs_untouched():
    x = X.astype("float32")
    idx = np.array([1, 1, -1])
    g = np.ones((3, 4, 3), "float32")
    snapshot = (x.copy(), idx.copy(), g.copy())
    out = index.take_backward(g, x, idx, axis=0)
    assert out.dtype == np.float32 and out[1].sum() == 24 and out[4].sum() == 12
    for a, b in zip((x, idx, g), snapshot):
        np.testing.assert_array_equal(a, b)


def test_take_backward_modes():
    idx = np.array([-7, 6, 2])
    g = np.ones((3, 4, 3))
    clip = index.take_backward(g, X, idx, axis=0, mode="clip")
    assert clip[0].sum() == 12 and clip[4].sum() == 12 and clip[2].sum() == 12
    wrap = index.take_backward(g, X, idx, axis=0, mode="wrap")
    assert wrap[3].sum() == 12 and wrap[1].sum() == 12
    nan = index.take_backward(g, X, idx, axis=0, mode="nan")
    assert nan.sum() == 12 and nan[2].sum() == 12


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: index.take(X, np.array([5]), axis=0), "take: index 5 out of range for axis 0 of size 5"),
        (lambda: index.take(X, np.array([0, -6]), axis=0), "index -6 out of range"),
        (lambda: index.take(X, np.array([60]), axis=None), "index 60 out of range for axis None of size 60"),
        (lambda: index.take_backward(np.zeros((1, 4, 3)), X, np.array([9]), axis=0), "take_backward: index 9"),
        (lambda: index.take(X, np.array([0]), axis=3), "axis 3 out of range"),
        (lambda: index.take(X, np.array([0.0]), axis=0), "integer dtype"),
        (lambda: index.take(X, np.array([0]), axis=0, mode="raise"), "mode"),
        (lambda: index.take(np.zeros((0, 2)), np.array([0]), axis=0), "size 0"),
        (lambda: index.take(np.arange(3), np.array([5]), mode="nan"), "float array"),
        (lambda: index.take_backward(np.zeros((2, 4, 3)), X, np.array([1]), axis=0), "output_grad has shape"),
    ],
)
def test_bad_inputs_raise_kernel_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()


@pytest.mark.parametrize("axis", [0, 1])
def test_against_torch_embedding_backward(axis):
    torch = need("torch")
    rng = np.random.default_rng(3)
    table = rng.standard_normal((40, 8)) if axis == 0 else rng.standard_normal((8, 40))
    idx = rng.integers(-40, 40, (30, 7))
    tt = torch.tensor(table, requires_grad=True)
    out = torch.index_select(tt, axis, torch.tensor(idx % 40).reshape(-1))
    out = out.reshape(idx.shape + (8,)) if axis == 0 else out.reshape((8,) + idx.shape)
    g = rng.standard_normal(tuple(out.shape))
    out.backward(torch.tensor(g))
    np.testing.assert_array_equal(index.take(table, idx, axis=axis), out.detach().numpy())
    np.testing.assert_allclose(index.take_backward(g, table, idx, axis=axis), tt.grad.numpy(), rtol=1e-12, atol=1e-12)


def _naive_rows(mode, size):
    """Python ints (no wrap-around) mapped by the definition of each mode; None: dropped."""
    out = []
    for i in (int(v) for v in UINT64_BEYOND_INT64):
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
    np.testing.assert_array_equal(index.take(x, UINT64_BEYOND_INT64, axis=0, mode=mode), expected)
    g = np.array([1.0, 10.0, 100.0])
    dense = np.zeros(10)
    for r, v in zip(rows, g):
        if r is not None:
            dense[r] += v
    np.testing.assert_array_equal(index.take_backward(g, x, UINT64_BEYOND_INT64, axis=0, mode=mode), dense)


def test_take_fast_refuses_uint64_beyond_int64_instead_of_reading_from_the_end():
    with pytest.raises(KernelError, match=str(2**63 + 5)):
        index.take(np.arange(10.0), UINT64_BEYOND_INT64, axis=0)
    with pytest.raises(KernelError, match="out of range"):
        index.take_backward(np.ones(3), np.arange(10.0), UINT64_BEYOND_INT64, axis=0)
