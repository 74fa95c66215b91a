"""Pointwise activations and pad against PyTorch (forward and autograd), including the kinks at zero."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.errors import KernelError
from retrograd.ops.kernels import pad as pad_k
from retrograd.ops.kernels import pointwise as pw
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional
X = np.concatenate([np.random.default_rng(0).normal(size=50) * 4, [0.0, -0.0, 30.0, -30.0]])


@pytest.mark.parametrize(
    "ours,theirs",
    [
        (lambda x: pw.gelu_tanh(x), lambda t: F.gelu(t, approximate="tanh")),
        (lambda x: pw.leakyrelu(x, alpha=0.1), lambda t: F.leaky_relu(t, 0.1)),
        (lambda x: pw.selu(x), F.selu),
        (lambda x: pw.softplus(x), F.softplus),
        (lambda x: pw.softplus(x, beta=2.0, threshold=3.0), lambda t: F.softplus(t, 2.0, 3.0)),
    ],
)
def test_activations_match_torch(ours, theirs):
    np.testing.assert_allclose(ours(X), theirs(torch.tensor(X)).numpy(), rtol=1e-12, atol=1e-14)
    assert ours(X.astype("float32")).dtype == np.float32


@pytest.mark.parametrize("axis,alpha_shape", [(1, (3,)), (-1, (4,)), (1, (1,))])
def test_prelu_matches_torch(axis, alpha_shape):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 4))
    alpha = rng.uniform(0, 0.5, alpha_shape)
    got = pw.prelu(x, alpha, axis=axis)
    xt = torch.tensor(np.moveaxis(x, axis, 1))
    want = np.moveaxis(F.prelu(xt, torch.tensor(alpha)).numpy(), 1, axis)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    with pytest.raises(KernelError, match="alpha must have shape"):
        pw.prelu(x, np.ones(2), axis=axis)


_TORCH_MODE = {"reflect": "reflect", "replicate": "replicate", "circular": "circular"}


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes_and_their_adjoint_match_torch(mode):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 5, 6))
    widths = [0, 0, 0, 0, 2, 1, 3, 2]
    got = pad_k.pad(x, pad_width=widths, pad_mode=mode)
    xt = torch.tensor(x, requires_grad=True)
    y = F.pad(xt, (3, 2, 2, 1), mode=_TORCH_MODE[mode])
    np.testing.assert_array_equal(got, y.detach().numpy())
    g = rng.normal(size=got.shape)
    y.backward(torch.tensor(g))
    np.testing.assert_allclose(pad_k.pad_backward(g, x, pad_width=widths, pad_mode=mode), xt.grad.numpy(), rtol=1e-12)


def test_constant_pad_with_value_and_negative_widths():
    x = np.arange(12.0).reshape(3, 4)
    got = pad_k.pad(x, pad_width=[1, -1, -2, 1], pad_value=7.0)
    want = np.full((3, 3), 7.0)
    want[1:, :2] = x[:2, 2:]
    np.testing.assert_array_equal(got, want)
    g = np.arange(9.0).reshape(3, 3)
    back = pad_k.pad_backward(g, x, pad_width=[1, -1, -2, 1])
    expect = np.zeros_like(x)
    expect[:2, 2:] = g[1:, :2]
    np.testing.assert_array_equal(back, expect)
    with pytest.raises(KernelError, match="2 entries per axis"):
        pad_k.pad(x, pad_width=[1, 1])
    with pytest.raises(KernelError, match="pad_mode"):
        pad_k.pad(x, pad_width=[1, 1, 1, 1], pad_mode="mirror")
