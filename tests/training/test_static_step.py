"""Checkpointing a train step with a symbolic batch dim: the step specialized to the batch size (bind_dims),
its values equal to the symbolic step's, `fit` leaving out the shorter last batch, and the commands."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.cli import main
from retrograd.errors import DiagnosticError, TrainingError
from retrograd.examples import digits
from retrograd.ir.struct_info import all_dim_names
from retrograd.ir.well_formed import well_formed
from retrograd.training import SGD, CrossEntropyLoss, Trainer, setup_trainer
from retrograd.training.loop import fit, steps_per_epoch
from retrograd.training.specialize import bind_dims

needs_checkpoint = pytest.mark.skipif(not hasattr(retrograd.passes, "Checkpoint"), reason="no checkpoint pass")

MLP = """
@R.function
def main(x: R.Tensor(("n", 6), dtype="float32"), w1: R.Tensor((6, 32), dtype="float32"), w2: R.Tensor((32, 32), dtype="float32"), w3: R.Tensor((32, 32), dtype="float32"), w4: R.Tensor((32, 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
    with R.dataflow():
        h1 = R.tanh(R.matmul(x, w1))
        h2 = R.tanh(R.matmul(h1, w2))
        f = R.reshape(h2, R.shape([n * 2, 16]))
        g = R.reshape(f, R.shape([n, 32]))
        h3 = R.tanh(R.matmul(g, w3))
        y = R.matmul(h3, w4)
        R.output(y)
    return y
"""


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 6)).astype("float32"), rng.integers(0, 4, size=n)


def test_bind_dims_makes_every_type_static_and_keeps_the_values():
    mod = retrograd.parse(digits.MODEL)
    bound = bind_dims(mod["main"], {"n": 5})
    assert not all_dim_names(bound.struct_info)
    for block in bound.body.blocks:
        for b in block.bindings:
            assert not all_dim_names(b.var.struct_info), b.var.name_hint
    static = mod.with_function("main", bound)
    assert well_formed(static) == []
    assert retrograd.structural_equal(retrograd.parse(static.script()), static)
    rng = np.random.default_rng(1)
    args = [rng.normal(size=(5, 1, 8, 8)).astype("float32")] + [
        rng.normal(size=p.struct_info.shape).astype("float32") * 0.3 for p in mod["main"].params[1:]]
    np.testing.assert_array_equal(retrograd.build(static)["main"](*args), retrograd.build(mod)["main"](*args))
    with pytest.raises(Exception, match="4"):  # the bound function takes batches of 5 only
        retrograd.build(static)["main"](args[0][:4], *args[1:])


def test_dim_expressions_are_computed():
    f = bind_dims(retrograd.parse(MLP)["main"], {"n": 3})
    shapes = {b.var.name_hint: b.var.struct_info.shape for blk in f.body.blocks for b in blk.bindings}
    assert shapes["f"] == (6, 16) and shapes["g"] == (3, 32) and f.ret_struct_info.shape == (3, 4)
    assert bind_dims(retrograd.parse(MLP)["main"], {}) is not None


@needs_checkpoint
def test_checkpointed_step_with_a_symbolic_batch():
    mod = retrograd.parse(MLP)
    with pytest.raises(TrainingError, match="batch_size="):
        setup_trainer(mod, CrossEntropyLoss(), SGD(0.1), checkpoint="90%")
    with pytest.raises(DiagnosticError) as info:
        setup_trainer(mod, CrossEntropyLoss(), SGD(0.1), checkpoint=1, batch_size=8)
    least = info.value.least_feasible
    ckpt = setup_trainer(mod, CrossEntropyLoss(), SGD(0.1), checkpoint=least, batch_size=8)
    assert well_formed(ckpt) == []
    assert ckpt["train_step"].params[0].struct_info.shape == (8, 6)
    assert ckpt["backbone"].params[0].struct_info.shape == ("n", 6)  # predict and evaluate take any batch
    plain = Trainer(setup_trainer(mod, CrossEntropyLoss(), SGD(0.1)))
    plain.init_params(seed=3)
    t = Trainer(ckpt)
    t.set_params(plain.params)
    assert t.fixed_batch == 8 and plain.fixed_batch is None
    x, y = _data(8)
    for _ in range(3):
        np.testing.assert_allclose(t.step(x, y), plain.step(x, y), rtol=1e-6)
    for n in t.param_names:
        np.testing.assert_allclose(t.params[n], plain.params[n], rtol=1e-5, atol=1e-6)
    assert t.exe.stats.peak_live_bytes <= least
    assert t.predict(_data(3)[0]).shape == (3, 4)
    # 21 examples in batches of 8: two steps an epoch, the 5 left over are left out
    x, y = _data(21, seed=2)
    assert steps_per_epoch(t, 21, 8) == 2 and steps_per_epoch(plain, 21, 8) == 3
    assert len(fit(t, [x, y], epochs=3, batch_size=8)["loss"]) == 6
    with pytest.raises(TrainingError, match="exactly 8"):
        fit(t, [x, y], epochs=1, batch_size=4)


@needs_checkpoint
def test_cli_trains_digits_and_textbag_with_a_checkpointed_step(capsys):
    assert main(["train", "digits", "--epochs", "1", "--limit", "200", "--checkpoint", "95%", "--batch-size", "16"]) == 0
    out = capsys.readouterr().out
    assert "12 steps" in out  # 200 // 16: the last 8 images are left out
    assert 0.3 < float(out.split("test accuracy ")[1].split()[0]) <= 1.0
    assert main(["train", "textbag", "--epochs", "3"]) == 0
    out = capsys.readouterr().out
    assert 0.5 < float(out.split("test accuracy ")[1].split()[0]) <= 1.0
