"""Normalization kernels against PyTorch (or NumPy references), and the fused backward ops against the
gradient of the same norm composed of primitive ops."""

from __future__ import annotations

import numpy as np
import pytest
from ops.helpers import script_grads, tensor_type

from retrograd.errors import KernelError
from retrograd.ops.kernels import norm
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional
RNG = np.random.default_rng(0)


def t(a):
    return torch.tensor(a)


@pytest.mark.parametrize("shape,axes", [((6, 10), [-1]), ((2, 3, 4, 5), [2, 3]), ((3, 700, 64), [-1])])
def test_layer_norm_matches_torch(shape, axes):
    x = RNG.normal(size=shape)
    k = len(axes)
    gamma, beta = RNG.normal(size=shape[-k:]), RNG.normal(size=shape[-k:])
    got = norm.layer_norm(x, gamma, beta, axes=axes, epsilon=1e-5)
    want = F.layer_norm(t(x), shape[-k:], t(gamma), t(beta), 1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # float32: accumulation in float64 keeps it within float32 rounding
    got32 = norm.layer_norm(x.astype("float32"), gamma.astype("float32"), beta.astype("float32"), axes=axes)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=1e-4, atol=1e-4)


def test_layer_norm_over_unsorted_leading_axes_matches_a_transposed_reference():
    x = RNG.normal(size=(4, 2, 3))
    gamma, beta = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    got = norm.layer_norm(x, gamma, beta, axes=[2, 0])
    xt = x.transpose(1, 2, 0)  # (2, 3, 4): the normalized axes last, in the given order
    want = F.layer_norm(t(xt), (3, 4), t(gamma), t(beta), 1e-5).numpy().transpose(2, 0, 1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_center_and_scale_flags_drop_beta_and_gamma():
    x, gamma, beta = RNG.normal(size=(3, 5)), RNG.normal(size=5), RNG.normal(size=5)
    plain = F.layer_norm(t(x), (5,)).numpy()
    np.testing.assert_allclose(norm.layer_norm(x, gamma, beta, axes=[-1], center=False, scale=False), plain, atol=1e-12)
    np.testing.assert_allclose(norm.layer_norm(x, gamma, beta, axes=[-1], center=False), plain * gamma, atol=1e-12)
    np.testing.assert_allclose(norm.layer_norm(x, gamma, beta, axes=[-1], scale=False), plain + beta, atol=1e-12)


def test_rms_norm_matches_its_definition():
    x, w = RNG.normal(size=(4, 3, 8)), RNG.normal(size=(3, 8))
    got = norm.rms_norm(x, w, axes=[-2, -1], epsilon=1e-6)
    want = x / np.sqrt((x**2).mean(axis=(1, 2), keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_matches_torch(groups):
    x, gamma, beta = RNG.normal(size=(2, 6, 3, 4)), RNG.normal(size=6), RNG.normal(size=6)
    got = norm.group_norm(x, gamma, beta, num_groups=groups, channel_axis=1, axes=[2, 3])
    want = F.group_norm(t(x), groups, t(gamma), t(beta), 1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_group_norm_with_channels_last():
    x, gamma, beta = RNG.normal(size=(2, 3, 4, 6)), RNG.normal(size=6), RNG.normal(size=6)
    got = norm.group_norm(x, gamma, beta, num_groups=3, channel_axis=-1, axes=[1, 2])
    want = F.group_norm(t(x.transpose(0, 3, 1, 2)), 3, t(gamma), t(beta)).numpy().transpose(0, 2, 3, 1)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_instance_norm_matches_torch():
    x, gamma, beta = RNG.normal(size=(2, 3, 5, 4)), RNG.normal(size=3), RNG.normal(size=3)
    got = norm.instance_norm(x, gamma, beta, channel_axis=1, axes=[2, 3])
    want = F.instance_norm(t(x), weight=t(gamma), bias=t(beta), eps=1e-5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_batch_norm_training_matches_torch_and_tvm_running_statistics():
    x = RNG.normal(size=(8, 3, 4, 5)) * 2 + 1
    gamma, beta = RNG.normal(size=3), RNG.normal(size=3)
    mm, mv = RNG.normal(size=3), RNG.uniform(0.5, 2, size=3)
    out, new_mean, new_var = norm.batch_norm(x, gamma, beta, mm, mv, axis=1, momentum=0.2, training=True)
    rm, rv = t(mm.copy()), t(mv.copy())
    want = F.batch_norm(t(x), rm, rv, t(gamma), t(beta), training=True, momentum=0.2, eps=1e-5).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(new_mean, rm.numpy(), rtol=1e-12)
    # TVM updates the running variance with the biased batch variance (PyTorch: unbiased).
    biased = x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(new_var, 0.8 * mv + 0.2 * biased, rtol=1e-12)


def test_batch_norm_inference_uses_the_moving_statistics_and_returns_copies():
    x = RNG.normal(size=(4, 5, 3))  # channels last: axis=-1
    gamma, beta = RNG.normal(size=3), RNG.normal(size=3)
    mm, mv = RNG.normal(size=3), RNG.uniform(0.5, 2, size=3)
    out, m2, v2 = norm.batch_norm(x, gamma, beta, mm, mv, axis=-1, training=False, epsilon=1e-3)
    np.testing.assert_allclose(out, (x - mm) / np.sqrt(mv + 1e-3) * gamma + beta, rtol=1e-12)
    np.testing.assert_array_equal(m2, mm)
    assert not np.shares_memory(m2, mm) and not np.shares_memory(v2, mv)


def test_kernel_errors_are_clear():
    with pytest.raises(KernelError, match="gamma has shape"):
        norm.layer_norm(np.ones((2, 3)), np.ones(2), np.ones(3), axes=[-1])
    with pytest.raises(KernelError, match="not divisible into 4 groups"):
        norm.group_norm(np.ones((2, 6, 3)), np.ones(6), np.ones(6), num_groups=4, channel_axis=1, axes=[2])
    with pytest.raises(KernelError, match="float dtype"):
        norm.rms_norm(np.ones((2, 3), "int32"), np.ones(3), axes=[-1])


# -- fused backward ops against the composed form --------------------------------------------------

COMPOSED_LAYER_NORM = """
@R.function
def main(x: {X}, gamma: {P}, beta: {P}, c: {X}):
    with R.dataflow():
        mean = R.mean(x, axis=[{AXES}], keepdims=True)
        var = R.variance(x, axis=[{AXES}], keepdims=True)
        den = R.sqrt(R.add(var, R.const({EPS}, "float64")))
        y = R.add(R.multiply(R.divide(R.subtract(x, mean), den), gamma), beta)
        gv = R.sum(R.multiply(y, c))
        R.output(gv)
    return gv
"""
FUSED_LAYER_NORM = """
@R.function
def main(x: {X}, gamma: {P}, beta: {P}, c: {X}):
    with R.dataflow():
        y = R.nn.layer_norm(x, gamma, beta, axes=[{AXES}], epsilon={EPS})
        gv = R.sum(R.multiply(y, c))
        R.output(gv)
    return gv
"""


def _fill(text, x, p, axes, eps):
    return (text.replace("{X}", tensor_type(x)).replace("{P}", tensor_type(p))
            .replace("{AXES}", ", ".join(map(str, axes))).replace("{EPS}", repr(eps)))


@pytest.mark.parametrize("shape,axes", [((5, 7), [1]), ((2, 3, 4), [1, 2])])
def test_layer_norm_backward_equals_the_composed_gradient(shape, axes):
    x = RNG.normal(size=shape)
    p_shape = shape[axes[0]:]
    gamma, beta, c = RNG.normal(size=p_shape), RNG.normal(size=p_shape), RNG.normal(size=shape)
    args = [x, gamma, beta, c]
    names = ["x", "gamma", "beta"]
    v1, fused = script_grads(_fill(FUSED_LAYER_NORM, x, gamma, axes, 1e-3), args, names)
    v2, composed = script_grads(_fill(COMPOSED_LAYER_NORM, x, gamma, axes, 1e-3), args, names)
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    for a, b in zip(fused, composed):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_norm_backward_kernels_match_torch_autograd():
    x = RNG.normal(size=(4, 6, 5))
    g = RNG.normal(size=x.shape)
    gamma, beta = RNG.normal(size=6), RNG.normal(size=6)
    xt, gt, bt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    F.group_norm(xt, 3, gt, bt).backward(t(g))
    dx, dg, db = norm.group_norm_backward(g, x, gamma, num_groups=3, channel_axis=1, axes=[2])
    for ours, theirs in zip((dx, dg, db), (xt, gt, bt)):
        np.testing.assert_allclose(ours, theirs.grad.numpy(), rtol=1e-9, atol=1e-12)
    w = RNG.normal(size=5)
    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (xt * torch.rsqrt((xt**2).mean(-1, keepdim=True) + 1e-5) * wt).backward(t(g))
    dx, dw = norm.rms_norm_backward(g, x, w, axes=[-1])
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dw, wt.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_backward_matches_torch_autograd(training):
    x = RNG.normal(size=(6, 3, 4))
    g = RNG.normal(size=x.shape)
    gamma, beta = RNG.normal(size=3), RNG.normal(size=3)
    mm, mv = RNG.normal(size=3), RNG.uniform(0.5, 2, size=3)
    xt, gt, bt, mt, vt = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta, mm, mv))
    if training:
        y = F.batch_norm(xt, None, None, gt, bt, training=True)
    else:
        y = (xt - mt[:, None]) / torch.sqrt(vt[:, None] + 1e-5) * gt[:, None] + bt[:, None]
    y.backward(t(g))
    zeros = np.zeros(3)
    dx, dg, db, dm, dv = norm.batch_norm_backward(g, zeros, zeros, x, gamma, mm, mv, axis=1, training=training)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dg, gt.grad.numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(db, bt.grad.numpy(), rtol=1e-9, atol=1e-12)
    if not training:
        np.testing.assert_allclose(dm, mt.grad.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(dv, vt.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_differentiating_a_backward_op_of_unknown_rank_is_a_clear_error():
    # Second order through a fused backward op differentiates the norm written with other ops, which
    # needs the data's rank; without it the pass says so at the binding.
    import retrograd
    from retrograd.errors import DiagnosticError
    from retrograd.passes.gradient import Gradient

    text = """
@R.function
def main(g: R.Tensor(dtype="float64"), x: R.Tensor(dtype="float64"), gamma: R.Tensor((3,), "float64")):
    with R.dataflow():
        t = R.grad.layer_norm_backward(g, x, gamma, axes=[1])
        gv = R.sum(t[1])
        R.output(gv)
    return gv
"""
    with pytest.raises(DiagnosticError, match=r"<string>:5:\d+: .*R.grad.layer_norm_backward: the gradient needs the data's rank, got R.Tensor"):
        Gradient("main")(retrograd.parse(text))


def test_batch_norm_training_is_accurate_when_the_mean_dwarfs_the_spread():
    """float32 channels of mean 300 and std 1: output and gradients within a few float32 roundings of the
    float64 formula (x - mean) * rstd, on both backends' kernels. Forming x * rstd - mean * rstd, or
    sum(g * x) - mean * sum(g), or the mean from float32 partial sums, loses |mean| / std of the digits
    (errors 1e-5 to 2e-5 here; PyTorch's own CPU kernel is at 6e-6 / 3e-6)."""
    from retrograd.ops.torch_kernels import norm as torch_norm

    rng = np.random.default_rng(3)
    x = (300.0 + rng.standard_normal((8, 3, 6, 6))).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    gamma, beta = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    zeros, ones = np.zeros(3, np.float32), np.ones(3, np.float32)
    xd, gd, gam = x.astype(np.float64), g.astype(np.float64), gamma.astype(np.float64)[:, None, None]
    axes = (0, 2, 3)
    xc = xd - xd.mean(axes, keepdims=True)
    rstd = 1.0 / np.sqrt((xc * xc).mean(axes, keepdims=True) + 1e-5)
    xhat = xc * rstd
    want_y = xhat * gam + beta.astype(np.float64)[:, None, None]
    want_dx = gam * rstd * (gd - gd.mean(axes, keepdims=True) - xhat * (gd * xhat).mean(axes, keepdims=True))
    want_dg = (gd * xhat).sum(axes)

    def rel(got, want):
        return float(np.abs(np.asarray(got, np.float64) - want).max() / np.abs(want).max())

    for kernels, wrap, unwrap in ((norm, np.asarray, np.asarray), (torch_norm, torch.from_numpy, lambda a: a.numpy())):
        y, _, _ = kernels.batch_norm(*map(wrap, (x, gamma, beta, zeros, ones)), axis=1, training=True)
        dx, dg, db, _, _ = kernels.batch_norm_backward(*map(wrap, (g, zeros, zeros, x, gamma, zeros, ones)), axis=1,
                                                        training=True)
        assert unwrap(dx).dtype == np.float32
        for what, got, want in (("y", y, want_y), ("dx", dx, want_dx), ("dgamma", dg, want_dg)):
            assert rel(unwrap(got), want) < 2.5e-7, (kernels.__name__, what, rel(unwrap(got), want))
        np.testing.assert_allclose(unwrap(db), gd.sum(axes), rtol=1e-6)


def test_batch_norm_statistics_of_a_channel_with_an_infinity_match_torch():
    # The corrected two-pass mean subtracted the (infinite) first mean from the data: inf - inf, a NaN
    # moving mean where PyTorch's is the infinity.
    from retrograd.ops.registry import get

    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype("float32")
    x[1, 0], x[2, 1], x[3, 1] = np.inf, np.inf, -np.inf  # channel 0: mean inf; channel 1: mean NaN
    g, b, mm, mv = np.ones(3, "float32"), np.zeros(3, "float32"), np.full(3, 0.5, "float32"), np.ones(3, "float32")
    rm, rv = torch.tensor(mm), torch.tensor(mv)
    y = F.batch_norm(torch.tensor(x), rm, rv, torch.tensor(g), torch.tensor(b), training=True, momentum=0.1)
    # PyTorch updates the variance with the unbiased batch variance, TVM (and we) with the biased one.
    want_var = 0.9 * mv + 0.1 * x.astype(np.float64).var(axis=0)
    op = get("relax.nn.batch_norm")
    for got in (op.kernel(x, g, b, mm, mv, axis=1), [t.numpy() for t in op.torch_kernel(*map(torch.tensor, (x, g, b, mm, mv)), axis=1)]):
        out, new_mean, new_var = got
        np.testing.assert_allclose(out, y.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(new_mean, rm.numpy(), rtol=1e-6)
        np.testing.assert_allclose(new_var, want_var, rtol=1e-5)
