"""image.resize2d / resize3d against PyTorch's interpolate (forward and autograd), and TVM reading our text."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import KernelError
from retrograd.ops.kernels import resample
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional
RNG = np.random.default_rng(0)

# (our attributes, torch's mode and align_corners)
MODES = [
    (dict(method="linear"), "bilinear", False),
    (dict(method="linear", coordinate_transformation_mode="align_corners"), "bilinear", True),
    (dict(method="nearest_neighbor", coordinate_transformation_mode="asymmetric", rounding_method="floor"), "nearest", None),
    (dict(method="cubic"), "bicubic", False),
    (dict(method="cubic", coordinate_transformation_mode="align_corners"), "bicubic", True),
]


@pytest.mark.parametrize("attrs,mode,corners", MODES)
@pytest.mark.parametrize("size", [(9, 11), (3, 2), (5, 5)])
def test_resize2d_and_its_adjoint_match_torch(attrs, mode, corners, size):
    x = RNG.normal(size=(2, 3, 5, 6))
    got = resample.resize(x, size, layout="NCHW", **attrs)
    xt = torch.tensor(x, requires_grad=True)
    y = F.interpolate(xt, size=size, mode=mode, align_corners=corners)
    np.testing.assert_allclose(got, y.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.normal(size=got.shape)
    y.backward(torch.tensor(g))
    mats = [resample.resize_matrix(n, o, attrs["method"], attrs.get("coordinate_transformation_mode", "half_pixel"),
                                   attrs.get("rounding_method", "round")) for n, o in zip((5, 6), size)]
    back = np.einsum("ncij,ia,jb->ncab", g, *mats)
    np.testing.assert_allclose(back, xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_resize3d_trilinear_and_channels_last():
    x = RNG.normal(size=(1, 2, 3, 4, 5))
    got = resample.resize(x, (5, 3, 7), layout="NCDHW", spatial="DHW")
    want = F.interpolate(torch.tensor(x), size=(5, 3, 7), mode="trilinear", align_corners=False).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    x2 = RNG.normal(size=(2, 4, 5, 3))
    got = resample.resize(x2, (7, 8), layout="NHWC")
    want = F.interpolate(torch.tensor(x2.transpose(0, 3, 1, 2)), size=(7, 8), mode="bilinear").numpy()
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-10, atol=1e-12)


def test_resize_errors():
    x = np.ones((1, 1, 2, 2))
    with pytest.raises(KernelError, match="not supported"):
        resample.resize(x, (3, 3), layout="NCHW", coordinate_transformation_mode="tf_crop_and_resize")
    with pytest.raises(KernelError, match="method"):
        resample.resize(x, (3, 3), layout="NCHW", method="area")


def test_tvm_reads_our_resize_and_infers_the_same():
    tvm_script = need("tvm.script")
    text = """
@R.function
def main(x: R.Tensor((2, 3, 4, 5), "float32")):
    with R.dataflow():
        y = R.image.resize2d(x, R.shape([8, 3]), method="cubic", coordinate_transformation_mode="align_corners")
        z = R.image.resize3d(R.reshape(x, R.shape([2, 3, 4, 5, 1])), R.shape([3, 2, 2]), layout="NCDHW")
        R.output(y, z)
    return (y, z)
"""
    mod = retrograd.parse(text)
    ours = mod.script()
    theirs = tvm_script.from_source(ours)
    ret = theirs["main"].ret_ty
    assert [tuple(int(d) for d in f.shape) for f in ret.fields] == [(2, 3, 8, 3), (2, 3, 3, 2, 2)]
    binding = theirs["main"].body.blocks[0].bindings[0].value
    assert binding.attrs.method == "cubic" and binding.attrs.coordinate_transformation_mode == "align_corners"


def test_pixel_shuffle_matches_torch():
    from retrograd.ops.registry import get

    x = RNG.normal(size=(2, 3, 18, 2, 4))
    got = get("relax.nn.pixel_shuffle").kernel(x, upscale_factor=3)
    np.testing.assert_array_equal(got, F.pixel_shuffle(torch.tensor(x), 3).numpy())


# -- affine_grid and grid_sample -----------------------------------------------------------------------

from retrograd.ops.kernels import sampling  # noqa: E402


@pytest.mark.parametrize("size,corners", [((4, 5), True), ((3, 6), False), ((2, 3, 4), True), ((3, 2, 2), False)])
def test_affine_grid_matches_torch_in_tvm_s_layout(size, corners):
    nd = len(size)
    theta = RNG.normal(size=(2, nd, nd + 1))
    got = sampling.affine_grid(theta, size, align_corners=corners)
    want = F.affine_grid(torch.tensor(theta), (2, 1, *size), align_corners=corners).numpy()
    np.testing.assert_allclose(got, np.moveaxis(want, -1, 1), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border"])
@pytest.mark.parametrize("corners", [True, False])
def test_grid_sample_and_its_backward_match_torch(method, padding_mode, corners):
    x = RNG.normal(size=(2, 3, 5, 4))
    grid = RNG.uniform(-1.3, 1.3, size=(2, 2, 6, 7))
    got = sampling.grid_sample(x, grid, method=method, padding_mode=padding_mode, align_corners=corners)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(np.moveaxis(grid, 1, -1).copy(), requires_grad=True)
    y = F.grid_sample(xt, gt, mode=method, padding_mode=padding_mode, align_corners=corners)
    np.testing.assert_allclose(got, y.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.normal(size=got.shape)
    y.backward(torch.tensor(g))
    dx, dgrid = sampling.grid_sample_backward(g, x, grid, method=method, padding_mode=padding_mode, align_corners=corners)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dgrid, np.moveaxis(gt.grad.numpy(), -1, 1), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("method,padding_mode", [("bilinear", "zeros"), ("nearest", "zeros"), ("bilinear", "border"), ("nearest", "border")])
def test_grid_sample_of_nan_and_infinite_coordinates_matches_torch_on_both_backends(method, padding_mode):
    # A NaN coordinate cast to an index was -2**63: an IndexError inside both kernels.
    from retrograd.ops.registry import get

    x = RNG.normal(size=(1, 2, 3, 4))
    grid = RNG.uniform(-1, 1, size=(1, 2, 2, 4))
    grid[0, 0, 0] = [np.nan, np.inf, -np.inf, 1e30]
    grid[0, 1, 1] = [np.nan, 0.5, -np.inf, np.nan]
    attrs = dict(method=method, padding_mode=padding_mode, align_corners=False)
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(np.moveaxis(grid, 1, -1).copy())
    y = F.grid_sample(xt, gt, mode=method, padding_mode=padding_mode, align_corners=False)
    g = RNG.normal(size=tuple(y.shape))
    if (method, padding_mode) == ("bilinear", "border"):
        # PyTorch 2.13's backward here crashes on such coordinates; the output is finite and linear in
        # the data, so d data is the sum of g times the output of each unit input.
        units = torch.eye(x.size, dtype=torch.float64).reshape((x.size, *x.shape[1:]))
        per_unit = F.grid_sample(units, gt.expand(x.size, -1, -1, -1), mode=method, padding_mode=padding_mode, align_corners=False)
        want_dx = (per_unit.numpy() * g).sum(axis=(1, 2, 3)).reshape(x.shape)
    else:
        y.backward(torch.tensor(g))
        want_dx = xt.grad.numpy()
    fwd, bwd = get("relax.image.grid_sample"), get("relax.grad.grid_sample_backward")
    for backend in ("numpy", "torch"):
        if backend == "numpy":
            got, dx = fwd.kernel(x, grid, **attrs), bwd.kernel(g, x, grid, **attrs)[0]
        else:
            got = fwd.torch_kernel(torch.tensor(x), torch.tensor(grid), **attrs).numpy()
            dx = bwd.torch_kernel(torch.tensor(g), torch.tensor(x), torch.tensor(grid), **attrs)[0].numpy()
        np.testing.assert_allclose(got, y.detach().numpy(), rtol=1e-10, atol=1e-12, err_msg=backend)
        np.testing.assert_allclose(dx, want_dx, rtol=1e-10, atol=1e-12, err_msg=backend)


@pytest.mark.parametrize("size", [(10, 12), (3, 4), (7, 9)])
def test_a_non_finite_value_reaches_only_the_outputs_reading_it(size):
    # A dense interpolation or averaging matrix's zeros times a NaN or infinity are NaN: the value spread
    # along its whole row (resize on torch, the last axis of resize on NumPy, adaptive pooling on NumPy).
    from retrograd.ops.registry import get

    x = RNG.normal(size=(1, 2, 5, 6))
    x[0, 0, 1, 2], x[0, 1, 3, 5] = np.nan, np.inf
    attrs = dict(layout="NCHW", method="linear", coordinate_transformation_mode="half_pixel")
    xt = torch.tensor(x, requires_grad=True)
    y = F.interpolate(xt, size=size, mode="bilinear", align_corners=False)
    g = RNG.normal(size=tuple(y.shape))
    g[0, 0, 1, 1] = np.nan
    y.backward(torch.tensor(g))
    want, want_dx = y.detach().numpy(), xt.grad.numpy()
    pool = F.adaptive_avg_pool2d(torch.tensor(x), size).numpy()
    resize, resize_bwd, adaptive = (get(f"relax.{n}") for n in ("image.resize2d", "grad.resize2d_backward", "nn.adaptive_avg_pool2d"))
    for backend in ("numpy", "torch"):
        if backend == "numpy":
            got, dx = resize.kernel(x, size, **attrs), resize_bwd.kernel(g, x, **attrs)
            pooled = adaptive.kernel(x, output_size=size, layout="NCHW")
        else:
            got = resize.torch_kernel(torch.tensor(x), size, **attrs).numpy()
            dx = resize_bwd.torch_kernel(torch.tensor(g), torch.tensor(x), **attrs).numpy()
            pooled = adaptive.torch_kernel(torch.tensor(x), output_size=size, layout="NCHW").numpy()
        # PyTorch also multiplies zero weights at the borders: its non-finite outputs may be a few more.
        assert not (~np.isfinite(got) & np.isfinite(want)).any(), backend
        both = np.isfinite(got) & np.isfinite(want)
        np.testing.assert_allclose(got[both], want[both], rtol=1e-10, err_msg=backend)
        np.testing.assert_array_equal(np.isnan(dx), np.isnan(want_dx), err_msg=backend)
        np.testing.assert_allclose(dx, want_dx, rtol=1e-10, atol=1e-12, err_msg=backend)
        np.testing.assert_allclose(pooled, pool, rtol=1e-10, err_msg=backend)


# Rows TVM 0.27 reads (built for llvm) for nearest-neighbour resizes where ties and defaults matter:
# "round" goes to the even neighbour, no rounding method means floor (round for align_corners).
TVM_NEAREST_ROWS = [
    ("half_pixel", "", 4, 6, [0, 0, 1, 1, 2, 3]),
    ("half_pixel", "round", 4, 6, [0, 0, 1, 2, 2, 3]),
    ("half_pixel", "", 5, 3, [0, 2, 3]),
    ("asymmetric", "round", 4, 8, [0, 0, 1, 2, 2, 2, 3, 3]),
    ("asymmetric", "", 7, 10, [0, 0, 1, 2, 2, 3, 4, 4, 5, 6]),
    ("align_corners", "", 3, 9, [0, 0, 0, 1, 1, 1, 2, 2, 2]),
    ("tf_half_pixel_for_nn", "round", 5, 3, [1, 2, 4]),
    ("pytorch_half_pixel", "round_prefer_floor", 4, 6, [0, 0, 1, 2, 2, 3]),
]


@pytest.mark.parametrize("mode,rounding,size,out,rows", TVM_NEAREST_ROWS)
def test_nearest_neighbor_rows_are_tvm_ones(mode, rounding, size, out, rows):
    x = np.arange(size, dtype="float32").reshape(1, 1, size, 1)
    got = resample.resize(x, (out, 1), layout="NCHW", method="nearest_neighbor",
                          coordinate_transformation_mode=mode, rounding_method=rounding)
    assert got[0, 0, :, 0].tolist() == rows


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("out_dtype", [None, "float32", "float64"])
def test_float16_resize_computes_in_float32_as_tvm_topi(out_dtype, backend):
    """TVM's topi resize reads every pixel as float32 and casts the result to out_dtype (or the data's
    dtype): float16 data with out_dtype float64 is PyTorch's bilinear interpolation of the float32 pixels,
    not a float16 computation widened (NumPy's kernel) nor a float64 one."""
    from retrograd.ops.registry import get

    x = np.random.default_rng(4).standard_normal((1, 2, 5, 7)).astype("float16")
    want = F.interpolate(torch.tensor(x.astype("float32")), size=(9, 4), mode="bilinear", align_corners=False).numpy()
    op = get("relax.image.resize2d")
    if backend == "numpy":
        got = op.kernel(x, (9, 4), layout="NCHW", out_dtype=out_dtype)
    else:
        got = op.torch_kernel(torch.from_numpy(x), (9, 4), layout="NCHW", out_dtype=out_dtype).numpy()
    assert got.dtype == np.dtype(out_dtype or "float16")
    if out_dtype is None:  # the float32 result rounded once: within half a float16 ulp (2**-11 relative)
        np.testing.assert_allclose(got.astype("float32"), want, rtol=2**-11, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
