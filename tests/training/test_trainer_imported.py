"""The trainer on a model imported from PyTorch with its buffers not carried (`buffers=[]`, every non-data
parameter trained): integer buffers (BatchNorm's num_batches_tracked) are a clear error naming them and
the way out (inputs=); with them passed as data, SGD steps follow PyTorch's. The buffers carried as
state (the default) are tested in test_batch_norm_buffers.py."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.errors import TrainingError
from retrograd.training import Trainer, setup_trainer
from retrograd.training.losses import CrossEntropyLoss
from retrograd.training.optimizers import SGD
from optional import need


def _imported():
    torch = need("torch")
    from retrograd.frontend import from_torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5)).double().train()
    x = torch.randn(4, 3, 8, 8, dtype=torch.float64)
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    mod, params = from_torch(net, (x,))
    net.load_state_dict(saved)
    return torch, net, x, mod, params


def test_integer_buffers_are_a_clear_error():
    _, _, _, mod, _ = _imported()
    with pytest.raises(TrainingError) as info:
        setup_trainer(mod, CrossEntropyLoss(), SGD(0.1), buffers=[])
    msg = str(info.value)
    assert "p_1_num_batches_tracked" in msg and "int64" in msg and "inputs=" in msg


def test_sgd_steps_with_the_buffers_as_data_follow_pytorch():
    torch, net, x, mod, params = _imported()
    labels = torch.tensor([0, 3, 1, 4])
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), SGD(0.1), inputs=["input", "p_1_num_batches_tracked"]))
    by_ir = dict(zip((p.name_hint for p in mod["main"].params[1:]), params.values()))
    trainer.set_params({k: by_ir[k] for k in trainer.param_names})
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(3):
        ours = trainer.step(x.numpy(), params["1.num_batches_tracked"], labels.numpy())
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), labels)
        loss.backward()
        opt.step()
        assert ours == pytest.approx(float(loss), rel=1e-12)
    for name, p in net.named_parameters():
        np.testing.assert_allclose(trainer.params["p_" + name.replace(".", "_")], p.detach().numpy(), rtol=1e-11,
                                   atol=1e-13, err_msg=name)
