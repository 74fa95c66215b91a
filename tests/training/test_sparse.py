"""Sparse embedding gradients in training: plain SGD updates only the rows a batch reads, like dense SGD."""

from __future__ import annotations

import io

import numpy as np
import pytest

from retrograd.ir.well_formed import well_formed
from retrograd.examples import textbag
from retrograd.parser import parse
from retrograd.training import SGD, Adam, CrossEntropyLoss, Trainer, setup_trainer


def _pair(opt, seed=0):
    mods = [setup_trainer(parse(textbag.MODEL), CrossEntropyLoss(), opt, sparse=s) for s in (["table"], None)]
    a, b = Trainer(mods[0]), Trainer(mods[1])
    a.init_params("xavier_uniform", seed=seed, overrides={"table": "he_normal"})
    b.set_params(a.params)
    return a, b


@pytest.mark.parametrize("opt", [SGD(0.5), Adam(0.05), SGD(0.5, momentum=0.9)], ids=["sgd", "adam", "momentum"])
def test_sparse_training_equals_dense(opt):
    a, b = _pair(opt)
    assert well_formed(a.mod) == []
    x, y = textbag.make_data(64, 0)
    for i in range(10):
        sl = slice(16 * (i % 4), 16 * (i % 4) + 16)
        np.testing.assert_allclose(a.step(x[sl], y[sl]), b.step(x[sl], y[sl]), rtol=1e-6)
    for n in a.param_names:
        np.testing.assert_allclose(a.params[n], b.params[n], rtol=1e-5, atol=1e-6)


def test_sgd_touches_only_the_rows_read():
    a, _ = _pair(SGD(0.5))
    x, y = textbag.make_data(16, 3)
    before = a.params["table"].copy()
    a.step(x, y)
    read = np.zeros(textbag.VOCAB, bool)
    read[np.unique(x)] = True
    after = a.params["table"]
    np.testing.assert_array_equal(after[~read], before[~read])
    assert (after[read] != before[read]).any(axis=1).all()
    # No table-sized value is made on the way: the only one is the updated table itself.
    table_shape = (textbag.VOCAB, textbag.DIM)
    step = a.mod["train_step"]
    sized = [b.var.name_hint for blk in step.body.blocks for b in blk.bindings
             if getattr(b.var.struct_info, "shape", None) == table_shape]
    assert sized == ["table_new"], sized


def test_textbag_example_learns():
    out = io.StringIO()
    acc = textbag.main(["--epochs", "3"], stream=out)
    assert acc > 0.9 and "test accuracy" in out.getvalue()


def test_standalone_optimizer_takes_the_sparse_gradient():
    a, _ = _pair(SGD(0.5))
    x, y = textbag.make_data(16, 4)
    params = [a.params[n] for n in a.param_names]
    _, grads = a.exe["backbone_loss_adjoint"](x, *params, y)
    new_params, _ = a.exe["optimizer"](tuple(params), tuple(grads), tuple(a.state[n] for n in a.state_names))
    a.step(x, y)
    for n, p in zip(a.param_names, new_params):
        np.testing.assert_array_equal(a.params[n], p)
