"""Max pooling at windows holding NaN or only -inf, on both backends, against PyTorch: the forward's NaN,
the backward's pick (a window's last NaN in row-major tap order; an all -inf window's first in-bounds tap),
the backward_grad read at that pick, and whole gradients against torch.autograd."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.ops.registry import get
from retrograd.passes import Gradient
from optional import need  # noqa: E402

# (spatial shape, pool_size, strides, padding per axis, dilation, ceil_mode): tiled, overlapping, padded,
# dilated, ceil overhang; each geometry runs a different kernel path.
GEOMETRIES = [
    ((8,), (2,), (2,), (0,), (1,), False),
    ((9,), (3,), (2,), (1,), (2,), True),
    ((6, 8), (2, 2), (2, 2), (0, 0), (1, 1), False),
    ((7, 9), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((7, 7), (3, 2), (1, 1), (1, 1), (1, 2), False),
    ((8, 8), (2, 2), (2, 2), (1, 1), (2, 1), False),
    ((6, 6), (1, 1), (2, 2), (0, 0), (1, 1), True),
    ((5, 6, 7), (2, 2, 2), (2, 2, 2), (0, 0, 0), (1, 1, 1), False),
    ((5, 6, 7), (3, 2, 3), (2, 1, 2), (1, 1, 1), (1, 2, 1), True),
]

LAYOUT = {1: "NCW", 2: "NCHW", 3: "NCDHW"}


def _data(spatial, seed, dtype):
    """Few distinct values (ties) with NaN, +inf and -inf scattered, and one channel all -inf but a NaN."""
    rng = np.random.default_rng(seed)
    x = rng.choice([np.nan, np.inf, -np.inf, -1.0, 0.0, 2.0], size=(2, 3) + spatial, p=[0.12, 0.06, 0.3, 0.2, 0.12, 0.2])
    x[1, 2] = -np.inf
    x[1, 2].flat[x[1, 2].size // 2] = np.nan
    return x.astype(dtype)


def _torch_max(torch, x, k, s, p, d, ceil):
    fn = [None, torch.nn.functional.max_pool1d, torch.nn.functional.max_pool2d, torch.nn.functional.max_pool3d][len(k)]
    return fn(x, k, s, p, d, ceil_mode=ceil, return_indices=True)


def _attrs(k, s, p, d, ceil):
    return dict(pool_size=k, strides=s, padding=p + p, dilation=d, ceil_mode=ceil, count_include_pad=False,
                layout=LAYOUT[len(k)], out_layout=None)


def _run(backend, name, *arrays, **attrs):
    op = get(name)
    if backend == "numpy":
        return np.asarray(op.kernel(*arrays, **attrs))
    torch = need("torch")
    return op.torch_kernel(*(torch.from_numpy(a) for a in arrays), **attrs).numpy()


def _close(got, want, dtype):
    tol = 1e-2 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_max_pool_at_nan_and_neg_inf_windows_matches_torch(geometry, dtype, backend):
    torch = need("torch")
    spatial, k, s, p, d, ceil = geometry
    nd = len(k)
    x = _data(spatial, len(spatial) * 10 + k[0], dtype)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    y, idx = _torch_max(torch, xt, k, s, p, d, ceil)
    rng = np.random.default_rng(1)
    g = rng.standard_normal(tuple(y.shape))
    y.backward(torch.from_numpy(g))
    u = rng.standard_normal(x.shape)
    read = np.take_along_axis(u.reshape(2, 3, -1), idx.reshape(2, 3, -1).numpy(), 2).reshape(idx.shape)
    assert np.isnan(y.detach().numpy()).any() and np.isneginf(y.detach().numpy()).any()  # both kinds of window

    attrs = _attrs(k, s, p, d, ceil)
    _close(_run(backend, f"relax.nn.max_pool{nd}d", x, **attrs), y.detach().numpy(), dtype)
    if nd == 1:  # max_pool1d's gradient rule: the 2-D backward over a unit H axis
        attrs = dict(attrs, pool_size=(1,) + k, strides=(1,) + s, padding=(0, p[0], 0, p[0]), dilation=(1,) + d,
                     layout="NCHW")
        x, g, u, want_dx, read = (a[:, :, None] for a in (x, g, u, xt.grad.numpy(), read))
    else:
        want_dx = xt.grad.numpy()
    n2 = max(nd, 2)
    dx = _run(backend, f"relax.grad.max_pool{n2}d_backward", g.astype(dtype), x, **attrs)
    _close(dx, want_dx, dtype)
    _close(_run(backend, f"relax.grad.max_pool{n2}d_backward_grad", u.astype(dtype), x, **attrs), read, dtype)


GRAD = '''
@R.function
def main(a: R.Tensor((2, 3, 9), "float32"), b: R.Tensor((2, 3, 7, 9), "float32"), c: R.Tensor((2, 3, 5, 6, 7), "float32"),
         wa: R.Tensor((2, 3, 5), "float32"), wb: R.Tensor((2, 3, 4, 5), "float32"), wc: R.Tensor((2, 3, 3, 4, 4), "float32")) -> R.Tensor((), "float32"):
    ya = R.nn.max_pool1d(a, pool_size=[3], strides=[2], padding=[1, 1], dilation=[1], ceil_mode=True)
    yb = R.nn.max_pool2d(b, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], ceil_mode=True)
    yc = R.nn.max_pool3d(c, pool_size=[2, 2, 2], strides=[2, 2, 2], padding=[1, 1, 1, 1, 1, 1])
    la = R.sum(R.multiply(ya, wa))
    lb = R.sum(R.multiply(yb, wb))
    lc = R.sum(R.multiply(yc, wc))
    return R.add(R.add(la, lb), lc)
'''


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_gradient_through_max_pools_with_nan_matches_torch_autograd(backend):
    torch = need("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(3)
    data = [_data(sp, i, "float32") for i, sp in enumerate([(9,), (7, 9), (5, 6, 7)])]
    ws = [rng.standard_normal(sh).astype("float32") for sh in [(2, 3, 5), (2, 3, 4, 5), (2, 3, 3, 4, 4)]]
    leaves = [torch.tensor(a, requires_grad=True) for a in data]
    ys = [F.max_pool1d(leaves[0], 3, 2, 1, ceil_mode=True), F.max_pool2d(leaves[1], 3, 2, 1, ceil_mode=True),
          F.max_pool3d(leaves[2], 2, 2, 1)]
    sum((y * torch.from_numpy(w)).sum() for y, w in zip(ys, ws)).backward()
    mod = Gradient("main")(retrograd.parse(GRAD))
    assert well_formed(mod) == []
    kw = {} if backend == "numpy" else {"backend": "torch", "numpy_outputs": True}
    with np.errstate(invalid="ignore"):
        _, grads = retrograd.build(mod, **kw)["main_adjoint"](*data, *ws)
    for got, leaf in zip(grads[:3], leaves):
        np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_backward_of_one_by_one_windows_leaves_the_data_untouched():
    """The tiled kernel's taps of 1x1 windows were the data itself, and the backward wrote the gradient
    into them."""
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype("float32")
    x0 = x.copy()
    dx = get("relax.grad.max_pool2d_backward").kernel(np.ones((2, 3, 2, 2), "float32"), x, **_attrs((1, 1), (2, 2), (0, 0), (1, 1), False))
    np.testing.assert_array_equal(x, x0)
    want = np.zeros_like(x)
    want[:, :, ::2, ::2] = 1
    np.testing.assert_array_equal(dx, want)
