"""conv2d and conv2d_transpose against naive loops over output / input positions, the adjoint identity,
TVM's weight-gradient form, and PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from ops.ref_nn import naive_conv2d, naive_conv2d_transpose, naive_weight_grad, tvm_weight_grad

from retrograd.errors import KernelError
from retrograd.ops.kernels import conv
from retrograd.ops.registry import get
from optional import need  # noqa: E402

# -- cases ------------------------------------------------------------------------------------------

# (x shape, out channels, kernel, strides, padding (t, l, b, r), dilation, groups)
CASES = [
    ((2, 3, 7, 6), 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((2, 4, 9, 8), 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 2),  # groups=2 + stride
    ((1, 3, 10, 11), 2, (3, 2), (1, 2), (2, 0, 1, 1), (2, 1), 1),  # asymmetric + dilation
    ((2, 4, 8, 8), 4, (3, 3), (2, 1), (0, 1, 2, 0), (2, 2), 4),  # depthwise, stride + dilation
    ((1, 2, 5, 5), 3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1
    ((3, 2, 4, 4), 2, (4, 4), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # a single output position
    ((1, 1, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # size 1 everywhere
    ((2, 2, 6, 1), 2, (3, 1), (3, 1), (1, 0, 1, 0), (1, 1), 1),  # width 1
    ((0, 2, 5, 5), 2, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # empty batch
    ((1, 6, 12, 12), 6, (5, 5), (3, 3), (2, 2, 2, 2), (1, 1), 3),  # groups=3, stride 3
    ((3, 3, 9, 10), 4, (3, 2), (1, 1), (2, 0, 1, 1), (2, 3), 1),  # unit stride + dilation
]


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _attrs(s, p, d, g):
    return dict(strides=s, padding=p, dilation=d, groups=g)


def _setup(case):
    shape, o, k, s, p, d, g = case
    x = _rand(shape, 0)
    w = _rand((o, shape[1] // g) + k, 1)
    return x, w, s, p, d, g


@pytest.mark.parametrize("case", CASES)
def test_conv2d_matches_naive(case):
    x, w, s, p, d, g = _setup(case)
    np.testing.assert_allclose(conv.conv2d(x, w, **_attrs(s, p, d, g)), naive_conv2d(x, w, s, p, d, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("grid", [False, True], ids=["", "shared-grid-col2im"])
@pytest.mark.parametrize("wide", [0, 10**6], ids=["exact-grid", "wide-grid"])
@pytest.mark.parametrize("case", [c for c in CASES if c[6] == 1 and c[0][0] > 1])
def test_one_group_paths_across_image_chunks(case, wide, grid, monkeypatch):
    """One image per chunk: im2col, col2im and the weight gradient's per-chunk sums must cover every
    image once, and a chunk's padding buffer must not leak the previous image. Unit strides run once on
    the exact grid and once on the padded grid's full width (the small-plane formulation; col2im's
    rows as wide as the uncropped output), and col2im once more on the grid images share."""
    monkeypatch.setattr(conv, "_IMAGE_COLS_BYTES", 1)
    monkeypatch.setattr(conv, "WIDE_MAX_WIDTH", wide)
    monkeypatch.setattr(conv, "WIDE_COL2IM_RATIO", 0 if wide else 10**6)
    monkeypatch.setattr(conv, "GRID_MIN_ROWS", 1 if grid else 10**9)
    monkeypatch.setattr(conv, "GRID_MAX_TAPS", 10**6 if grid else 0)
    x, w, s, p, d, g = _setup(case)
    np.testing.assert_allclose(conv.conv2d(x, w, **_attrs(s, p, d, g)), naive_conv2d(x, w, s, p, d, g), rtol=1e-12, atol=1e-12)
    gy = _rand(naive_conv2d(x, w, s, p, d, g).shape, 2)
    np.testing.assert_allclose(tvm_weight_grad(x, gy, w.shape, s, p, d, g), naive_weight_grad(x, gy, w.shape, s, p, d, g),
                               rtol=1e-10, atol=1e-10)
    op = _output_padding(x.shape, gy.shape, w.shape[2:], s, p, d)
    got = conv.conv2d_transpose(gy, w, strides=s, padding=p, output_padding=op, dilation=d)
    np.testing.assert_allclose(got, naive_conv2d_transpose(gy, w, s, p, op, d, 1), rtol=1e-10, atol=1e-10)


def _output_padding(x_shape, y_shape, k, s, p, d):
    """What TVM's conv2d gradient passes so conv2d_transpose recovers the data's size."""
    return tuple(x_shape[2 + a] - ((y_shape[2 + a] - 1) * s[a] - p[a] - p[a + 2] + d[a] * (k[a] - 1) + 1) for a in (0, 1))


@pytest.mark.parametrize("case", CASES)
def test_conv2d_transpose_is_the_adjoint_of_conv2d(case):
    x, w, s, p, d, g = _setup(case)
    y = conv.conv2d(x, w, **_attrs(s, p, d, g))
    gy = _rand(y.shape, 2)
    op = _output_padding(x.shape, y.shape, w.shape[2:], s, p, d)
    dx = conv.conv2d_transpose(gy, w, **_attrs(s, p, d, g), output_padding=op)
    assert dx.shape == x.shape
    np.testing.assert_allclose(np.vdot(y, gy), np.vdot(x, dx), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dx, naive_conv2d_transpose(gy, w, s, p, op, d, g), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_weight_gradient_in_tvm_form_matches_naive(case):
    x, w, s, p, d, g = _setup(case)
    gy = _rand(conv.conv2d(x, w, **_attrs(s, p, d, g)).shape, 3)
    got = tvm_weight_grad(x, gy, w.shape, s, p, d, g)
    np.testing.assert_allclose(got, naive_weight_grad(x, gy, w.shape, s, p, d, g), rtol=1e-11, atol=1e-11)


# (x shape, in channels, out channels / groups, kernel, strides, padding, output_padding, dilation, groups)
TRANSPOSE_CASES = [
    ((2, 4, 5, 5), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    ((1, 4, 4, 6), (3, 3), (2, 3), (0, 1, 1, 0), (1, 2), (1, 1), 2),
    ((2, 2, 3, 3), (2, 3), (1, 1), (0, 0, 0, 0), (1, 1), (2, 3), 1),  # output_padding from dilation
    ((1, 3, 6, 5), (3, 3), (1, 1), (3, 2, 3, 2), (0, 0), (1, 1), 3),  # padding larger than d*(k-1)
    ((1, 2, 4, 4), (2, 2), (3, 3), (2, 2, 0, 0), (2, 1), (2, 2), 1),  # output_padding past pad_bottom
]


@pytest.mark.parametrize("nonfinite", [False, True], ids=["", "nan-weight-inf-input"])
@pytest.mark.parametrize("grid", [False, True], ids=["", "shared-grid-col2im"])
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv2d_transpose_with_output_padding_matches_naive(case, grid, nonfinite, monkeypatch):
    monkeypatch.setattr(conv, "GRID_MIN_ROWS", 1 if grid else 10**9)
    monkeypatch.setattr(conv, "GRID_MAX_TAPS", 10**6 if grid else 0)
    shape, k, s, p, op, d, g = case
    x = _rand(shape, 4)
    w = _rand((shape[1], 3) + k, 5)
    if nonfinite:
        # The unit-stride path convolved the zero-padded input: a NaN weight times that padding reached
        # outputs the weight never touches.
        w[0, 1, k[0] // 2, 0] = np.nan
        x[0, -1, 0, -1] = np.inf
    with np.errstate(invalid="ignore"):
        got = conv.conv2d_transpose(x, w, strides=s, padding=p, output_padding=op, dilation=d, groups=g)
        want = naive_conv2d_transpose(x, w, s, p, op, d, g)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_torch_conv2d_transpose_of_non_finite_values_matches_naive(seed):
    # ATen's unpadded transposed convolution, cropped afterwards, had NaN where the naive scatter (and
    # F.conv_transpose2d with the padding) keep values.
    torch = need("torch")
    rng = np.random.default_rng(seed)
    x, w = rng.uniform(-1, 1, (2, 2, 3, 3)).astype("float32"), rng.uniform(-1, 1, (2, 3, 3, 3)).astype("float32")
    for a in (x, w):
        flat = a.reshape(-1)
        at = rng.integers(0, a.size, a.size // 4)
        flat[at] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], at.size)
    with np.errstate(invalid="ignore"):
        want = naive_conv2d_transpose(x, w, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1)
    kernel = get("relax.nn.conv2d_transpose").torch_kernel
    got = kernel(torch.tensor(x), torch.tensor(w), strides=(2, 2), padding=(1, 1), output_padding=(1, 1))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_layouts_and_out_dtype():
    x, w, s, p, d, g = _setup(CASES[1])
    ref = conv.conv2d(x, w, **_attrs(s, p, d, g))
    nhwc = conv.conv2d(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), **_attrs(s, p, d, g), data_layout="NHWC", kernel_layout="HWIO")
    np.testing.assert_allclose(nhwc, ref.transpose(0, 2, 3, 1), rtol=1e-12)
    mixed = conv.conv2d(x, w, **_attrs(s, p, d, g), out_layout="NHWC")
    np.testing.assert_allclose(mixed, ref.transpose(0, 2, 3, 1), rtol=1e-12)
    f32 = conv.conv2d(x.astype("float32"), w.astype("float32"), **_attrs(s, p, d, g))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, ref, rtol=1e-4, atol=1e-4)
    assert conv.conv2d(x.astype("float32"), w.astype("float32"), **_attrs(s, p, d, g), out_dtype="float64").dtype == np.float64
    t = conv.conv2d_transpose(ref.astype("float32"), w.astype("float32"), **_attrs(s, p, d, g), output_padding=(0, 1))
    assert t.dtype == np.float32


def test_inputs_untouched_and_int_attributes():
    x, w, s, p, d, g = _setup(CASES[0])
    x0, w0 = x.copy(), w.copy()
    a = conv.conv2d(x, w, strides=1, padding=1, dilation=1, groups=1)
    b = conv.conv2d(x, w, strides=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    np.testing.assert_array_equal(a, b)
    conv.conv2d_transpose(a, w, strides=1, padding=1, output_padding=0)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(w, w0)


def _z(*shape):
    return np.zeros(shape)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: conv.conv2d(_z(1, 3, 5, 5), _z(2, 2, 3, 3)), "channels"),
        (lambda: conv.conv2d(_z(1, 4, 5, 5), _z(3, 2, 3, 3), groups=2), "not divisible by groups"),
        (lambda: conv.conv2d(_z(1, 2, 5, 5), _z(2, 2, 7, 7)), "does not fit"),
        (lambda: conv.conv2d(_z(1, 2, 5), _z(2, 2, 3, 3)), "4-D"),
        (lambda: conv.conv2d(np.zeros((1, 2, 5, 5), "int32"), _z(2, 2, 3, 3)), "float dtype"),
        (lambda: conv.conv2d(_z(1, 2, 5, 5), _z(2, 2, 3, 3), groups=0), "groups"),
        (lambda: conv.conv2d(_z(1, 2, 5, 5), _z(2, 2, 3, 3), dilation=0), "dilation"),
        (lambda: conv.conv2d(_z(1, 2, 5, 5), _z(2, 2, 3, 3), out_dtype="int8"), "out_dtype"),
        (lambda: conv.conv2d_transpose(_z(1, 2, 5, 5), _z(2, 2, 3, 3), strides=2, output_padding=2), "output_padding"),
        (lambda: conv.conv2d_transpose(_z(1, 3, 5, 5), _z(2, 2, 3, 3)), "input channels"),
        (lambda: conv.conv2d_transpose(_z(1, 2, 2, 2), _z(2, 2, 3, 3), padding=3), "empty output"),
    ],
)
def test_bad_inputs_raise_kernel_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()


# -- PyTorch ----------------------------------------------------------------------------------------


def _symmetric(p):
    return p[0] == p[2] and p[1] == p[3]


@pytest.mark.parametrize("case", [c for c in CASES if _symmetric(c[4])])
def test_conv2d_and_both_gradients_against_torch(case):
    torch = need("torch")
    x, w, s, p, d, g = _setup(case)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wt, stride=s, padding=p[:2], dilation=d, groups=g)
    gy = _rand(tuple(y.shape), 6)
    y.backward(torch.tensor(gy))
    np.testing.assert_allclose(conv.conv2d(x, w, **_attrs(s, p, d, g)), y.detach().numpy(), rtol=1e-10, atol=1e-10)
    op = _output_padding(x.shape, gy.shape, w.shape[2:], s, p, d)
    dx = conv.conv2d_transpose(gy, w, **_attrs(s, p, d, g), output_padding=op)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(tvm_weight_grad(x, gy, w.shape, s, p, d, g), wt.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [c for c in TRANSPOSE_CASES if _symmetric(c[3])])
def test_conv2d_transpose_against_torch(case):
    torch = need("torch")
    shape, k, s, p, op, d, g = case
    x = _rand(shape, 7)
    w = _rand((shape[1], 3) + k, 8)
    ref = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=s, padding=p[:2],
                                               output_padding=op, groups=g, dilation=d)  # fmt: skip
    got = conv.conv2d_transpose(x, w, strides=s, padding=p, output_padding=op, dilation=d, groups=g)
    np.testing.assert_allclose(got, ref.numpy(), rtol=1e-10, atol=1e-10)


def test_larger_float32_against_torch():
    """Several image chunks and a real-sized weight gradient."""
    torch = need("torch")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 16, 20, 20)).astype("float32")
    w = (rng.standard_normal((24, 16, 3, 3)) * 0.1).astype("float32")
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    y = torch.nn.functional.conv2d(xt, wt, padding=1)
    gy = rng.standard_normal(tuple(y.shape)).astype("float32")
    y.backward(torch.tensor(gy))
    attrs = _attrs((1, 1), (1, 1, 1, 1), (1, 1), 1)
    np.testing.assert_allclose(conv.conv2d(x, w, **attrs), y.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(conv.conv2d_transpose(gy, w, **attrs), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tvm_weight_grad(x, gy, w.shape, (1, 1), (1, 1, 1, 1), (1, 1), 1), wt.grad.numpy(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("ratio", [0, 10**6], ids=["wide-col2im", "exact-col2im"])
def test_conv2d_transpose_non_finite_weight_reaches_only_its_taps(ratio, monkeypatch):
    """The wide grid's zero columns wrap into the next row: 0 * inf there would smear nan into outputs
    the weight never reaches (as PyTorch's col2im; rows wider than WIDE_MAX_WIDTH keep it off the
    flipped-kernel path)."""
    monkeypatch.setattr(conv, "WIDE_COL2IM_RATIO", ratio)
    gy = _rand((2, 3, 4, conv.WIDE_MAX_WIDTH + 3), 4)
    w = _rand((3, 2, 3, 3), 5)
    w[1, 0, 0, 2] = np.inf
    w[2, 1, 2, 0] = np.nan
    got = conv.conv2d_transpose(gy, w)
    want = naive_conv2d_transpose(gy, w, (1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1)
    assert np.isfinite(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_shared_grid_col2im_over_many_geometries(monkeypatch):
    """Random unit-stride geometries (padding up to the kernel's reach, dilation, output_padding,
    rectangular planes and kernels) forced onto the grid images share, against the naive loops: a
    contribution meant for cropped padding must never land on another row's or image's output."""
    monkeypatch.setattr(conv, "GRID_MIN_ROWS", 1)
    monkeypatch.setattr(conv, "GRID_MAX_TAPS", 10**6)
    monkeypatch.setattr(conv, "_IMAGE_COLS_BYTES", 1 << 12)  # several chunks per call
    rng = np.random.default_rng(11)
    for trial in range(60):
        kh, kw = rng.integers(1, 5, 2)
        dh, dw = rng.integers(1, 3, 2)
        h, wd = rng.integers(1, 9, 2)
        pads = tuple(int(rng.integers(0, (k - 1) * d + 1)) for k, d in ((kh, dh), (kw, dw), (kh, dh), (kw, dw)))
        oph, opw = (int(rng.integers(0, d)) for d in (dh, dw))
        n, o, c = (int(v) for v in rng.integers(1, 5, 3))
        out_h = h - pads[0] - pads[2] + (kh - 1) * dh + oph
        out_w = wd - pads[1] - pads[3] + (kw - 1) * dw + opw
        if out_h <= 0 or out_w <= 0:
            continue
        x = rng.standard_normal((n, o, h, wd))
        w = rng.standard_normal((o, c, kh, kw))
        got = conv.conv2d_transpose(x, w, padding=pads, output_padding=(oph, opw), dilation=(int(dh), int(dw)))
        want = naive_conv2d_transpose(x, w, (1, 1), pads, (oph, opw), (int(dh), int(dw)), 1)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"trial {trial}")
