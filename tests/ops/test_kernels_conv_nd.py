"""1-D and 3-D convolutions and their transposes against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.ops.kernels import conv_nd
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional
RNG = np.random.default_rng(0)


@pytest.mark.parametrize("s,p,d,g", [(1, 0, 1, 1), (2, 1, 1, 2), (3, 2, 2, 1), (1, 3, 3, 4)])
def test_conv1d_and_its_transpose_match_torch(s, p, d, g):
    x, w = RNG.normal(size=(2, 4, 17)), RNG.normal(size=(8, 4 // g, 3))
    got = conv_nd.conv1d(x, w, strides=s, padding=p, dilation=d, groups=g)
    np.testing.assert_allclose(got, F.conv1d(torch.tensor(x), torch.tensor(w), None, s, p, d, g).numpy(), rtol=1e-10, atol=1e-12)
    op = s - 1
    wt = RNG.normal(size=(4, 6 // g, 3))
    got = conv_nd.conv1d_transpose(x, wt, strides=s, padding=p, output_padding=op, dilation=d, groups=g)
    want = F.conv_transpose1d(torch.tensor(x), torch.tensor(wt), None, s, p, op, g, d).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_conv1d_channels_last_and_asymmetric_padding():
    x, w = RNG.normal(size=(2, 9, 3)), RNG.normal(size=(3, 3, 5))  # NWC data, WIO weight
    got = conv_nd.conv1d(x, w, padding=(1, 2), data_layout="NWC", kernel_layout="WIO")
    xt = F.pad(torch.tensor(x.transpose(0, 2, 1)), (1, 2))
    want = F.conv1d(xt, torch.tensor(w.transpose(2, 1, 0))).numpy().transpose(0, 2, 1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("s,p,d,g", [((1, 1, 1), 0, 1, 1), ((2, 1, 2), 1, 1, 2), ((1, 2, 1), (2, 0, 1), (2, 1, 1), 1)])
def test_conv3d_and_its_transpose_match_torch(s, p, d, g):
    x, w = RNG.normal(size=(2, 4, 7, 6, 5)), RNG.normal(size=(6, 4 // g, 3, 2, 3))
    pt = p if isinstance(p, tuple) else (p,) * 3
    got = conv_nd.conv3d(x, w, strides=s, padding=pt, dilation=d, groups=g)
    want = F.conv3d(torch.tensor(x), torch.tensor(w), None, s, pt, d, g).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    op = tuple(si - 1 for si in s)
    wt = RNG.normal(size=(4, 6 // g, 3, 2, 3))
    got = conv_nd.conv3d_transpose(x, wt, strides=s, padding=pt, output_padding=op, dilation=d, groups=g)
    want = F.conv_transpose3d(torch.tensor(x), torch.tensor(wt), None, s, pt, op, g, d).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


# -- 1-D and 3-D pools ---------------------------------------------------------------------------------

from retrograd.ops.kernels import pool_nd  # noqa: E402


@pytest.mark.parametrize("k,s,p,ceil", [(3, 2, 1, False), (2, 2, 0, True), (3, 1, 1, False)])
def test_pools_1d_3d_and_backward_match_torch(k, s, p, ceil):
    x1 = RNG.normal(size=(2, 3, 11))
    got = pool_nd.pool1d("max", x1, pool_size=k, strides=s, padding=p, ceil_mode=ceil)
    np.testing.assert_array_equal(got, F.max_pool1d(torch.tensor(x1), k, s, p, ceil_mode=ceil).numpy())
    got = pool_nd.pool1d("avg", x1, pool_size=k, strides=s, padding=p, ceil_mode=ceil, count_include_pad=True)
    np.testing.assert_allclose(got, F.avg_pool1d(torch.tensor(x1), k, s, p, ceil_mode=ceil).numpy(), rtol=1e-12)
    x = RNG.normal(size=(2, 3, 7, 6, 5))
    for include in (True, False):
        xt = torch.tensor(x, requires_grad=True)
        y = F.avg_pool3d(xt, k, s, p, ceil_mode=ceil, count_include_pad=include)
        got = pool_nd.avg_pool3d(x, pool_size=k, strides=s, padding=p, ceil_mode=ceil, count_include_pad=include)
        np.testing.assert_allclose(got, y.detach().numpy(), rtol=1e-12)
        g = RNG.normal(size=got.shape)
        y.backward(torch.tensor(g))
        back = pool_nd.avg_pool3d_backward(g, x, pool_size=k, strides=s, padding=p, ceil_mode=ceil, count_include_pad=include)
        np.testing.assert_allclose(back, xt.grad.numpy(), rtol=1e-12, atol=1e-14)
    # rounded values make ties: the gradient goes to the first maximum in (d, h, w) order, as PyTorch's
    xr = np.round(x, 0)
    xt = torch.tensor(xr, requires_grad=True)
    y = F.max_pool3d(xt, k, s, p, ceil_mode=ceil)
    np.testing.assert_array_equal(pool_nd.max_pool3d(xr, pool_size=k, strides=s, padding=p, ceil_mode=ceil), y.detach().numpy())
    g = RNG.normal(size=tuple(y.shape))
    y.backward(torch.tensor(g))
    back = pool_nd.max_pool3d_backward(g, xr, pool_size=k, strides=s, padding=p, ceil_mode=ceil)
    np.testing.assert_allclose(back, xt.grad.numpy(), rtol=1e-12)


# -- adaptive average pools ----------------------------------------------------------------------------

from retrograd.ops.kernels import adaptive  # noqa: E402


@pytest.mark.parametrize("shape,out", [((2, 3, 10), (4,)), ((2, 3, 7, 9), (3, 4)), ((2, 3, 7, 9), (7, 2)), ((1, 2, 5, 6, 7), (2, 3, 4))])
def test_adaptive_avg_pools_match_torch(shape, out):
    x = RNG.normal(size=shape)
    fn = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[len(out)]
    got = adaptive.adaptive_avg_pool(x, output_size=out, layout="NC" + "DHW"[3 - len(out):], spatial="DHW"[3 - len(out):])
    np.testing.assert_allclose(got, fn(torch.tensor(x), out).numpy(), rtol=1e-12)
