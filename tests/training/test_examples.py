"""The digits example and `retrograd train`: the loss falls, per-step losses equal PyTorch's, clear errors."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

import retrograd
from retrograd.cli import main
from retrograd.examples.digits import MODEL, load_digits, stratified_split
from retrograd.training import Adam, NLLLoss, Trainer, setup_trainer
from retrograd.training.loop import batches, fit
from optional import need  # noqa: E402


def test_data_and_split():
    x, y = load_digits()
    assert x.shape == (1797, 1, 8, 8) and x.dtype == np.float32 and 0 <= x.min() and x.max() == 1.0
    assert np.bincount(y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    tr, te = stratified_split(y, 0.2, seed=0)
    assert len(set(tr) | set(te)) == 1797 and not set(tr) & set(te)
    for c in range(10):  # each class split 80/20
        assert abs((y[te] == c).sum() - 0.2 * (y == c).sum()) <= 0.5
    assert not np.array_equal(stratified_split(y, 0.2, seed=1)[1], te)


def test_batches_cover_everything_once():
    rng = np.random.default_rng(0)
    got = np.concatenate(list(batches(10, 3, rng)))
    assert sorted(got) == list(range(10)) and [len(b) for b in batches(10, 3, None)] == [3, 3, 3, 1]


def test_digits_steps_match_torch_and_loss_falls():
    torch = need("torch")
    F = torch.nn.functional
    x, y = load_digits()
    xb, yb = x[:64], y[:64]
    t = Trainer(setup_trainer(retrograd.parse(MODEL), NLLLoss(), Adam(2e-3)))
    t.init_params(seed=0)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in t.params.items()}
    opt = torch.optim.Adam(list(p.values()), lr=2e-3)
    ours, theirs = [], []
    for i in range(8):
        sl = slice(8 * i, 8 * i + 8)
        ours.append(t.step(xb[sl], yb[sl]))
        opt.zero_grad()
        h = F.relu(F.conv2d(torch.tensor(xb[sl]), p["conv1_w"], padding=1) + p["conv1_b"])
        h = F.relu(F.conv2d(h, p["conv2_w"], padding=1) + p["conv2_b"])
        h = F.max_pool2d(h, 2).reshape(8, -1)
        out = F.nll_loss(F.log_softmax(h @ p["fc_w"] + p["fc_b"], dim=1), torch.tensor(yb[sl]))
        out.backward()
        opt.step()
        theirs.append(out.item())
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    history = fit(t, [xb, yb], epochs=15, batch_size=16, seed=0)
    assert np.mean(history["loss"][-4:]) < 0.5 * np.mean(history["loss"][:4])


def test_cli_train_digits_subset(tmp_path, capsys):
    assert main(["train", "digits", "--epochs", "2", "--limit", "200", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    line = [ln for ln in out.splitlines() if ln.startswith("test accuracy ")]
    assert len(line) == 1 and 0.5 < float(line[0].split()[-1]) <= 1.0
    with np.load(tmp_path / "digits_params.npz", allow_pickle=False) as data:
        assert "conv1_w" in data.files
    assert (tmp_path / "digits_curve.png").exists() or "matplotlib is not installed" in out


LINEAR = """
@R.function
def main(x: R.Tensor(("n", 3), dtype="float64"), w: R.Tensor((3,), dtype="float64"), y: R.Tensor(("n",), dtype="float64")) -> R.Tensor((), dtype="float64"):
    r = R.subtract(R.matmul(x, w), y)
    return R.mean(R.multiply(r, r))
"""


def test_cli_train_file(tmp_path, capsys):
    script = tmp_path / "lin.py"
    script.write_text(LINEAR)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3))
    np.savez(tmp_path / "d.npz", x=x, y=x @ np.array([1.0, -1.0, 2.0]))
    args = ["train", str(script), "--data", str(tmp_path / "d.npz"), "--epochs", "100", "--lr", "0.05",
            "--optimizer", "momentum", "--init", "zeros", "--out", str(tmp_path)]
    assert main(args) == 0
    out = capsys.readouterr().out
    first, last = (float(v) for v in re.search(r"first loss (\S+), last loss (\S+)", out).groups())
    assert last < 1e-3 * first
    with np.load(tmp_path / "params.npz", allow_pickle=False) as data:
        np.testing.assert_allclose(data["w"], [1.0, -1.0, 2.0], atol=1e-3)


def test_cli_train_errors(tmp_path, capsys):
    assert main(["train", "nonesuch"]) == 1
    assert "neither an example" in capsys.readouterr().err
    script = tmp_path / "lin.py"
    script.write_text(LINEAR)
    assert main(["train", str(script)]) == 1
    assert "--data" in capsys.readouterr().err
    np.savez(tmp_path / "d.npz", q=np.zeros(3))
    assert main(["train", str(script), "--data", str(tmp_path / "d.npz")]) == 1
    assert "input 'q' is not a parameter" in capsys.readouterr().err


def test_progress_lines_without_a_terminal():
    from retrograd.training.progress import Progress

    buf = io.StringIO()
    p = Progress(10, desc="t", stream=buf, every=5)
    for i in range(10):
        p.update(loss=1.0 / (i + 1), acc=None)
    p.close()
    assert buf.getvalue().splitlines() == ["t step 5/10 loss 0.2000", "t step 10/10 loss 0.1000"]


def test_fit_shows_the_batch_accuracy_before_each_printed_step():
    from retrograd.training.progress import Progress

    x, y = load_digits()
    x, y = x[:96], y[:96]
    t = Trainer(setup_trainer(retrograd.parse(MODEL), NLLLoss(), Adam(1e-3)))
    t.init_params("he_uniform", seed=0)
    expected, step = [], t.step

    def recording_step(*batch):  # the accuracy the line must show: this batch, before the update
        logits = t.exe["backbone"](batch[0], *(t.params[n] for n in t.param_names))
        expected.append(float((np.asarray(logits).argmax(1) == batch[1]).mean()))
        return step(*batch)

    t.step = recording_step
    buf = io.StringIO()
    fit(t, [x, y], epochs=1, batch_size=32, progress=Progress(3, desc="d", stream=buf, every=2), batch_accuracy=True)
    lines = buf.getvalue().splitlines()
    assert [ln.split()[2] for ln in lines] == ["2/3", "3/3"]
    shown = [float(re.search(r"acc (\S+)", ln).group(1)) for ln in lines]
    assert shown == pytest.approx([expected[1], expected[2]], abs=5e-5)
