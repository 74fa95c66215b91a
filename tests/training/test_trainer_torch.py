"""The Trainer on the torch backend: the same steps as on NumPy from the same start (losses and parameters
within float32 rounding), state kept on the device, NumPy out of predict and state_dict."""

from __future__ import annotations

import numpy as np
from optional import need

from retrograd.parser import parse
from retrograd.training import SGD, Adam, NLLLoss, Trainer, setup_trainer

MLP = """
@R.function
def main(x: R.Tensor((8, 6), "float32"), w0: R.Tensor((6, 16), "float32"), b0: R.Tensor((16,), "float32"),
         w1: R.Tensor((16, 3), "float32"), b1: R.Tensor((3,), "float32")) -> R.Tensor((8, 3), "float32"):
    with R.dataflow():
        h = R.nn.relu(R.add(R.matmul(x, w0), b0))
        out = R.nn.log_softmax(R.add(R.matmul(h, w1), b1), axis=-1)
        R.output(out)
    return out
"""


def _train(backend, optimizer):
    mod = setup_trainer(parse(MLP), NLLLoss(), optimizer, batch_size=8)
    t = Trainer(mod, backend=backend, device="cpu" if backend == "torch" else None)
    t.init_params("he_uniform", seed=3)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 6)).astype("float32")
    y = rng.integers(0, 3, 8)
    losses = [t.step(x, y) for _ in range(20)]
    return t, losses, x


def test_torch_trainer_follows_numpy():
    torch = need("torch")
    for opt in (SGD(0.1), Adam(0.01)):
        tn, ln, x = _train("numpy", opt)
        tt, lt, _ = _train("torch", opt)
        np.testing.assert_allclose(lt, ln, rtol=1e-4, atol=1e-6)
        assert lt[-1] < lt[0]
        assert isinstance(next(iter(tt.params.values())), torch.Tensor)
        sd = tt.state_dict()
        for k, v in tn.state_dict()["params"].items():
            assert isinstance(sd["params"][k], np.ndarray)
            np.testing.assert_allclose(sd["params"][k], v, rtol=1e-4, atol=1e-5)
        pred = tt.predict(x)
        assert isinstance(pred, np.ndarray)
        np.testing.assert_allclose(pred, tn.predict(x), rtol=1e-4, atol=1e-5)


def test_training_threads_limit_torch_too():
    """`--threads n` holds PyTorch's intra-op threads to n while training on the torch backend (two
    OpenMP threads spinning on a loaded 2-core machine: `retrograd train digits --backend torch` took 472 s, 20 s
    with one), then restores them."""
    torch = need("torch")
    from retrograd.training.loop import training_threads

    before = torch.get_num_threads()
    with training_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
