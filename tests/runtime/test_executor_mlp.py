"""Executor: an MLP forward pass (matmul, bias, relu, log_softmax, nll_loss) against NumPy, and PyTorch."""

import numpy as np

import retrograd
from optional import need  # noqa: E402

BATCH, SIZES, CLASSES = 16, (20, 32, 24), 10


MLP = f'''
@R.function
def main(x: R.Tensor(({BATCH}, {SIZES[0]}), "float32"), y: R.Tensor(({BATCH},), "int64"),
         w0: R.Tensor(({SIZES[0]}, {SIZES[1]}), "float32"), b0: R.Tensor(({SIZES[1]},), "float32"),
         w1: R.Tensor(({SIZES[1]}, {SIZES[2]}), "float32"), b1: R.Tensor(({SIZES[2]},), "float32"),
         w2: R.Tensor(({SIZES[2]}, {CLASSES}), "float32"), b2: R.Tensor(({CLASSES},), "float32")):
    with R.dataflow():
        z0 = R.add(R.matmul(x, w0), b0)
        h0 = R.nn.relu(z0)
        z1 = R.matmul(h0, w1) + b1
        h1 = R.nn.relu(z1)
        z2 = R.add(R.matmul(h1, w2, out_dtype="void"), b2)
        logp = R.nn.log_softmax(z2)
        loss = R.nn.nll_loss(logp, y)
        out = (loss, logp)
        R.output(out)
    return out
'''


def _mlp_module():
    return retrograd.parse(MLP, "mlp.py")


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    dims = SIZES + (CLASSES,)
    x = rng.standard_normal((BATCH, SIZES[0])).astype("float32")
    y = rng.integers(0, CLASSES, BATCH)
    wb = []
    for i in range(3):
        wb += [
            (rng.standard_normal((dims[i], dims[i + 1])) / np.sqrt(dims[i])).astype("float32"),
            rng.standard_normal(dims[i + 1]).astype("float32") * 0.1,
        ]
    return x, y, wb


def _numpy_mlp(x, y, wb):
    h = x.astype("float64")
    for i in range(3):
        h = h @ wb[2 * i] + wb[2 * i + 1]
        if i < 2:
            h = np.maximum(h, 0)
    shifted = h - h.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y].mean(), logp


def test_mlp_forward_matches_numpy():
    ex = retrograd.build(_mlp_module())
    for seed in (0, 1):
        x, y, wb = _inputs(seed)
        loss, logp = ex["main"](x, y, *wb)
        ref_loss, ref_logp = _numpy_mlp(x, y, wb)
        assert loss.shape == () and loss.dtype == np.float32
        np.testing.assert_allclose(logp, ref_logp, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(loss, ref_loss, rtol=1e-5)


def test_mlp_forward_peak_is_bounded_by_live_activations():
    ex = retrograd.build(_mlp_module())
    x, y, wb = _inputs()
    ex["main"](x, y, *wb)
    params = x.nbytes + y.nbytes + sum(a.nbytes for a in wb)
    assert ex.stats.param_bytes == params
    # At most two activations of the widest layer (input and output of an op) besides the params,
    # plus the small log-probabilities and loss at the end.
    widest = BATCH * max(SIZES) * 4
    assert params < ex.stats.peak_live_bytes <= params + 2 * widest + BATCH * CLASSES * 4 + 4


def test_mlp_forward_matches_torch():
    torch = need("torch")
    ex = retrograd.build(_mlp_module())
    x, y, wb = _inputs(3)
    loss, logp = ex["main"](x, y, *wb)
    h = torch.from_numpy(x)
    for i in range(3):
        h = h @ torch.from_numpy(wb[2 * i]) + torch.from_numpy(wb[2 * i + 1])
        if i < 2:
            h = torch.relu(h)
    tlogp = torch.log_softmax(h, dim=1)
    tloss = torch.nn.functional.nll_loss(tlogp, torch.from_numpy(y))
    np.testing.assert_allclose(logp, tlogp.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, tloss.numpy(), rtol=1e-5)
