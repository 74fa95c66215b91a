"""Pooling kernels against naive per-window loops, PyTorch, and finite differences of our own forward."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from ops.ref_nn import naive_avg, naive_avg_backward, naive_max, naive_max_backward, out_hw, windows

from retrograd.errors import KernelError
from retrograd.ops.kernels import pool
from retrograd.ops.kernels.window import window_positions
from optional import need  # noqa: E402

# -- cases ------------------------------------------------------------------------------------------

# (shape, pool_size, strides, padding (t, l, b, r), dilation, ceil_mode)
CASES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),  # non-overlapping
    ((2, 3, 9, 8), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),  # overlapping + padding
    ((1, 2, 7, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False),  # stride 1
    ((1, 2, 9, 10), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True),  # ceil_mode overhang
    ((2, 2, 5, 5), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), True),  # ceil: last window half outside
    ((2, 3, 9, 7), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),  # tiling windows; a row and a column unread
    ((1, 2, 9, 12), (3, 3), (3, 3), (0, 0, 0, 0), (1, 1), False),  # 3x3 tiles
    ((1, 2, 8, 9), (2, 3), (2, 1), (0, 1, 1, 0), (1, 1), False),  # asymmetric everything
    ((1, 2, 9, 9), (2, 2), (1, 1), (0, 0, 0, 0), (2, 2), False),  # dilation
    ((1, 1, 10, 11), (3, 2), (3, 2), (2, 1, 2, 1), (2, 3), True),  # dilation + stride + pad + ceil
    ((1, 1, 1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False),  # size-1 everything
    ((3, 1, 1, 6), (1, 3), (1, 2), (0, 1, 0, 1), (1, 1), True),  # size-1 height
    ((0, 2, 6, 6), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),  # empty batch
    ((1, 2, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), (1, 1), False),  # all-padding border windows
]


def _attrs(k, s, p, d, ceil, cip=False):
    return dict(pool_size=k, strides=s, padding=p, dilation=d, ceil_mode=ceil, count_include_pad=cip)


def _data(shape, seed=0, ties=False, dtype="float64"):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape) if ties else rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool2d_matches_naive(case, ties):
    shape, k, s, p, d, ceil = case
    x = _data(shape, ties=ties)
    expect = naive_max(x, k, s, p, d, ceil)
    np.testing.assert_array_equal(pool.max_pool2d(x, **_attrs(k, s, p, d, ceil)), expect)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64"])
def test_max_pool2d_of_integers_matches_naive(case, dtype):
    """Integer data (TVM and ONNX pool it): the naive windows' max, in the data's dtype, a window of padding
    alone giving the dtype's least value."""
    shape, k, s, p, d, ceil = case
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**40)), min(info.max, 2**40)
    x = np.random.default_rng(1).integers(lo, hi, shape, endpoint=True).astype(dtype)
    expect = naive_max(x.astype(np.float64), k, s, p, d, ceil)
    expect = np.where(np.isneginf(expect), info.min, expect).astype(dtype)
    got = pool.max_pool2d(x, **_attrs(k, s, p, d, ceil))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_max_pool_1d_3d_of_integers_on_both_backends(backend):
    import retrograd

    if backend == "torch":
        need("torch")
    kw = {} if backend == "numpy" else {"backend": "torch", "numpy_outputs": True}
    rng = np.random.default_rng(2)
    x1 = rng.integers(0, 256, (2, 3, 9)).astype("uint8")
    x3 = rng.integers(-128, 128, (1, 2, 4, 5, 6)).astype("int8")
    mod = retrograd.parse("""
@R.function
def main(a: R.Tensor((2, 3, 9), "uint8"), b: R.Tensor((1, 2, 4, 5, 6), "int8")) -> R.Tuple(R.Tensor((2, 3, 5), "uint8"), R.Tensor((1, 2, 2, 3, 3), "int8")):
    y = R.nn.max_pool1d(a, pool_size=[3], strides=[2], padding=[1, 1])
    z = R.nn.max_pool3d(b, pool_size=[2, 2, 2], strides=[2, 2, 2], padding=[0, 1, 0, 0, 0, 0])
    return (y, z)
""")
    y, z = retrograd.build(mod, **kw)["main"](x1, x3)
    ap = np.pad(x1, ((0, 0), (0, 0), (1, 1)), constant_values=0)
    want_y = np.stack([ap[:, :, i : i + 3].max(-1) for i in range(0, 9, 2)], -1)
    bp = np.pad(x3, ((0, 0), (0, 0), (0, 0), (1, 0), (0, 0)), constant_values=-128)
    want_z = np.empty((1, 2, 2, 3, 3), "int8")
    for i, j, l in itertools.product(range(2), range(3), range(3)):
        want_z[..., i, j, l] = bp[..., 2 * i : 2 * i + 2, 2 * j : 2 * j + 2, 2 * l : 2 * l + 2].max((-3, -2, -1))
    assert y.dtype == np.uint8 and z.dtype == np.int8
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)


def test_max_pool_of_int64_beyond_float64s_exact_range_is_refused():
    x = np.full((1, 1, 2, 2), 2**60, np.int64)
    with pytest.raises(KernelError, match="beyond 2\\*\\*53"):
        pool.max_pool2d(x, pool_size=(2, 2))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool2d_backward_matches_naive(case, ties):
    shape, k, s, p, d, ceil = case
    x = _data(shape, ties=ties)
    g = _data(x.shape[:2] + out_hw(shape, k, s, p, d, ceil), seed=1)
    expect = naive_max_backward(g, x, k, s, p, d, ceil)
    got = pool.max_pool2d_backward(g, x, **_attrs(k, s, p, d, ceil))
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cip", [False, True])
def test_avg_pool2d_matches_naive(case, cip):
    shape, k, s, p, d, ceil = case
    x = _data(shape)
    got = pool.avg_pool2d(x, **_attrs(k, s, p, d, ceil, cip))
    np.testing.assert_allclose(got, naive_avg(x, k, s, p, d, ceil, cip), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("cip", [False, True])
def test_avg_pool2d_backward_matches_naive(case, cip):
    shape, k, s, p, d, ceil = case
    x = _data(shape)
    g = _data(x.shape[:2] + out_hw(shape, k, s, p, d, ceil), seed=1)
    got = pool.avg_pool2d_backward(g, x, **_attrs(k, s, p, d, ceil, cip))
    np.testing.assert_allclose(got, naive_avg_backward(g, x, k, s, p, d, ceil, cip), rtol=1e-12, atol=1e-12)


def test_max_ties_go_to_first_in_row_major_order():
    x = np.zeros((1, 1, 2, 2))
    g = np.ones((1, 1, 1, 1))
    got = pool.max_pool2d_backward(g, x, pool_size=(2, 2), strides=(2, 2))
    np.testing.assert_array_equal(got[0, 0], [[1, 0], [0, 0]])
    # A later column of an earlier row beats an earlier column of a later row.
    x = np.array([[[[0, 5], [5, 0]]]], float)
    got = pool.max_pool2d_backward(g, x, pool_size=(2, 2), strides=(2, 2))
    np.testing.assert_array_equal(got[0, 0], [[0, 1], [0, 0]])


def test_max_padding_never_wins_even_against_negatives():
    x = -np.ones((1, 1, 2, 2)) * 7
    out = pool.max_pool2d(x, pool_size=(3, 3), strides=(1, 1), padding=(1, 1, 1, 1))
    np.testing.assert_array_equal(out, np.full((1, 1, 2, 2), -7.0))
    dx = pool.max_pool2d_backward(np.ones((1, 1, 2, 2)), x, pool_size=(3, 3), strides=(1, 1), padding=(1, 1, 1, 1))
    assert dx.sum() == 4 and dx[0, 0, 0, 0] == 4  # every window's first maximum is the top-left value


def test_overlapping_windows_accumulate():
    x = np.array([[[[0, 0, 0], [0, 9, 0], [0, 0, 0]]]], float)
    g = np.arange(1, 5, dtype=float).reshape(1, 1, 2, 2)
    dx = pool.max_pool2d_backward(g, x, pool_size=(2, 2), strides=(1, 1))
    assert dx[0, 0, 1, 1] == 10 and dx.sum() == 10


@pytest.mark.parametrize("cip", [False, True])
@pytest.mark.parametrize("case", [c for c in CASES if c[5] and c[0][0]])
def test_avg_backward_with_ceil_mode_is_the_derivative_of_our_forward(case, cip):
    """Central finite differences of our float64 forward, one input at a time (the map is linear)."""
    shape, k, s, p, d, ceil = case
    attrs = _attrs(k, s, p, d, ceil, cip)
    x = _data(shape)
    g = _data(x.shape[:2] + out_hw(shape, k, s, p, d, ceil), seed=2)
    numeric = np.zeros_like(x)
    h = 1e-3
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        numeric[idx] = np.vdot(g, pool.avg_pool2d(x + e, **attrs) - pool.avg_pool2d(x - e, **attrs)) / (2 * h)
    np.testing.assert_allclose(pool.avg_pool2d_backward(g, x, **attrs), numeric, rtol=1e-9, atol=1e-10)


def test_dtypes_preserved_and_inputs_untouched():
    x = _data((2, 3, 7, 7), dtype="float32")
    g = _data((2, 3, 4, 4), seed=3, dtype="float32")
    x0, g0 = x.copy(), g.copy()
    attrs = _attrs((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False)
    for out in (
        pool.max_pool2d(x, **attrs),
        pool.avg_pool2d(x, **attrs),
        pool.max_pool2d_backward(g, x, **attrs),
        pool.avg_pool2d_backward(g, x, **attrs),
    ):
        assert out.dtype == np.float32
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(g, g0)


def test_int_and_pair_attributes_are_normalized():
    x = _data((1, 2, 6, 6))
    a = pool.avg_pool2d(x, pool_size=3, strides=2, padding=1, count_include_pad=True)
    b = pool.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), count_include_pad=True)
    c = pool.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), count_include_pad=True)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("fn", ["max_pool2d", "avg_pool2d"])
def test_nhwc_layout_is_a_transposed_nchw(fn):
    x = _data((2, 3, 7, 6))
    attrs = _attrs((3, 2), (2, 1), (1, 0, 1, 1), (1, 1), True)
    nchw = getattr(pool, fn)(x, **attrs)
    nhwc = getattr(pool, fn)(x.transpose(0, 2, 3, 1), **attrs, layout="NHWC")
    np.testing.assert_allclose(nhwc, nchw.transpose(0, 2, 3, 1), rtol=1e-12)
    g = _data(nchw.shape, seed=4)
    back = getattr(pool, fn + "_backward")
    dx = back(g, x, **attrs)
    dx_nhwc = back(g.transpose(0, 2, 3, 1), x.transpose(0, 2, 3, 1), **attrs, layout="NHWC")
    np.testing.assert_allclose(dx_nhwc, dx.transpose(0, 2, 3, 1), rtol=1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: pool.max_pool2d(np.zeros((2, 3, 4), "float32"), pool_size=2), "4-D"),
        (lambda: pool.max_pool2d(np.zeros((1, 1, 4, 4), "bool"), pool_size=2), "float dtype"),  # integers pool
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4), "int64"), pool_size=2), "float dtype"),
        (lambda: pool.max_pool2d(np.zeros((1, 1, 4, 4)), pool_size=5), "does not fit"),
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4)), pool_size=2, strides=0), "strides must be >= 1"),
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4)), pool_size=2, padding=(-1, 0)), "padding"),
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4)), pool_size=2, layout="NCHW4c"), "layout"),
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4)), pool_size=(1, 2, 3)), "pool_size"),
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4)), pool_size=2, strides=2.0), "strides must be an int"),
        (lambda: pool.avg_pool2d(np.zeros((1, 1, 4, 4)), pool_size=2, padding=None), "padding must be an int"),
        (lambda: pool.max_pool2d_backward(np.zeros((1, 1, 3, 3)), np.zeros((1, 1, 4, 4)), pool_size=2, strides=2), "output_grad"),
        (lambda: pool.avg_pool2d_backward(np.zeros((1, 2, 2, 2)), np.zeros((2, 1, 4, 4)), pool_size=2, strides=2), "output_grad"),
    ],
)
def test_bad_inputs_raise_kernel_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()


# -- PyTorch ----------------------------------------------------------------------------------------

TORCH_CASES = [  # symmetric padding <= k/2, as PyTorch requires
    ((2, 3, 9, 8), (3, 3), (2, 2), 1, (1, 1), False),
    ((2, 3, 9, 10), (3, 3), (2, 2), 1, (1, 1), True),
    ((2, 2, 5, 7), (2, 2), (2, 2), 0, (1, 1), True),
    ((1, 2, 8, 8), (2, 3), (1, 2), (1, 1), (1, 1), False),
    ((1, 2, 11, 11), (3, 3), (2, 2), 1, (2, 2), True),
]


@pytest.mark.parametrize("case", TORCH_CASES)
@pytest.mark.parametrize("ties", [False, True])
def test_max_pool2d_against_torch(case, ties):
    torch = need("torch")
    shape, k, s, p, d, ceil = case
    x = _data(shape, ties=ties)
    xt = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.max_pool2d(xt, k, s, p, dilation=d, ceil_mode=ceil)
    g = _data(tuple(y.shape), seed=5)
    y.backward(torch.tensor(g))
    pp = (p, p, p, p) if np.isscalar(p) else (p[0], p[1], p[0], p[1])
    attrs = _attrs(k, s, pp, d, ceil)
    np.testing.assert_array_equal(pool.max_pool2d(x, **attrs), y.detach().numpy())
    np.testing.assert_allclose(pool.max_pool2d_backward(g, x, **attrs), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", [c for c in TORCH_CASES if c[4] == (1, 1)])
@pytest.mark.parametrize("cip", [False, True])
def test_avg_pool2d_against_torch(case, cip):
    """PyTorch agrees with us in ceil_mode too: its divisor also excludes the overhang, and its
    backward is the exact derivative of its forward."""
    torch = need("torch")
    shape, k, s, p, d, ceil = case
    x = _data(shape)
    xt = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.avg_pool2d(xt, k, s, p, ceil_mode=ceil, count_include_pad=cip)
    g = _data(tuple(y.shape), seed=6)
    y.backward(torch.tensor(g))
    pp = (p, p, p, p) if np.isscalar(p) else (p[0], p[1], p[0], p[1])
    attrs = _attrs(k, s, pp, d, ceil, cip)
    np.testing.assert_allclose(pool.avg_pool2d(x, **attrs), y.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(pool.avg_pool2d_backward(g, x, **attrs), xt.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_large_float32_against_torch():
    """Several chunks of planes: the chunking must not leak state between chunks."""
    torch = need("torch")
    x = np.random.default_rng(7).standard_normal((4, 64, 30, 30)).astype("float32")
    xt = torch.tensor(x, requires_grad=True)
    y = torch.nn.functional.max_pool2d(xt, 3, 2, 1)
    g = np.random.default_rng(8).standard_normal(tuple(y.shape)).astype("float32")
    y.backward(torch.tensor(g))
    attrs = _attrs((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False)
    np.testing.assert_array_equal(pool.max_pool2d(x, **attrs), y.detach().numpy())
    np.testing.assert_allclose(pool.max_pool2d_backward(g, x, **attrs), xt.grad.numpy(), rtol=1e-6, atol=1e-6)
    avg = torch.nn.functional.avg_pool2d(xt.detach(), 3, 2, 1, count_include_pad=False).numpy()
    np.testing.assert_allclose(pool.avg_pool2d(x, **attrs), avg, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == c[2] and c[4] == (1, 1)])
@pytest.mark.parametrize("ties", [False, True])
def test_max_backward_of_tiling_windows_on_phase_grids(case, ties, monkeypatch):
    """Windows as large as their stride (MNIST's 2x2 pool past a cache's worth of data) take the phase
    grids, where each tap owns a phase and its gradient is written rather than added."""
    monkeypatch.setattr(pool, "_small_tiling", lambda s: False)
    shape, k, s, p, d, ceil = case
    x = _data(shape, ties=ties)
    g = _data(x.shape[:2] + out_hw(shape, k, s, p, d, ceil), seed=1)
    got = pool.max_pool2d_backward(g, x, **_attrs(k, s, p, d, ceil))
    np.testing.assert_allclose(got, naive_max_backward(g, x, k, s, p, d, ceil), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_backward_one_plane_per_chunk(case, monkeypatch):
    """Chunks reuse their grid buffers: what one chunk adds or writes must not leak into the next."""
    monkeypatch.setattr(pool, "plane_chunk_size", lambda plane_bytes, target_bytes=0: 1)
    monkeypatch.setattr(pool, "_small_tiling", lambda s: False)
    shape, k, s, p, d, ceil = case
    x = _data(shape, ties=True)
    g = _data(x.shape[:2] + out_hw(shape, k, s, p, d, ceil), seed=1)
    np.testing.assert_allclose(pool.max_pool2d_backward(g, x, **_attrs(k, s, p, d, ceil)),
                               naive_max_backward(g, x, k, s, p, d, ceil), rtol=1e-12, atol=1e-12)
    for cip in (False, True):
        np.testing.assert_allclose(pool.avg_pool2d_backward(g, x, **_attrs(k, s, p, d, ceil, cip)),
                                   naive_avg_backward(g, x, k, s, p, d, ceil, cip), rtol=1e-12, atol=1e-12)


def test_tiling_windows_over_random_geometries():
    """Windows that tile the plane (stride = window, any rectangle, 1-wide included, floor mode leaving
    rows and columns unread) split into per-tap arrays and merged back: forward and backward against
    the naive loops, ties included (the first maximum in row-major window order takes the gradient)."""
    rng = np.random.default_rng(5)
    for trial in range(40):
        k = tuple(int(v) for v in rng.integers(1, 5, 2))
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 4))) + tuple(int(k[a] * rng.integers(1, 4) + rng.integers(0, k[a])) for a in (0, 1))
        case = (shape, k, k, (0, 0, 0, 0), (1, 1), False)
        x = _data(shape, seed=trial, ties=bool(trial % 2))
        g = _data(x.shape[:2] + out_hw(*case), seed=trial + 100)
        attrs = _attrs(*case[1:])
        np.testing.assert_array_equal(pool.max_pool2d(x, **attrs), naive_max(x, *case[1:]), err_msg=f"trial {trial}")
        np.testing.assert_allclose(pool.max_pool2d_backward(g, x, **attrs), naive_max_backward(g, x, *case[1:]),
                                   rtol=1e-12, atol=1e-12, err_msg=f"trial {trial}")


def _count_by_listing(size, k, s, p0, p1, d, ceil_mode):
    """Windows counted one by one over the padded input: start j * s is kept when the window fits
    (floor mode), or when it still covers an element left over and starts inside the input or its
    leading padding (ceil mode, PyTorch's rule)."""
    extent = d * (k - 1) + 1
    padded = size + p0 + p1
    count = 0
    for j in range(padded + 1):
        start = j * s
        fits = start + extent <= padded
        if ceil_mode:
            leftover = start < padded - extent + s  # not every element it would cover is already covered
            keep = (fits or leftover) and start < size + p0
        else:
            keep = fits
        count += keep
    return count


def test_window_count_matches_listing_window_starts():
    for size, k, s, p, d, ceil_mode in itertools.product(range(1, 9), (1, 2, 3), (1, 2, 3), (0, 1, 2), (1, 2), (False, True)):
        if p > k // 2 or d * (k - 1) + 1 > size + 2 * p:
            continue
        expected = _count_by_listing(size, k, s, p, p, d, ceil_mode)
        assert window_positions(size, k, s, p, p, d, ceil_mode) == expected, (size, k, s, p, d, ceil_mode)


def test_max_pool_ceil_mode_shape_matches_torch_where_the_last_window_starts_in_the_padding():
    # size 5, kernel 2, stride 2, padding 1: the ceil-mode window at 6 == size + p0 starts past the leading padding.
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 5))
    out = pool.max_pool2d(x, pool_size=(2, 2), strides=(2, 2), padding=(1, 1, 1, 1), ceil_mode=True)
    assert out.shape[2:] == (_count_by_listing(5, 2, 2, 1, 1, 1, True),) * 2 == (3, 3)
    torch = need("torch")
    ref = torch.nn.functional.max_pool2d(torch.tensor(x), 2, 2, padding=1, ceil_mode=True)
    np.testing.assert_array_equal(out, ref.numpy())
