"""Attention against PyTorch's scaled_dot_product_attention, its fused backward against autograd and the
composed form, dropout's seeded masks, and TVM reading our printed attention and dropout calls."""

from __future__ import annotations

import numpy as np
import pytest
from ops.helpers import script_grads, tensor_type

import retrograd
from retrograd.errors import KernelError
from retrograd.ops.kernels import attention as att
from retrograd.ops.kernels.dropout import dropout
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional
RNG = np.random.default_rng(0)


def _torch_attention(q, k, v, bias=None, scale=None, causal=None):
    """PyTorch's attention on (B, S, N, H) tensors; causal masks as TVM defines them."""
    qt, kt, vt = (a.transpose(1, 2) for a in (q, k, v))
    groups = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(groups, 1), vt.repeat_interleave(groups, 1)
    s, skv = qt.shape[2], kt.shape[2]
    mask = None
    if causal is not None:
        offset = 0 if causal == "TopLeft" else abs(s - skv)
        keep = torch.ones(s, skv, dtype=torch.bool).tril(offset)
        mask = torch.zeros(s, skv, dtype=qt.dtype).masked_fill(~keep, float("-inf"))
    if bias is not None:
        mask = bias if mask is None else bias + mask
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale).transpose(1, 2)


CASES = [
    dict(q=(2, 4, 2, 8), k=(2, 6, 2, 8), v=(2, 6, 2, 5)),
    dict(q=(1, 5, 2, 4), k=(1, 5, 2, 4), v=(1, 5, 2, 4), causal="TopLeft"),
    dict(q=(1, 3, 2, 4), k=(1, 6, 2, 4), v=(1, 6, 2, 4), causal="BottomRight", scale=0.3),
    dict(q=(1, 6, 2, 4), k=(1, 3, 2, 4), v=(1, 3, 2, 4), causal="BottomRight"),
    dict(q=(2, 3, 6, 4), k=(2, 5, 2, 4), v=(2, 5, 2, 3)),
    dict(q=(2, 3, 2, 4), k=(2, 5, 2, 4), v=(2, 5, 2, 3), bias=(2, 1, 3, 5)),
    dict(q=(1, 4, 4, 2), k=(1, 4, 2, 2), v=(1, 4, 2, 2), bias=(1, 4, 1, 4), causal="TopLeft"),
]


def _arrays(c):
    arrays = [RNG.normal(size=c[n]) for n in ("q", "k", "v")]
    return arrays + ([RNG.normal(size=c["bias"])] if "bias" in c else [])


@pytest.mark.parametrize("c", CASES)
def test_attention_and_its_backward_match_torch(c):
    arrays = _arrays(c)
    kw = dict(scale=c.get("scale"), causal_mask=c.get("causal"))
    got = att.attention(*arrays, **kw)
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = _torch_attention(*ts[:3], *(ts[3:] or [None]), scale=c.get("scale"), causal=c.get("causal"))
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = RNG.normal(size=got.shape)
    want.backward(torch.tensor(g))
    grads = att.attention_backward(g, *arrays, **kw)
    assert len(grads) == len(arrays)
    for ours, t in zip(grads, ts):
        np.testing.assert_allclose(ours, t.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_attention_float32_and_errors():
    q = RNG.normal(size=(1, 3, 2, 4)).astype("float32")
    assert att.attention(q, q, q).dtype == np.float32
    with pytest.raises(KernelError, match="not a multiple"):
        att.attention(q, q[:, :, :1].repeat(3, 2), q[:, :, :1].repeat(3, 2))
    with pytest.raises(KernelError, match="window_size"):
        att.attention(q, q, q, window_size=2)


COMPOSED = """
@R.function
def main(q: {Q}, k: {K}, v: {V}, bias: {B}, c: {O}):
    with R.dataflow():
        qt = R.permute_dims(q, axes=[0, 2, 1, 3])
        kt = R.permute_dims(k, axes=[0, 2, 3, 1])
        vt = R.permute_dims(v, axes=[0, 2, 1, 3])
        s = R.add(R.multiply(R.matmul(qt, kt), R.const(0.5, "float64")), bias)
        o = R.permute_dims(R.matmul(R.nn.softmax(s, axis=-1), vt), axes=[0, 2, 1, 3])
        gv = R.sum(R.multiply(o, c))
        R.output(gv)
    return gv
"""
FUSED = """
@R.function
def main(q: {Q}, k: {K}, v: {V}, bias: {B}, c: {O}):
    with R.dataflow():
        o = R.nn.attention_bias(q, k, v, bias, scale=0.5)
        gv = R.sum(R.multiply(o, c))
        R.output(gv)
    return gv
"""


def test_fused_backward_equals_the_gradient_of_the_composed_form():
    q, k, v, bias = (RNG.normal(size=s) for s in ((2, 3, 2, 4), (2, 5, 2, 4), (2, 5, 2, 3), (2, 1, 3, 5)))
    c = RNG.normal(size=(2, 3, 2, 3))
    fill = dict(Q=q, K=k, V=v, B=bias, O=c)

    def text(t):
        for key, a in fill.items():
            t = t.replace("{" + key + "}", tensor_type(a))
        return t

    names = ["q", "k", "v", "bias"]
    v1, fused = script_grads(text(FUSED), [q, k, v, bias, c], names)
    v2, composed = script_grads(text(COMPOSED), [q, k, v, bias, c], names)
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    for a, b in zip(fused, composed):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


# -- dropout ----------------------------------------------------------------------------------------


def test_dropout_is_seeded_reproducible_and_unbiased():
    x = RNG.normal(size=(200, 300))
    y1, m1 = dropout(x, rate=0.3, training=True, seed=11)
    y2, m2 = dropout(x, rate=0.3, training=True, seed=11)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(m1, m2)
    _, m3 = dropout(x, rate=0.3, training=True, seed=12)
    assert (m1 != m3).any()
    assert set(np.unique(m1)) == {0.0, 1.0}
    assert abs(m1.mean() - 0.7) < 0.01  # 60,000 Bernoulli(0.7) draws: sd 0.002
    np.testing.assert_allclose(y1, x * m1 / 0.7, rtol=1e-15)


def test_dropout_in_inference_is_the_identity_as_tvm_legalizes_it():
    x = RNG.normal(size=(3, 4)).astype("float32")
    y, mask = dropout(x, rate=0.5)
    assert not np.shares_memory(y, x) and (y == x).all() and mask.dtype == np.float32 and (mask == 1).all()
    zeros, _ = dropout(x, rate=1.0, training=True)
    assert (zeros == 0).all()


DROPOUT = """
@R.function
def main(x: R.Tensor((3, 4), "float32")):
    with R.dataflow():
        t = R.nn.dropout(x, rate=0.25{EXTRA})
        y = t[0]
        R.output(y)
    return y
"""


def test_dropout_prints_tvm_s_form_in_inference_and_its_extension_in_training():
    inference = retrograd.parse(DROPOUT.replace("{EXTRA}", ""))
    assert "R.nn.dropout(x, rate=0.25)" in inference.script()
    training = retrograd.parse(DROPOUT.replace("{EXTRA}", ", training=True, seed=3"))
    text = training.script()
    assert "R.nn.dropout(x, rate=0.25, training=True, seed=3)" in text
    retrograd.assert_structural_equal(retrograd.parse(text), training)
    x = RNG.normal(size=(3, 4)).astype("float32")
    from retrograd.runtime.executor import build

    np.testing.assert_array_equal(build(training)["main"](x), dropout(x, rate=0.25, training=True, seed=3)[0])


def test_tvm_reads_our_attention_with_a_scale():
    tvm_script = need("tvm.script")
    text = """
@R.function
def main(q: R.Tensor((1, 3, 2, 4), "float32"), b: R.Tensor((1, 1, 3, 3), "float32")):
    with R.dataflow():
        y = R.nn.attention_bias(q, q, q, b, scale=0.5, causal_mask="BottomRight")
        R.output(y)
    return y
"""
    ours = retrograd.parse(text).script()
    theirs = tvm_script.from_source(ours)
    call = theirs["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "relax.nn.attention_bias"
    assert float(call.attrs.scale.value) == 0.5 and call.attrs.causal_mask == "BottomRight"
