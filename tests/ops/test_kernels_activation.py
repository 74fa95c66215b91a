"""Softmax family, cross_entropy_with_logits, erf/erfc, gelu and silu against scalar math, finite
differences and PyTorch."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrograd.errors import KernelError
from retrograd.ops.kernels import activation
from retrograd.ops.kernels.special import erf, erfc
from optional import need  # noqa: E402

X = np.random.default_rng(0).standard_normal((3, 4, 5)) * 3


def naive_softmax(x, axis):
    x = np.moveaxis(x, axis, -1)
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = [math.exp(v - max(x[idx])) for v in x[idx]]
        out[idx] = [v / math.fsum(row) for v in row]
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("axis", [-1, 0, 1, 2, -3])
def test_softmax_and_log_softmax_match_naive(axis):
    ref = naive_softmax(X, axis)
    np.testing.assert_allclose(activation.softmax(X, axis=axis), ref, rtol=1e-14, atol=1e-16)
    np.testing.assert_allclose(activation.log_softmax(X, axis=axis), np.log(ref), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_family_on_empty_and_chunked_inputs(fn):
    f = getattr(activation, fn)
    assert f(np.zeros((0, 3))).shape == (0, 3) and f(np.zeros((2, 0, 3)), axis=1).shape == (2, 0, 3)
    # Many rows: several ~1 MB chunks, each along a middle axis.
    x = np.random.default_rng(3).standard_normal((700, 40, 9))
    ref = naive_softmax(x[:3], 1)
    np.testing.assert_allclose(f(x, axis=1)[:3], ref if fn == "softmax" else np.log(ref), rtol=1e-13)
    np.testing.assert_allclose(f(x, axis=1), f(np.ascontiguousarray(x.transpose(1, 0, 2)), axis=0).transpose(1, 0, 2), rtol=1e-15)


def test_softmax_is_stable_for_huge_inputs_and_keeps_float32():
    x = np.array([[1000.0, 1000.0, -1000.0]], "float32")
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        s = activation.softmax(x)
        ls = activation.log_softmax(x)
    assert s.dtype == ls.dtype == np.float32
    np.testing.assert_allclose(s, [[0.5, 0.5, 0.0]], atol=1e-7)
    np.testing.assert_allclose(ls[0, :2], [-math.log(2)] * 2, rtol=1e-6)


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_cross_entropy_with_logits_follows_tvm(shape):
    """TVM: -sum(predictions * labels), divided by shape[0] when ndim >= 2; no log_softmax inside."""
    rng = np.random.default_rng(1)
    p, y = rng.standard_normal(shape), rng.random(shape)
    n = shape[0] if len(shape) >= 2 else 1
    expect = -math.fsum((p * y).ravel()) / n
    got = activation.cross_entropy_with_logits(p, y)
    assert got.shape == () and got.dtype == p.dtype
    np.testing.assert_allclose(got, expect, rtol=1e-13)


def test_erf_and_erfc_match_the_standard_library():
    z = np.concatenate([np.linspace(-9, 9, 7201), np.geomspace(1e-300, 27, 500), -np.geomspace(1e-300, 27, 500)])
    ref_erf = np.array([math.erf(v) for v in z])
    ref_erfc = np.array([math.erfc(v) for v in z])
    np.testing.assert_allclose(erf(z), ref_erf, rtol=2e-14, atol=0)
    np.testing.assert_allclose(erfc(z), ref_erfc, rtol=2e-14, atol=0)  # relative even in the far tail
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 40.0, -40.0])
    np.testing.assert_array_equal(erf(special), [0.0, -0.0, 1.0, -1.0, np.nan, 1.0, -1.0])
    np.testing.assert_array_equal(erfc(special), [1.0, 1.0, 0.0, 2.0, np.nan, 0.0, 2.0])
    assert erf(np.float32(0.5)).dtype == np.float32


def _gelu_ref(v):
    return 0.5 * v * math.erfc(-v / math.sqrt(2.0))


def test_gelu_matches_scalar_reference_and_its_derivative():
    x = np.concatenate([np.linspace(-12, 12, 2401), [0.0, 1e-300, -1e-300, 40.0, -40.0]])
    np.testing.assert_allclose(activation.gelu(x), [_gelu_ref(v) for v in x], rtol=1e-13, atol=1e-300)
    h = 1e-6
    numeric = (activation.gelu(x + h) - activation.gelu(x - h)) / (2 * h)
    np.testing.assert_allclose(activation.gelu_derivative(x), numeric, rtol=1e-7, atol=1e-9)


def test_silu_and_its_derivative():
    x = np.concatenate([np.linspace(-50, 50, 2001), [-800.0, 800.0]])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = activation.silu(x)
        dy = activation.silu_derivative(x)
    np.testing.assert_allclose(y, [v / (1 + math.exp(-v)) if v > -700 else 0.0 for v in x], rtol=1e-14, atol=1e-300)
    h = 1e-6
    numeric = (activation.silu(x + h) - activation.silu(x - h)) / (2 * h)
    np.testing.assert_allclose(dy, numeric, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("fn", ["gelu", "gelu_derivative", "silu", "silu_derivative", "softmax", "log_softmax"])
def test_dtype_kept_inputs_untouched_ints_rejected(fn):
    x = X.astype("float32")
    x0 = x.copy()
    assert getattr(activation, fn)(x).dtype == np.float32
    np.testing.assert_array_equal(x, x0)
    with pytest.raises(KernelError, match="float dtype"):
        getattr(activation, fn)(np.arange(3))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: activation.softmax(X, axis=3), "axis 3 out of range"),
        (lambda: activation.log_softmax(np.float64(1.0)), "axis"),
        (lambda: activation.cross_entropy_with_logits(np.zeros((2, 3)), np.zeros((3, 2))), "same shape"),
    ],
)
def test_bad_inputs_raise_kernel_errors(call, message):
    with pytest.raises(KernelError, match=message):
        call()


def test_against_torch():
    torch = need("torch")
    xt = torch.tensor(X)
    np.testing.assert_allclose(activation.softmax(X, axis=1), torch.softmax(xt, 1).numpy(), rtol=1e-13)
    np.testing.assert_allclose(activation.log_softmax(X, axis=-1), torch.log_softmax(xt, -1).numpy(), rtol=1e-13)
    # torch computes 1 + erf(x/sqrt 2), which cancels in the negative tail: absolute agreement there.
    np.testing.assert_allclose(activation.gelu(X), torch.nn.functional.gelu(xt).numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(activation.silu(X), torch.nn.functional.silu(xt).numpy(), rtol=1e-13, atol=1e-16)
    xg = xt.clone().requires_grad_(True)
    torch.nn.functional.gelu(xg).sum().backward()
    np.testing.assert_allclose(activation.gelu_derivative(X), xg.grad.numpy(), rtol=1e-12, atol=1e-15)
    xs = xt.clone().requires_grad_(True)
    torch.nn.functional.silu(xs).sum().backward()
    np.testing.assert_allclose(activation.silu_derivative(X), xs.grad.numpy(), rtol=1e-12, atol=1e-15)
