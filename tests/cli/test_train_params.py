"""`retrograd train FILE --params P.npz --loss L`: a module imported with `retrograd import` (or any script with
its parameters saved by save_params) trains from the archive's parameters, and writes them back under the
archive's names. One SGD step over the whole batch is checked against a NumPy computation written here and
against PyTorch's own step."""

from __future__ import annotations

import re

import numpy as np
import pytest

import retrograd
from retrograd.cli import main
from optional import need

MLP = '''
@R.function
def main(x: R.Tensor((8, 4), dtype="float32"), fc1_weight: R.Tensor((16, 4), dtype="float32"),
         fc1_bias: R.Tensor((16,), dtype="float32"), fc2_weight: R.Tensor((3, 16), dtype="float32"),
         fc2_bias: R.Tensor((3,), dtype="float32")):
    with R.dataflow():
        h = R.tanh(R.add(R.matmul(x, R.permute_dims(fc1_weight)), fc1_bias))
        y = R.add(R.matmul(h, R.permute_dims(fc2_weight)), fc2_bias)
        R.output(y)
    return y
'''


def _data(rng):
    return rng.standard_normal((8, 4)).astype("float32"), rng.integers(0, 3, 8).astype("int64")


def _first_loss(text: str) -> float:
    return float(re.search(r"first loss ([-+0-9.e]+)", text).group(1))


def _numpy_step(p, x, t, lr):
    """Cross-entropy (mean) and one SGD step of the MLP, by hand in float64."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    h = np.tanh(x @ p["fc1.weight"].T + p["fc1.bias"])
    z = h @ p["fc2.weight"].T + p["fc2.bias"]
    z = z - z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    n = len(t)
    loss = -logp[np.arange(n), t].mean()
    dz = np.exp(logp)
    dz[np.arange(n), t] -= 1
    dz /= n
    dh = dz @ p["fc2.weight"] * (1 - h * h)
    grads = {"fc2.weight": dz.T @ h, "fc2.bias": dz.sum(0), "fc1.weight": dh.T @ x, "fc1.bias": dh.sum(0)}
    return loss, {k: p[k] - lr * grads[k] for k in p}


def test_train_script_from_saved_params_matches_a_numpy_step(tmp_path, capsys):
    rng = np.random.default_rng(0)
    script = tmp_path / "mlp.py"
    script.write_text(MLP)
    params = {"fc1.weight": rng.standard_normal((16, 4)).astype("float32") * 0.5, "fc1.bias": rng.standard_normal(16).astype("float32"),
              "fc2.weight": rng.standard_normal((3, 16)).astype("float32") * 0.5, "fc2.bias": rng.standard_normal(3).astype("float32")}
    archive = retrograd.save_params(tmp_path / "params", params)
    x, t = _data(rng)
    np.savez(tmp_path / "data.npz", x=x, targets=t)
    out = tmp_path / "out"
    rc = main(["train", str(script), "--data", str(tmp_path / "data.npz"), "--params", archive, "--loss", "cross_entropy",
               "--optimizer", "sgd", "--lr", "0.5", "--epochs", "1", "--batch-size", "8", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    loss, want = _numpy_step(params, x.astype(np.float64), t, 0.5)
    assert _first_loss(text) == pytest.approx(loss, rel=1e-5)  # the archive's parameters, not --init's
    got = retrograd.load_params(out / "params.npz")
    assert list(got) == list(params)  # written back under the archive's names
    for k in params:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_params_archive_must_name_every_trained_parameter(tmp_path, capsys):
    script = tmp_path / "mlp.py"
    script.write_text(MLP)
    rng = np.random.default_rng(1)
    x, t = _data(rng)
    np.savez(tmp_path / "data.npz", x=x, targets=t)
    archive = retrograd.save_params(tmp_path / "p", {"fc1.weight": np.zeros((16, 4), "float32")})
    assert main(["train", str(script), "--data", str(tmp_path / "data.npz"), "--params", archive, "--loss", "mse"]) != 0
    assert "p.npz has no 'fc1_bias' (trained parameters: fc1_weight, fc1_bias" in capsys.readouterr().err
    np.savez(tmp_path / "nodata.npz", x=x)
    assert main(["train", str(script), "--data", str(tmp_path / "nodata.npz"), "--loss", "mse"]) != 0
    assert "needs the targets in" in capsys.readouterr().err


def test_import_torch_then_train_with_its_params_matches_torch_sgd(tmp_path, capsys):
    torch = need("torch")
    from frontend import torch_factories

    script, archive = tmp_path / "m.py", tmp_path / "p.npz"
    assert main(["import", "--torch", "tests.frontend.torch_factories:mlp", "--args", "8,4", "-o", str(script),
                 "--params", str(archive)]) == 0
    rng = np.random.default_rng(2)
    x, t = _data(rng)
    data_name = retrograd.parse_file(script)["main"].params[0].name_hint
    np.savez(tmp_path / "data.npz", **{data_name: x, "targets": t})
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["train", str(script), "--data", str(tmp_path / "data.npz"), "--params", str(archive), "--loss",
                 "cross_entropy", "--optimizer", "sgd", "--lr", "0.5", "--epochs", "1", "--batch-size", "8",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    model = torch_factories.mlp()
    loss = torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(t))
    loss.backward()
    assert _first_loss(text) == pytest.approx(float(loss.detach()), rel=1e-5)
    got = retrograd.load_params(out / "params.npz")
    for k, p in model.named_parameters():
        np.testing.assert_allclose(got[k], (p - 0.5 * p.grad).detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_import_in_train_mode_then_train_carries_batch_norm_statistics(tmp_path, capsys):
    """A BatchNorm model imported with --train trains with its running statistics updated each step as
    PyTorch's, and `--out` writes them back with the parameters (one batch per epoch: the shuffled
    order does not change a batch's statistics)."""
    torch = need("torch")
    from frontend import torch_factories

    script, archive = tmp_path / "m.py", tmp_path / "p.npz"
    assert main(["import", "--torch", "tests.frontend.torch_factories:small_cnn", "--args", "8,3,6,6", "--train",
                 "-o", str(script), "--params", str(archive)]) == 0
    rng = np.random.default_rng(3)
    x, t = rng.standard_normal((8, 3, 6, 6)).astype("float32"), rng.integers(0, 5, 8)
    data_name = retrograd.parse_file(script)["main"].params[0].name_hint
    np.savez(tmp_path / "data.npz", **{data_name: x, "targets": t})
    out = tmp_path / "out"
    assert main(["train", str(script), "--data", str(tmp_path / "data.npz"), "--params", str(archive), "--loss",
                 "cross_entropy", "--optimizer", "sgd", "--lr", "0.5", "--epochs", "3", "--batch-size", "8",
                 "--out", str(out)]) == 0
    model = torch_factories.small_cnn().train()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(torch.from_numpy(x)), torch.from_numpy(t)).backward()
        opt.step()
    got = retrograd.load_params(out / "params.npz")
    assert set(got) == set(model.state_dict())
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(got[k], v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(got["1.num_batches_tracked"]) == 3
