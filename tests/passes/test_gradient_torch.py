"""Gradients of whole models against PyTorch autograd: an MLP, a CNN, an embedding model (float32, 1e-5
relative), and Hessian-vector products of an MLP (second order: Gradient applied to a function calling
the adjoint)."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient
from optional import need  # noqa: E402

torch = need("torch")
F = torch.nn.functional

MLP = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((8, 16), "float32"), w1: R.Tensor((32, 16), "float32"), b1: R.Tensor((32,), "float32"), w2: R.Tensor((32, 32), "float32"), b2: R.Tensor((32,), "float32"), w3: R.Tensor((10, 32), "float32"), b3: R.Tensor((10,), "float32"), labels: R.Tensor((8,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            h1 = R.nn.relu(R.add(R.matmul(x, R.permute_dims(w1)), b1))
            h2 = R.nn.relu(R.add(R.matmul(h1, R.permute_dims(w2)), b2))
            logits = R.add(R.matmul(h2, R.permute_dims(w3)), b3)
            lp = R.nn.log_softmax(logits, axis=-1)
            loss = R.nn.nll_loss(lp, labels, reduction="mean")
            R.output(loss)
        return loss
'''

CNN = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4, 12, 12), "float32"), w1: R.Tensor((8, 2, 3, 3), "float32"), w2: R.Tensor((32, 5), "float32"), labels: R.Tensor((2,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            c = R.nn.conv2d(x, w1, strides=[2, 2], padding=[1, 1], groups=2)
            r = R.nn.relu(c)
            m = R.nn.max_pool2d(r, pool_size=[2, 2], strides=[2, 2])
            a = R.nn.avg_pool2d(m, pool_size=[2, 2], strides=[2, 2], ceil_mode=True)
            flat = R.reshape(a, R.shape([2, 32]))
            logits = R.matmul(flat, w2)
            lp = R.nn.log_softmax(logits)
            loss = R.nn.nll_loss(lp, labels)
            R.output(loss)
        return loss
'''

EMBEDDING = '''
@I.ir_module
class Module:
    @R.function
    def main(table: R.Tensor((20, 8), "float32"), idx: R.Tensor((4, 6), "int64"), w: R.Tensor((8, 3), "float32"), labels: R.Tensor((4,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            e = R.take(table, idx, axis=0)
            pooled = R.mean(e, axis=[1])
            logits = R.matmul(R.tanh(pooled), w)
            loss = R.nn.nll_loss(R.nn.log_softmax(logits), labels)
            R.output(loss)
        return loss
'''


def _ours(text: str, args: list, **options):
    mod = retrograd.parse(text)
    out = Gradient("main", **options)(mod)
    assert well_formed(out) == []
    return retrograd.build(out)["main_adjoint"](*args)


def _compare(ours, theirs, rtol=1e-5):
    loss, grads = ours
    t_loss, t_grads = theirs
    np.testing.assert_allclose(loss, t_loss.detach().numpy(), rtol=rtol)
    assert len(grads) == len(t_grads)
    for g, t in zip(grads, t_grads):
        t = t.detach().numpy()
        # 1e-5 relative to the tensor's scale (its largest entry): float32 sums taken in a different
        # order differ in the last bits, which is a large relative error on entries near zero.
        np.testing.assert_allclose(g, t, rtol=rtol, atol=rtol * float(np.abs(t).max()))


def _leaf(a):
    return torch.tensor(a, requires_grad=np.issubdtype(a.dtype, np.floating))


def test_mlp_matches_torch():
    rng = np.random.default_rng(0)
    shapes = [(8, 16), (32, 16), (32,), (32, 32), (32,), (10, 32), (10,)]
    args = [(rng.standard_normal(s) * 0.5).astype("float32") for s in shapes] + [rng.integers(0, 10, 8)]
    t = [_leaf(a) for a in args]
    x, w1, b1, w2, b2, w3, b3, labels = t
    h1 = F.relu(F.linear(x, w1, b1))
    h2 = F.relu(F.linear(h1, w2, b2))
    loss = F.nll_loss(F.log_softmax(F.linear(h2, w3, b3), -1), labels)
    grads = torch.autograd.grad(loss, t[:7])
    _compare(_ours(MLP, args), (loss, grads))


def test_cnn_matches_torch():
    rng = np.random.default_rng(1)
    args = [
        rng.standard_normal((2, 4, 12, 12)).astype("float32"),
        (rng.standard_normal((8, 2, 3, 3)) * 0.3).astype("float32"),
        (rng.standard_normal((32, 5)) * 0.3).astype("float32"),
        np.array([4, 1]),
    ]
    x, w1, w2, labels = [_leaf(a) for a in args]
    r = F.relu(F.conv2d(x, w1, stride=2, padding=1, groups=2))
    m = F.max_pool2d(r, 2, 2)
    a = F.avg_pool2d(m, 2, 2, ceil_mode=True, count_include_pad=False)
    loss = F.nll_loss(F.log_softmax(a.reshape(2, 32) @ w2, -1), labels)
    grads = torch.autograd.grad(loss, [x, w1, w2])
    _compare(_ours(CNN, args), (loss, grads))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_embedding_with_duplicate_indices_matches_torch(sparse):
    rng = np.random.default_rng(2)
    idx = np.array([[0, 3, 3, 7, 19, 3], [5, 5, 5, 5, 0, 1], [2, 8, 13, 8, 2, 8], [19, 18, 0, 3, 3, 4]])
    args = [rng.standard_normal((20, 8)).astype("float32"), idx, rng.standard_normal((8, 3)).astype("float32"), np.array([0, 2, 1, 2])]
    table, idx_t, w, labels = [_leaf(a) for a in args]
    pooled = F.embedding(idx_t, table).mean(1)
    loss = F.nll_loss(F.log_softmax(torch.tanh(pooled) @ w, -1), labels)
    grads = torch.autograd.grad(loss, [table, w])
    loss_ours, grads_ours = _ours(EMBEDDING, args, sparse_grads=["table"] if sparse else None)
    if sparse:
        from retrograd.passes import densify_sparse_grad

        indices, rows = grads_ours[0]
        grads_ours = (densify_sparse_grad(indices, rows, 20), grads_ours[1])
    _compare((loss_ours, grads_ours), (loss, grads))


HVP = '''
    @R.function
    def hvp(x: R.Tensor((6, 5), "float64"), w1: R.Tensor((7, 5), "float64"), b1: R.Tensor((7,), "float64"), w2: R.Tensor((3, 7), "float64"), labels: R.Tensor((6,), "int64"), v1: R.Tensor((7, 5), "float64"), vb: R.Tensor((7,), "float64"), v2: R.Tensor((3, 7), "float64")) -> R.Tensor((), "float64"):
        cls = Module
        with R.dataflow():
            r = cls.main_adjoint(x, w1, b1, w2, labels)
            g = r[1]
            s1 = R.sum(R.multiply(g[0], v1))
            s2 = R.sum(R.multiply(g[1], vb))
            s3 = R.sum(R.multiply(g[2], v2))
            gv = R.add(R.add(s1, s2), s3)
            R.output(gv)
        return gv
'''

SMALL_MLP = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6, 5), "float64"), w1: R.Tensor((7, 5), "float64"), b1: R.Tensor((7,), "float64"), w2: R.Tensor((3, 7), "float64"), labels: R.Tensor((6,), "int64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            h = R.tanh(R.add(R.matmul(x, R.permute_dims(w1)), b1))
            logits = R.matmul(h, R.permute_dims(w2))
            loss = R.nn.nll_loss(R.nn.log_softmax(logits), labels)
            R.output(loss)
        return loss
'''


def test_mlp_hessian_vector_product_matches_torch_and_finite_differences():
    mod = Gradient("main", require_grads=["w1", "b1", "w2"])(retrograd.parse(SMALL_MLP))
    # Second order: differentiate a function that calls the adjoint (through the printed text).
    mod = retrograd.parse(mod.script().rstrip("\n") + "\n" + HVP)
    mod = Gradient("hvp", require_grads=["w1", "b1", "w2"])(mod)
    assert well_formed(mod) == []
    ex = retrograd.build(mod)
    rng = np.random.default_rng(3)
    params = [rng.standard_normal(s) for s in [(6, 5), (7, 5), (7,), (3, 7)]] + [np.array([0, 1, 2, 2, 1, 0])]
    vs = [rng.standard_normal(s) for s in [(7, 5), (7,), (3, 7)]]
    _, hv = ex["hvp_adjoint"](*params, *vs)

    t = [_leaf(a) for a in params]
    x, w1, b1, w2, labels = t
    loss = F.nll_loss(F.log_softmax(torch.tanh(F.linear(x, w1, b1)) @ w2.T, -1), labels)
    g = torch.autograd.grad(loss, [w1, b1, w2], create_graph=True)
    t_hv = torch.autograd.grad(sum((gi * torch.tensor(v)).sum() for gi, v in zip(g, vs)), [w1, b1, w2])
    for ours, theirs in zip(hv, t_hv):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-9, atol=1e-12)

    # Independent of torch: central differences of the first-order gradient along v.
    grad = ex["main_adjoint"]
    eps = 1e-5
    plus = [p + eps * v for p, v in zip(params[1:4], vs)]
    minus = [p - eps * v for p, v in zip(params[1:4], vs)]
    g_plus = grad(params[0], *plus, params[4])[1]
    g_minus = grad(params[0], *minus, params[4])[1]
    for ours, gp, gm in zip(hv, g_plus, g_minus):
        np.testing.assert_allclose(ours, (gp - gm) / (2 * eps), rtol=1e-6, atol=1e-9)
