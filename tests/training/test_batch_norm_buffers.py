"""Training an imported model with BatchNorm carries PyTorch's running statistics: the same model, initial
weights, batches and optimizer trained in PyTorch (model.train()) and by the Trainer end with the same
parameters, running_mean / running_var / num_batches_tracked, and eval-mode predictions (model.eval()).
A model exported in eval mode keeps its running statistics fixed, and never trains them. Lifted constants
(plain tensor attributes) are buffers never written: fixed, as in PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.errors import TrainingError
from retrograd.training import SGD, AdamW, CrossEntropyLoss, Trainer, setup_trainer
from optional import need

STEPS, BATCH = 4, 6


def _conv(torch, momentum=0.1):
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4, momentum=momentum), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5))


def _mlp(torch, momentum=0.1):
    return torch.nn.Sequential(torch.nn.Linear(7, 8, bias=False), torch.nn.BatchNorm1d(8, momentum=momentum), torch.nn.ReLU(),
                               torch.nn.Linear(8, 6, bias=False), torch.nn.BatchNorm1d(6, momentum=momentum), torch.nn.Tanh(),
                               torch.nn.Linear(6, 5))


def _twice(torch, momentum=0.1):
    """One BatchNorm called twice in a forward: PyTorch updates its statistics (and counter) twice a step."""
    class Twice(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.bn, self.out = torch.nn.Linear(7, 7, bias=False), torch.nn.BatchNorm1d(7, momentum=momentum), torch.nn.Linear(7, 5)

        def forward(self, x):
            return self.out(self.bn(torch.relu(self.bn(self.lin(x)))))
    return Twice()


SHAPES = {_conv: (3, 8, 8), _mlp: (7,), _twice: (7,)}
# No bias before a BatchNorm (as in ResNets): its gradient is zero up to rounding, which Adam would scale up.
# retrograd's optimizer and PyTorch's, alike; both decay weights, so a trained buffer would move.
OPTIMIZERS = {
    "sgd": (lambda: SGD(0.05, momentum=0.9, weight_decay=0.01),
            lambda torch, ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01)),
    "adamw": (lambda: AdamW(0.01, weight_decay=0.1), lambda torch, ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.1)),
    "sgd_decay": (lambda: SGD(0.1, weight_decay=0.1), lambda torch, ps: torch.optim.SGD(ps, lr=0.1, weight_decay=0.1)),
}


def _setup(factory, mode="train", momentum=0.1, optimizer="sgd", seed=0, **options):
    """(torch, net, retrograd's train module, its initial values by IR name, IR name of each state_dict key)."""
    torch = need("torch")
    from retrograd.frontend import from_torch

    torch.manual_seed(seed)
    net = factory(torch, momentum).double()
    with torch.no_grad():  # running statistics away from their start, so that reading them matters
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.num_batches_tracked.fill_(3)
    getattr(net, mode)()
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    mod, params = from_torch(net, (torch.zeros((BATCH, *SHAPES[factory]), dtype=torch.float64),))
    net.load_state_dict(saved)  # export ran a forward in train mode: undo its update
    ir = dict(zip(params, (p.name_hint for p in mod["main"].params[1:])))
    train = setup_trainer(mod, CrossEntropyLoss(), OPTIMIZERS[optimizer][0](), **options)
    return torch, net, train, {ir[k]: np.array(v) for k, v in params.items()}, ir


def _batches(factory, n=STEPS, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((BATCH, *SHAPES[factory])), rng.integers(0, 5, BATCH)) for _ in range(n)]


def _torch_steps(torch, net, optimizer, batches):
    opt = OPTIMIZERS[optimizer][1](torch, net.parameters())
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


def _assert_same_state(trainer, net, ir):
    for key, value in net.state_dict().items():
        name = ir[key]
        ours = trainer.buffers[name] if name in trainer.buffer_names else trainer.params[name]
        ours = np.asarray(trainer._host(ours))
        assert ours.dtype == value.numpy().dtype, key
        if value.dtype.is_floating_point:
            np.testing.assert_allclose(ours, value.numpy(), rtol=1e-11, atol=1e-13, err_msg=key)
        else:
            np.testing.assert_array_equal(ours, value.numpy(), err_msg=key)


@pytest.mark.parametrize("factory, momentum, optimizer, backend", [
    (_conv, 0.1, "sgd", "numpy"),
    (_conv, 0.1, "adamw", "torch"),
    (_mlp, 0.3, "adamw", "numpy"),
    (_mlp, 0.1, "sgd", "torch"),
], ids=["bn2d-sgd", "bn2d-adamw-torch", "bn1d-adamw", "bn1d-sgd-torch"])
def test_training_follows_pytorch_running_statistics_included(factory, momentum, optimizer, backend):
    torch, net, train, values, ir = _setup(factory, momentum=momentum, optimizer=optimizer)
    trainer = Trainer(train, backend=backend)
    assert set(trainer.buffer_names) == {ir[k] for k, _ in net.named_buffers()}
    assert not set(trainer.buffer_names) & set(trainer.param_names)
    assert not any(s.startswith(b) for s in trainer.state_names for b in trainer.buffer_names)  # no optimizer state
    trainer.set_params(values)
    batches = _batches(factory)
    ours = [trainer.step(x, y) for x, y in batches]
    net.train()
    theirs = _torch_steps(torch, net, optimizer, batches)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    _assert_same_state(trainer, net, ir)
    assert int(trainer.buffers[ir["1.num_batches_tracked"]]) == 3 + STEPS
    # Eval mode reads the running statistics: predict and evaluate equal model.eval()'s.
    net.eval()
    x, y = _batches(factory, 1, seed=9)[0]
    with torch.no_grad():
        logits = net(torch.from_numpy(x))
        loss = float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)))
    np.testing.assert_allclose(trainer.predict(x)[0], logits.numpy(), rtol=1e-11, atol=1e-13)
    assert trainer.evaluate(x, y) == pytest.approx(loss, rel=1e-12)


@pytest.mark.parametrize("how", ["exported-in-eval-mode", "train_mode=False"])
def test_eval_mode_training_keeps_the_running_statistics_fixed(how):
    mode, options = ("eval", {}) if how == "exported-in-eval-mode" else ("train", {"train_mode": False})
    torch, net, train, values, ir = _setup(_conv, mode=mode, optimizer="adamw", **options)
    trainer = Trainer(train)
    trainer.set_params(values)
    before = {k: v.copy() for k, v in trainer.buffers.items()}
    batches = _batches(_conv)
    ours = [trainer.step(x, y) for x, y in batches]
    net.eval()  # PyTorch trained in eval mode: BatchNorm normalizes with the running statistics, updates nothing
    theirs = _torch_steps(torch, net, "adamw", batches)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    _assert_same_state(trainer, net, ir)
    for k, v in before.items():
        np.testing.assert_array_equal(trainer.buffers[k], v, err_msg=k)
    x = _batches(_conv, 1, seed=9)[0][0]
    with torch.no_grad():
        np.testing.assert_allclose(trainer.predict(x)[0], net(torch.from_numpy(x)).numpy(), rtol=1e-11, atol=1e-13)


def test_state_round_trips_and_resumes_exactly(tmp_path):
    _, _, train, values, ir = _setup(_mlp, optimizer="adamw")
    batches = _batches(_mlp, 5)
    a = Trainer(train)
    a.set_params(values)
    for x, y in batches[:3]:
        a.step(x, y)
    sd = a.state_dict()
    assert set(sd) == {"params", "optimizer", "buffers"} and set(sd["buffers"]) == set(a.buffer_names)
    a.save_state(tmp_path / "s.npz")
    b = Trainer(train)
    b.load_state(tmp_path / "s.npz")
    for k in a.buffer_names:
        np.testing.assert_array_equal(b.buffers[k], a.buffers[k], err_msg=k)
    for x, y in batches[3:]:
        assert b.step(x, y) == a.step(x, y)
    for group in ("params", "buffers", "optimizer"):
        for k, v in a.state_dict()[group].items():
            np.testing.assert_array_equal(b.state_dict()[group][k], v, err_msg=k)
    # export_params / load_params keep the buffers with the parameters (as PyTorch's state_dict does).
    a.export_params(tmp_path / "p.npz")
    c = Trainer(train)
    c.load_params(tmp_path / "p.npz")
    np.testing.assert_array_equal(c.buffers[ir["1.running_var"]], a.buffers[ir["1.running_var"]])
    x = batches[0][0]
    np.testing.assert_array_equal(c.predict(x)[0], a.predict(x)[0])
    with pytest.raises(TrainingError, match="buffers"):
        c.load_state_dict({"params": sd["params"], "optimizer": sd["optimizer"]})
    with pytest.raises(TrainingError, match="missing buffer 'p_1_running_mean'"):
        c.set_params({**sd["params"], ir["1.running_var"]: sd["buffers"][ir["1.running_var"]]})


def test_buffers_start_as_pytorch_resets_them():
    torch, _, train, values, ir = _setup(_conv)
    trainer = Trainer(train)
    trainer.init_params(seed=0)
    fresh = torch.nn.BatchNorm2d(4).double()
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        value = getattr(fresh, name).numpy()
        np.testing.assert_array_equal(trainer.buffers[ir["1." + name]], value)
        assert trainer.buffers[ir["1." + name]].dtype == value.dtype
    # set_params without buffers keeps the ones there are.
    trainer.step(*_batches(_conv, 1)[0])
    kept = trainer.buffers[ir["1.running_mean"]].copy()
    trainer.set_params({k: values[k] for k in trainer.param_names})
    np.testing.assert_array_equal(trainer.buffers[ir["1.running_mean"]], kept)


def test_a_buffer_with_no_known_start_is_named():
    torch = need("torch")
    from retrograd.frontend import from_torch

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 4)
            self.register_buffer("scale", torch.full((3,), 2.0))

        def forward(self, x):
            return self.lin(x * self.scale)

    net = Scaled().double()
    mod, params = from_torch(net, (torch.zeros(2, 3, dtype=torch.float64),))
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), SGD(0.1)))
    assert trainer.param_names == ["lin_weight", "lin_bias"] and trainer.buffer_names == ["scale"]
    with pytest.raises(TrainingError, match="buffer 'scale' has no known starting value"):
        trainer.init_params()
    trainer.init_params(overrides={"scale": params["scale"]})
    before = trainer.params["lin_weight"].copy()
    trainer.step(np.ones((2, 3)), np.array([0, 1]))
    assert not np.array_equal(trainer.params["lin_weight"], before)
    np.testing.assert_array_equal(trainer.buffers["scale"], [2.0, 2.0, 2.0])


def test_checkpointed_step_carries_the_buffers_too():
    _, _, plain, values, ir = _setup(_conv)
    _, _, planned, _, _ = _setup(_conv, checkpoint=True, batch_size=BATCH)
    a, b = Trainer(plain), Trainer(planned)
    a.set_params(values)
    b.set_params(values)
    for x, y in _batches(_conv, 2):
        assert a.step(x, y) == b.step(x, y)
    for k in a.buffer_names:
        np.testing.assert_array_equal(b.buffers[k], a.buffers[k], err_msg=k)


@pytest.mark.parametrize("options", [{}, {"train_mode": False}], ids=["train", "train_mode=False"])
def test_data_parallel_broadcasts_the_buffers_and_alone_is_the_plain_step(options):
    """data_parallel's step starts from worker 0's buffers (PyTorch DDP's broadcast_buffers; two
    workers: tests/distributed/test_data_parallel.py); in one process it is the plain step, buffers included."""
    from retrograd.distributed import DataParallelTrainer, data_parallel

    _, _, train, values, ir = _setup(_mlp, **options)
    step = data_parallel(train)["train_step"]
    text = step.script()
    names = ["p_1_running_mean", "p_1_running_var", "p_1_num_batches_tracked"]
    for b in names:
        assert f"R.ccl.broadcast_from_worker0({b})" in text, b
    plain, dp = Trainer(train), DataParallelTrainer(train)
    plain.set_params(values)
    dp.set_params(values)
    for x, y in _batches(_mlp):
        assert dp.step(x, y) == plain.step(x, y)
    for k in plain.params:
        np.testing.assert_array_equal(dp.params[k], plain.params[k], err_msg=k)
    for k in names:
        np.testing.assert_array_equal(dp.buffers[k], plain.buffers[k], err_msg=k)
    assert int(dp.buffers["p_1_num_batches_tracked"]) == 3 + (0 if options else STEPS)


def test_onnx_batch_normalization_statistics_are_not_trained():
    """An ONNX model's BatchNormalization statistics are initializers: training keeps them fixed (as
    PyTorch trains its model in eval mode), and trains scale, bias and the rest."""
    torch = need("torch")
    onnx = need("onnx")
    helper, numpy_helper, double = onnx.helper, onnx.numpy_helper, onnx.TensorProto.DOUBLE

    from retrograd.frontend import from_onnx

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 5)).double()
    with torch.no_grad():
        net[0].running_mean.uniform_(-0.5, 0.5)
        net[0].running_var.uniform_(0.5, 2.0)
        net[0].weight.uniform_(0.5, 1.5)
    net.eval()
    weights = {"scale": net[0].weight, "bias": net[0].bias, "mean": net[0].running_mean, "var": net[0].running_var,
               "w": net[2].weight, "b": net[2].bias}
    graph = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y"], epsilon=1e-5),
         helper.make_node("Flatten", ["y"], ["f"]), helper.make_node("Gemm", ["f", "w", "b"], ["out"], transB=1)],
        "bn", [helper.make_tensor_value_info("x", double, [BATCH, 3, 4, 4])],
        [helper.make_tensor_value_info("out", double, [BATCH, 5])],
        [numpy_helper.from_array(v.detach().numpy().copy(), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    mod, params = from_onnx(model)
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), OPTIMIZERS["sgd_decay"][0]()))
    assert trainer.buffer_names == ["mean", "var"] and trainer.param_names == ["scale", "bias", "w", "b"]
    trainer.set_params(params)
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((BATCH, 3, 4, 4)), rng.integers(0, 5, BATCH)) for _ in range(3)]
    ours = [trainer.step(x, y) for x, y in batches]
    np.testing.assert_allclose(ours, _torch_steps(torch, net, "sgd_decay", batches), rtol=1e-12)
    for name, value in weights.items():
        ours = trainer.buffers[name] if name in trainer.buffer_names else trainer.params[name]
        np.testing.assert_allclose(ours, value.detach().numpy(), rtol=1e-11, atol=1e-13, err_msg=name)
    np.testing.assert_array_equal(trainer.buffers["mean"], params["mean"])


def _onnx_bn_model(onnx, values: dict, training: bool):
    """BatchNormalization (momentum 0.8), Flatten, Gemm; in training mode the new running mean and
    variance are graph outputs after the logits."""
    helper, numpy_helper, double = onnx.helper, onnx.numpy_helper, onnx.TensorProto.DOUBLE
    stats = ["running_mean", "running_var"] if training else []
    extra = {"training_mode": 1} if training else {}
    graph = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["y", *stats], momentum=0.8, **extra),
         helper.make_node("Flatten", ["y"], ["f"]), helper.make_node("Gemm", ["f", "w", "b"], ["out"], transB=1)],
        "bn", [helper.make_tensor_value_info("x", double, [BATCH, 3, 4, 4])],
        [helper.make_tensor_value_info("out", double, [BATCH, 5])] + [helper.make_tensor_value_info(s, double, [3]) for s in stats],
        [numpy_helper.from_array(np.asarray(v, np.float64), k) for k, v in values.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    onnx.checker.check_model(model)
    return model


def test_onnx_training_mode_batch_normalization_carries_its_running_statistics():
    """A training-mode BatchNormalization whose running_mean / running_var outputs are the graph's last
    outputs: the trainer carries them as buffers. Each step's new statistics equal onnxruntime's outputs
    for that step's batch and values; parameters and losses equal PyTorch's (BatchNorm2d in train mode
    normalizes alike); eval-mode predictions equal onnxruntime's on the model with training_mode=0."""
    torch = need("torch")
    onnx = need("onnx")
    ort = need("onnxruntime")
    from retrograd.frontend import from_onnx

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.BatchNorm2d(3, momentum=0.2), torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 5)).double()
    with torch.no_grad():
        net[0].weight.uniform_(0.5, 1.5)
    rng = np.random.default_rng(4)
    values = {"scale": net[0].weight, "bias": net[0].bias, "mean": rng.uniform(-0.5, 0.5, 3), "var": rng.uniform(0.5, 2, 3),
              "w": net[2].weight, "b": net[2].bias}
    values = {k: np.array(v.detach().numpy() if hasattr(v, "detach") else v) for k, v in values.items()}
    mod, params = from_onnx(_onnx_bn_model(onnx, values, training=True))
    assert mod["main"].attrs["mutated_buffers"] == ("mean", "var")
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), OPTIMIZERS["sgd_decay"][0]()))
    assert trainer.buffer_names == ["mean", "var"] and trainer.param_names == ["scale", "bias", "w", "b"]
    trainer.set_params(params)
    batches = [(rng.standard_normal((BATCH, 3, 4, 4)), rng.integers(0, 5, BATCH)) for _ in range(3)]
    ours = []
    for x, y in batches:
        now = {**{k: np.array(v) for k, v in trainer.params.items()}, **trainer.buffers}
        session = ort.InferenceSession(_onnx_bn_model(onnx, now, True).SerializeToString(), providers=["CPUExecutionProvider"])
        _, mean, var = session.run(None, {"x": x})
        ours.append(trainer.step(x, y))
        np.testing.assert_allclose(trainer.buffers["mean"], mean, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(trainer.buffers["var"], var, rtol=1e-12)
    assert not np.allclose(trainer.buffers["var"], values["var"])  # they moved
    np.testing.assert_allclose(ours, _torch_steps(torch, net.train(), "sgd_decay", batches), rtol=1e-12)
    for name in trainer.param_names:
        np.testing.assert_allclose(trainer.params[name], {"scale": net[0].weight, "bias": net[0].bias, "w": net[2].weight,
                                   "b": net[2].bias}[name].detach().numpy(), rtol=1e-11, atol=1e-13, err_msg=name)
    final = {**{k: np.array(v) for k, v in trainer.params.items()}, **trainer.buffers}
    session = ort.InferenceSession(_onnx_bn_model(onnx, final, False).SerializeToString(), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((BATCH, 3, 4, 4))
    np.testing.assert_allclose(trainer.predict(x)[0], session.run(None, {"x": x})[0], rtol=1e-11, atol=1e-13)


def test_a_symbolic_batch_trains_on_batches_of_any_size():
    """Exported with a symbolic batch dim, the running variance's n / (n - 1) is counted at run time:
    batches of different sizes (a shorter last one) update the statistics as PyTorch does."""
    torch = need("torch")
    from retrograd.frontend import from_torch

    torch.manual_seed(0)
    net = _mlp(torch).double().train()
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    mod, params = from_torch(net, (torch.zeros(BATCH, 7, dtype=torch.float64),),
                             dynamic_shapes=({0: torch.export.Dim("batch")},))
    net.load_state_dict(saved)
    ir = dict(zip(params, (p.name_hint for p in mod["main"].params[1:])))
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), OPTIMIZERS["sgd"][0]()))
    trainer.set_params({ir[k]: np.array(v) for k, v in params.items()})
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((n, 7)), rng.integers(0, 5, n)) for n in (6, 9, 2)]
    ours = [trainer.step(x, y) for x, y in batches]
    np.testing.assert_allclose(ours, _torch_steps(torch, net, "sgd", batches), rtol=1e-12)
    _assert_same_state(trainer, net, ir)
    net.eval()
    x = rng.standard_normal((1, 7))
    with torch.no_grad():
        np.testing.assert_allclose(trainer.predict(x)[0], net(torch.from_numpy(x)).numpy(), rtol=1e-11, atol=1e-13)


def test_the_made_functions_say_which_parameters_are_buffers_but_return_no_updates():
    _, _, train, _, _ = _setup(_conv)
    for name in ("backbone", "backbone_loss", "backbone_loss_train"):
        attrs = train[name].attrs
        assert attrs["buffers"] == ("p_1_running_mean", "p_1_running_var", "p_1_num_batches_tracked"), name
        assert "mutated_buffers" not in attrs, name
    assert [p.name_hint for p in train["backbone"].params][-3:] == list(train["backbone"].attrs["buffers"])
    assert len(train["backbone"].ret_struct_info.fields) == 1  # the logits, no buffer values


def _scaled(torch):
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 5)
            self.scale = torch.tensor([1.5, -2.0, 0.5, 1.0, 3.0])  # plain tensor attributes: lifted constants
            self.order = torch.tensor([4, 0, 2, 1, 3])

        def forward(self, x):
            return self.lin(x)[:, self.order] * self.scale

    torch.manual_seed(0)
    net = Scaled().double()
    net.scale = net.scale.double()
    return net


def test_lifted_constants_are_buffers_never_trained():
    """A plain tensor attribute (neither parameter nor buffer) is a lifted constant of the export
    (CONSTANT_TENSOR), which PyTorch never trains: nor does the Trainer (weight decay would move it)."""
    torch = need("torch")
    from retrograd.frontend import from_torch

    net = _scaled(torch)
    mod, params = from_torch(net, (torch.zeros((BATCH, 4), dtype=torch.float64),))
    ir = dict(zip(params, (p.name_hint for p in mod["main"].params[1:])))
    assert set(mod["main"].attrs["buffers"]) == {ir["scale"], ir["order"]}
    assert mod["main"].attrs["mutated_buffers"] == ()
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), OPTIMIZERS["sgd"][0]()))
    assert sorted(trainer.param_names) == sorted([ir["lin.weight"], ir["lin.bias"]])
    assert set(trainer.buffer_names) == {ir["scale"], ir["order"]}
    assert not any(ir["scale"] in s for s in trainer.state_names)  # no optimizer state for it
    trainer.set_params({ir[k]: np.array(v) for k, v in params.items()})
    scale, order, w0 = net.scale.numpy().copy(), net.order.numpy().copy(), np.array(params["lin.weight"])
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((BATCH, 4)), rng.integers(0, 5, BATCH)) for _ in range(STEPS)]
    ours = [trainer.step(x, y) for x, y in batches]
    theirs = _torch_steps(torch, net, "sgd", batches)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    for k in ("lin.weight", "lin.bias"):
        np.testing.assert_allclose(trainer.params[ir[k]], net.get_parameter(k).detach().numpy(),
                                   rtol=1e-12, atol=1e-14, err_msg=k)
    assert not np.allclose(trainer.params[ir["lin.weight"]], w0)  # it trained
    for name, start in ((ir["scale"], scale), (ir["order"], order)):
        np.testing.assert_array_equal(trainer.buffers[name], start, err_msg=name)
    np.testing.assert_array_equal(net.scale.numpy(), scale)
    with torch.no_grad():
        want = net(torch.from_numpy(batches[0][0])).numpy()
    np.testing.assert_allclose(trainer.predict(batches[0][0])[0], want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("options, backend", [({}, "numpy"), ({}, "torch"), ({"train_mode": False}, "numpy")],
                         ids=["train", "train-torch", "train_mode=False"])
def test_a_batch_norm_called_twice_updates_twice_and_evaluates_with_its_buffers(options, backend):
    """The second call reads the first's updates (the importer's functional form of PyTorch's in-place
    writes): num_batches_tracked counts both (`add_` on the result of an `add_`), and eval mode normalizes
    both calls with the buffers, as model.eval() does."""
    torch, net, train, values, ir = _setup(_twice, momentum=0.3, optimizer="adamw", **options)
    trainer = Trainer(train, backend=backend)
    trainer.set_params(values)
    batches = _batches(_twice)
    ours = [trainer.step(x, y) for x, y in batches]
    getattr(net, "eval" if options else "train")()
    theirs = _torch_steps(torch, net, "adamw", batches)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    _assert_same_state(trainer, net, ir)
    assert int(trainer._host(trainer.buffers[ir["bn.num_batches_tracked"]])) == 3 + (0 if options else 2 * STEPS)
    net.eval()
    x, y = _batches(_twice, 1, seed=9)[0]
    with torch.no_grad():
        logits = net(torch.from_numpy(x))
    np.testing.assert_allclose(trainer._host(trainer.predict(x)[0]), logits.numpy(), rtol=1e-11, atol=1e-13)
    assert trainer.evaluate(x, y) == pytest.approx(float(torch.nn.functional.cross_entropy(logits, torch.from_numpy(y))), rel=1e-12)


def test_in_place_writes_chained_on_a_buffer_all_count():
    """`self.count.add_(1).add_(2)`: the second add_ writes into the first's result, which is the buffer
    itself; each step adds 3, as in PyTorch."""
    torch = need("torch")
    from retrograd.frontend import from_torch

    class Counted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 4)
            self.register_buffer("count", torch.zeros((), dtype=torch.int64))

        def forward(self, x):
            self.count.add_(1).add_(2)
            return self.lin(x)

    net = Counted().double()
    mod, params = from_torch(net, (torch.zeros(2, 3, dtype=torch.float64),))
    net.count.zero_()
    trainer = Trainer(setup_trainer(mod, CrossEntropyLoss(), SGD(0.1)))
    trainer.set_params({"lin_weight": params["lin.weight"], "lin_bias": params["lin.bias"], "count": np.array(0)})
    for _ in range(2):
        trainer.step(np.ones((2, 3)), np.array([0, 1]))
        net(torch.ones(2, 3, dtype=torch.float64))
    assert int(trainer.buffers["count"]) == int(net.count) == 6
