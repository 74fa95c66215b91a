"""Real PyTorch models through TVM's frontend into retrograd: forward and every gradient equal PyTorch's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from optional import need  # noqa: E402
torch = need("torch")
tvm_torch = need("tvm.relax.frontend.torch")
tvm_script = need("tvm.script")

import retrograd  # noqa: E402
import retrograd.errors  # noqa: E402
from retrograd.frontend import from_tvm, to_tvm, tvm_params  # noqa: E402
from retrograd.ir.builder import BlockBuilder  # noqa: E402
from retrograd.ir.copy import copy_expr  # noqa: E402
from retrograd.ir.expr import Call, Function, Tuple, TupleGetItem  # noqa: E402
from retrograd.ir.module import IRModule  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from frontend import torch_models  # noqa: E402

CASES = {name: (make, inputs, train) for name, make, inputs, train in torch_models.cases()}
RTOL, ATOL = 1e-5, 1e-5  # float32 forward
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-5  # float32 gradients: sums in another order


def _model(name):
    make, inputs, train = CASES[name]
    torch.manual_seed(1)
    model = make()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):  # non-trivial running statistics
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    model.train(train)
    return model, inputs


_EXPORTED = {}


def _exported(name):
    """(PyTorch model, inputs, TVM module, retrograd module), exported once per model."""
    if name not in _EXPORTED:
        model, inputs = _model(name)
        ep = torch.export.export(model, inputs)
        tvm_mod = tvm_torch.from_exported_program(ep, keep_params_as_input=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing of these models may be dropped
            mod = from_tvm(tvm_mod)
        names = {s.arg.name: s.target for s in ep.graph_signature.input_specs if s.kind.name == "PARAMETER"}
        _EXPORTED[name] = (model, inputs, tvm_mod, mod, names)
    return _EXPORTED[name]


def _arguments(name):
    """The retrograd function's arguments: the inputs, then each weight by its PyTorch name."""
    model, inputs, tvm_mod, mod, names = _exported(name)
    torch_params = dict(model.named_parameters())
    func = mod["main"]
    num_input = func.attrs["num_input"]
    values = [x.detach().numpy() for x in inputs]
    weights = []
    for p in func.params[num_input:]:
        weights.append(torch_params[names[p.name_hint]])
        values.append(weights[-1].detach().numpy().copy())
    return values, weights


@pytest.mark.parametrize("name", list(CASES))
def test_forward_equals_pytorch(name):
    model, inputs, tvm_mod, mod, _ = _exported(name)
    values, _ = _arguments(name)
    # The weights TVM keeps in the function's "params" attribute are the PyTorch ones.
    for (pname, w), v in zip(tvm_params(tvm_mod).items(), values[len(inputs):]):
        np.testing.assert_array_equal(w, v, err_msg=pname)
    with torch.no_grad():
        expected = model(*[x.clone() for x in inputs]).numpy()
    (out,) = retrograd.build(mod)["main"](*values)
    np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("name", list(CASES))
def test_gradients_equal_pytorch(name):
    """vjp with a random cotangent: the gradient of every weight and every float input."""
    model, inputs, _, mod, _ = _exported(name)
    values, weights = _arguments(name)
    func = mod["main"]
    diff = [i for i, v in enumerate(values) if v.dtype.kind == "f"]
    cot = np.random.default_rng(0).standard_normal(func.ret_struct_info.fields[0].shape).astype("float32")

    adj = Gradient("main", [func.params[i].name_hint for i in diff], 0, seeds="param")(mod)
    _, grads = retrograd.build(adj)["main_adjoint"](*values, cot)

    model.zero_grad()
    leaves = [x.clone().requires_grad_(x.dtype.is_floating_point) for x in inputs]
    model(*leaves).backward(torch.from_numpy(cot))
    torch_grads = [leaves[i].grad for i in range(len(inputs))] + [w.grad for w in weights]
    assert len(grads) == len(diff) == len([g for g in torch_grads if g is not None])
    for i, g in zip(diff, grads):
        np.testing.assert_allclose(g, torch_grads[i].numpy(), rtol=GRAD_RTOL, atol=GRAD_ATOL, err_msg=func.params[i].name_hint)


@pytest.mark.parametrize("name", list(CASES))
def test_printed_module_reparses_in_tvm_and_round_trips(name):
    _, _, _, mod, _ = _exported(name)
    text = mod.script()
    theirs = tvm_script.from_source(text)
    assert [str(gv.name_hint) for gv in theirs.functions] == list(mod)
    assert retrograd.structural_equal(retrograd.parse(text), mod)
    assert retrograd.structural_equal(from_tvm(to_tvm(mod)), mod)


def _with_running_stats(mod):
    """main also returning each batch_norm's new moving mean and variance, in program order."""
    func = mod["main"]
    bb = BlockBuilder(mod)
    bb.begin_scope()
    vmap, extra = {}, []
    for block in func.body.blocks:
        for b in block.bindings:
            var = bb.emit(copy_expr(b.value, vmap), b.var.name_hint)
            vmap[b.var] = var
            if isinstance(b.value, Call) and getattr(b.value.op, "name", "") == "relax.nn.batch_norm":
                extra += [TupleGetItem(var, 1), TupleGetItem(var, 2)]
    body = bb.end_scope(Tuple((copy_expr(func.body.body, vmap), *extra)))
    return IRModule({"main": Function(func.params, body, attrs=dict(func.attrs))})


def test_resnet_train_updates_running_statistics_as_pytorch():
    """Training-mode batch_norm: the new moving mean is PyTorch's; the new moving variance is TVM's
    (biased batch variance), i.e. PyTorch's (unbiased) with the n / (n - 1) factor taken out."""
    _, inputs, _, mod, _ = _exported("resnet_train")
    values, _ = _arguments("resnet_train")
    model, _ = _model("resnet_train")  # the exported model was run since: a fresh one, same seed
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    old = [(m.running_mean.clone().numpy(), m.running_var.clone().numpy()) for m in bns]
    with torch.no_grad():
        model(*inputs)
    outs = retrograd.build(_with_running_stats(mod))["main"](*values)
    stats = outs[1:]
    assert len(stats) == 2 * len(bns)
    # The bn order in the program: conv1's, conv2's, the shortcut's.
    for k, m in enumerate(bns):
        n = inputs[0].shape[0] * 16  # batch * 4 * 4 positions per channel
        mom = m.momentum
        np.testing.assert_allclose(stats[2 * k], m.running_mean.numpy(), rtol=1e-5, atol=1e-6)
        unbiased_part = (m.running_var.numpy() - (1 - mom) * old[k][1]) / mom
        expected_var = (1 - mom) * old[k][1] + mom * unbiased_part * (n - 1) / n
        np.testing.assert_allclose(stats[2 * k + 1], expected_var, rtol=1e-5, atol=1e-6)


def test_embedding_bag_model_is_pytorch_embedding_bag():
    model, (tokens,), *_ = _exported("embedding_bag")
    with torch.no_grad():
        bags = torch.nn.functional.embedding(tokens, model.bag.weight).mean(dim=1)
        np.testing.assert_allclose(bags.numpy(), model.bag(tokens).numpy(), rtol=1e-6, atol=1e-7)


def test_interop_doc_example_runs_and_its_gradients_are_pytorch_ones():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "tvm_interop.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    scope: dict = {}
    exec(compile(code, "tvm_interop.md", "exec"), scope)  # the doc's own example, not user input
    model, x, cot = scope["model"], scope["x"].clone().requires_grad_(), scope["cot"]
    model.zero_grad()
    model(x).backward(torch.from_numpy(cot))
    expected = [x.grad] + [p.grad for p in model.parameters()]
    assert len(scope["grads"]) == len(expected)
    for got, want in zip(scope["grads"], expected):
        np.testing.assert_allclose(got, want.numpy(), rtol=GRAD_RTOL, atol=GRAD_ATOL)


DYNAMIC = {
    # name: (model factory, example input shape, dynamic axes)
    "gpt_sdpa": (lambda: torch_models.GPTBlock(), (2, 5, 16), (0, 1)),
    "gpt_masked_fill": (lambda: torch_models.GPTBlock(manual_mask=True), (2, 5, 16), (0, 1)),
    "rmsnorm_swiglu": (torch_models.RMSNormSwiGLU, (2, 3, 16), (0, 1)),
    "conv1d": (torch_models.Conv1dNet, (2, 3, 16), (0,)),
    "resnet_eval": (torch_models.BasicBlock, (2, 4, 8, 8), (0,)),
}


@pytest.mark.parametrize("name", list(DYNAMIC))
def test_dynamic_shapes_run_at_several_sizes(name):
    """Exported with symbolic batch (and sequence) dims: one converted module serves every size, with
    PyTorch's values and gradients (the causal mask's arange over the symbolic length included)."""
    make, shape, axes = DYNAMIC[name]
    torch.manual_seed(2)
    model = make().eval()
    dims = {a: torch.export.Dim(f"d{a}", min=2, max=64) for a in axes}
    ep = torch.export.export(model, (torch.randn(*shape),), dynamic_shapes=(dims,))
    tvm_mod = tvm_torch.from_exported_program(ep, keep_params_as_input=True)
    mod = from_tvm(tvm_mod)
    assert all(isinstance(mod["main"].params[0].struct_info.shape[a], str) for a in axes)
    weights = list(tvm_params(tvm_mod).values())
    names = [p.name_hint for p in mod["main"].params]
    adj = retrograd.build(Gradient("main", names, 0, seeds="param")(mod))["main_adjoint"]
    g = torch.Generator().manual_seed(3)
    for size in (2, 3):
        x = torch.randn(*[size + 1 + a if a in axes else d for a, d in enumerate(shape)], generator=g)
        (out,) = retrograd.build(mod)["main"](x.numpy(), *weights)
        expected = model(x)
        np.testing.assert_allclose(out, expected.detach().numpy(), rtol=RTOL, atol=ATOL)
        cot = torch.randn(expected.shape, generator=g)
        _, grads = adj(x.numpy(), *weights, cot.numpy())
        leaf = x.clone().requires_grad_()
        model.zero_grad()
        model(leaf).backward(cot)
        wants = [leaf.grad] + [p.grad for p in model.parameters()]  # the frontend's parameter order
        assert len(grads) == len(wants)
        for got, want in zip(grads, wants):
            np.testing.assert_allclose(got, want.numpy(), rtol=GRAD_RTOL, atol=GRAD_ATOL)
    tvm_script.from_source(mod.script())
    assert retrograd.structural_equal(from_tvm(to_tvm(mod)), mod)


@pytest.mark.parametrize("name", ["gpt_masked_fill", "resnet_train", "lstm"])
def test_weights_as_constants(name):
    """Exported without keep_params_as_input: the weights are constants of the module (the printer's
    metadata section); the values, TVM's re-parse and both round trips hold."""
    model, inputs = _model(name)
    ep = torch.export.export(model, inputs)
    mod = from_tvm(tvm_torch.from_exported_program(ep))
    assert [p.name_hint for p in mod["main"].params] == [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT"]
    with torch.no_grad():
        expected = model(*inputs).numpy()
    (out,) = retrograd.build(mod)["main"](*[x.numpy() for x in inputs])
    np.testing.assert_allclose(out, expected, rtol=RTOL, atol=ATOL)
    text = mod.script()
    assert 'metadata["relax.expr.Constant"]' in text
    tvm_script.from_source(text)
    assert retrograd.structural_equal(retrograd.parse(text), mod)
    assert retrograd.structural_equal(from_tvm(to_tvm(mod)), mod)


def _adjoint(name):
    _, inputs, tvm_mod, mod, _ = _exported(name)
    values = [x.numpy() for x in inputs] + list(tvm_params(tvm_mod).values())
    names = [p.name_hint for p, v in zip(mod["main"].params, values) if v.dtype.kind == "f"]
    return Gradient("main", names, 0, seeds="param")(mod), values


@pytest.mark.parametrize("name", ["rmsnorm_swiglu", "conv1d"])
def test_tvm_compiles_and_runs_our_gradient_module(name):
    """to_tvm of the Gradient pass's output: TVM builds it and computes retrograd's gradients."""
    tvm = need("tvm")
    relax = need("tvm.relax")

    adj, values = _adjoint(name)
    cot = np.random.default_rng(4).standard_normal(adj["main"].ret_struct_info.fields[0].shape).astype("float32")
    _, ours = retrograd.build(adj)["main_adjoint"](*values, cot)
    vm = relax.VirtualMachine(tvm.compile(to_tvm(adj), target="llvm"), tvm.cpu())
    _, theirs = vm["main_adjoint"](*[tvm.runtime.tensor(v) for v in values], tvm.runtime.tensor(cot))
    assert len(theirs) == len(ours)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b.numpy(), rtol=GRAD_RTOL, atol=GRAD_ATOL)


def test_to_tvm_names_the_backward_ops_tvm_lacks():
    adj, _ = _adjoint("gpt_sdpa")
    with pytest.raises(retrograd.errors.UnsupportedError, match="TVM defines no op relax.grad.layer_norm_backward"):
        to_tvm(adj)


MORE = {name: (make, inputs) for name, make, inputs in torch_models.more_cases()}


@pytest.mark.parametrize("name", list(MORE))
def test_more_layers_forward_and_gradients(name):
    """Library layers beyond the main models (instance norm, transposed and 3-D convolutions,
    nn.MultiheadAttention, a transformer encoder layer, bilinear upsampling, nn.LSTM, GRU, a loss):
    values and every gradient equal PyTorch's, and TVM re-parses the printed module."""
    make, inputs = MORE[name]
    torch.manual_seed(6)
    model = make().eval()
    tvm_mod = tvm_torch.from_exported_program(torch.export.export(model, inputs), keep_params_as_input=True)
    mod = from_tvm(tvm_mod)
    values = [x.numpy() for x in inputs] + list(tvm_params(tvm_mod).values())
    (out,) = retrograd.build(mod)["main"](*values)
    expected = model(*inputs)
    np.testing.assert_allclose(out, expected.detach().numpy(), rtol=RTOL, atol=ATOL)
    names = [p.name_hint for p in mod["main"].params]
    cot = np.random.default_rng(7).standard_normal(np.shape(out)).astype("float32")
    _, grads = retrograd.build(Gradient("main", names, 0, seeds="param")(mod))["main_adjoint"](*values, cot)
    leaves = [x.clone().requires_grad_() for x in inputs]
    model(*leaves).backward(torch.from_numpy(cot))
    wants = [x.grad for x in leaves] + [p.grad for p in model.parameters()]  # the frontend's order
    assert len(grads) == len(wants)
    for n, got, want in zip(names, grads, wants):
        np.testing.assert_allclose(got, want.numpy(), rtol=GRAD_RTOL, atol=GRAD_ATOL, err_msg=n)
    tvm_script.from_source(mod.script())


def test_nearest_upsampling_to_a_size_computes_what_tvm_computes():
    """F.interpolate(size=..., mode="nearest") exports as resize2d with half_pixel coordinates rounded to
    the nearest even index (TVM's frontend; PyTorch floors asymmetric ones): retrograd's values are the
    ones TVM computes for that module, which differ from PyTorch's where the ratio is not an integer."""
    tvm = need("tvm")
    relax = need("tvm.relax")

    class Nearest(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, size=(6, 7), mode="nearest")

    x = torch.arange(2 * 16, dtype=torch.float32).reshape(1, 2, 4, 4)
    tvm_mod = tvm_torch.from_exported_program(torch.export.export(Nearest(), (x,)))
    (ours,) = retrograd.build(from_tvm(tvm_mod))["main"](x.numpy())
    vm = relax.VirtualMachine(tvm.compile(tvm_mod, target="llvm"), tvm.cpu())
    theirs = vm["main"](tvm.runtime.tensor(x.numpy()))[0].numpy()
    np.testing.assert_array_equal(ours, theirs)
    assert not np.array_equal(ours, Nearest()(x).numpy())  # the frontend's rounding, not PyTorch's


def test_one_hot_class_checks_run_and_fail_with_their_message():
    """F.one_hot's range checks (R.assert_op in an impure function): kept through printing, parsing and
    the Gradient pass, and a class value out of range stops the call with the frontend's message."""

    class OneHot(torch.nn.Module):
        def forward(self, x, labels):
            return (torch.nn.functional.one_hot(labels, 4).float() * x).sum(-1)

    x, labels = torch.randn(3, 4), torch.tensor([0, 3, 1])
    mod = from_tvm(tvm_torch.from_exported_program(torch.export.export(OneHot(), (x, labels))))
    assert not mod["main"].is_pure
    assert retrograd.structural_equal(retrograd.parse(mod.script()), mod)
    assert retrograd.structural_equal(from_tvm(to_tvm(mod)), mod)
    (out,) = retrograd.build(mod)["main"](x.numpy(), labels.numpy())
    np.testing.assert_allclose(out, OneHot()(x, labels).numpy(), rtol=RTOL, atol=ATOL)
    adj = retrograd.build(Gradient("main", ["x"], 0, seeds="param")(mod))["main_adjoint"]
    _, (grad,) = adj(x.numpy(), labels.numpy(), np.ones(3, "float32"))
    np.testing.assert_array_equal(grad, torch.nn.functional.one_hot(labels, 4).numpy())
    with pytest.raises(retrograd.errors.ExecutionError, match="R.assert_op failed: one_hot: Class values must be smaller"):
        retrograd.build(mod)["main"](x.numpy(), np.array([0, 4, 1]))
    with pytest.raises(retrograd.errors.ExecutionError, match="Class values must be non-negative"):
        adj(x.numpy(), np.array([0, -1, 1]), np.ones(3, "float32"))


def test_an_empty_slice_imports_though_tvm_gives_it_a_negative_extent():
    """x[:, 3:2] is empty; TVM 0.27 infers the strided_slice as Tensor((3, -1)), retrograd (3, 0)."""

    class EmptySlice(torch.nn.Module):
        def forward(self, x):
            return x[:, 3:2].sum(1) + x[:, :100].sum(1)

    x = torch.randn(3, 5)
    mod = from_tvm(tvm_torch.from_exported_program(torch.export.export(EmptySlice(), (x,))))
    (out,) = retrograd.build(mod)["main"](x.numpy())
    np.testing.assert_allclose(out, EmptySlice()(x).numpy(), rtol=RTOL, atol=ATOL)
    assert retrograd.structural_equal(retrograd.parse(mod.script()), mod)
