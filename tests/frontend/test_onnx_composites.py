"""ONNX operators made of others: RNN, GRU and LSTM (every attribute against onnxruntime, gradients
against float64 finite differences, layers exported by torch.onnx.export against PyTorch), and the
operators ONNX defines as function bodies (imported as those bodies)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.passes import Gradient

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
CONFIGS = {
    "forward": {},
    "reverse": {"direction": "reverse"},
    "bidirectional": {"direction": "bidirectional", "initial": True},
    "batch_first": {"layout": 1, "initial": True},
    "lengths": {"lens": [3, 1, 4]},
    "lengths_reverse": {"lens": [2, 4, 0], "direction": "reverse"},
    "lengths_bidirectional_batch_first": {"lens": [4, 2, 3], "direction": "bidirectional", "layout": 1, "initial": True},
    "clip": {"clip": 0.7},
    "no_bias": {"bias": False},
}


def _model(op: str, cfg: dict, dtype=np.float32, seed: int = 0):
    """(model bytes, feeds, number of outputs) of one recurrent node with random weights as inputs."""
    onnx = need("onnx")
    helper, TP = onnx.helper, onnx.TensorProto
    rng = np.random.default_rng(seed)
    steps, batch, features, hidden = 4, 3, 5, 6
    dirs = 2 if cfg.get("direction") == "bidirectional" else 1
    layout = cfg.get("layout", 0)
    g = GATES[op]
    x = rng.standard_normal((batch, steps, features) if layout else (steps, batch, features))
    feeds = {"X": x, "W": rng.standard_normal((dirs, g * hidden, features)) * 0.5,
             "R": rng.standard_normal((dirs, g * hidden, hidden)) * 0.5}
    names = ["X", "W", "R"]
    names.append("B" if cfg.get("bias", True) else "")
    if cfg.get("bias", True):
        feeds["B"] = rng.standard_normal((dirs, 2 * g * hidden)) * 0.3
    names.append("L" if "lens" in cfg else "")
    if "lens" in cfg:
        feeds["L"] = np.asarray(cfg["lens"], dtype=np.int32)
    states = 2 if op == "LSTM" else 1
    for k in range(states):
        name = f"H{k}" if cfg.get("initial") else ""
        names.append(name)
        if name:
            shape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
            feeds[name] = rng.standard_normal(shape) * 0.5
    if op == "LSTM" and cfg.get("peepholes"):
        names.append("P")
        feeds["P"] = rng.standard_normal((dirs, 3 * hidden)) * 0.3
    while names and not names[-1]:
        names.pop()
    attrs = {"hidden_size": hidden, "layout": layout}
    for key in ("direction", "clip", "activations", "activation_alpha", "activation_beta", "linear_before_reset", "input_forget"):
        if key in cfg:
            attrs[key] = cfg[key]
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, **attrs)
    elem = TP.DOUBLE if dtype == np.float64 else TP.FLOAT
    inputs = [helper.make_tensor_value_info(n, TP.INT32 if n == "L" else elem, feeds[n].shape) for n in names if n]
    outputs = [helper.make_tensor_value_info(o, elem, None) for o in outs]
    graph = helper.make_graph([node], "rec", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    feeds = {k: (v if k == "L" else v.astype(dtype)) for k, v in feeds.items()}
    return model.SerializeToString(), [n for n in names if n], feeds, len(outs)


def _ours(data, names, feeds):
    from retrograd.frontend.onnx_import import from_onnx

    mod, params = from_onnx(data)
    return mod, retrograd.build(mod)["main"](*[feeds[n] for n in names], *params.values())


CASES = [(op, c) for op in GATES for c in CONFIGS] + [
    ("LSTM", "peepholes"), ("LSTM", "input_forget"), ("LSTM", "activations"), ("GRU", "linear_before_reset"),
    ("GRU", "activations"), ("RNN", "activations"),
]
EXTRA = {
    "peepholes": {"peepholes": True, "initial": True},
    "input_forget": {"input_forget": 1},
    "linear_before_reset": {"linear_before_reset": 1, "direction": "bidirectional"},
}
ACTIVATIONS = {
    "LSTM": {"activations": ["HardSigmoid", "LeakyRelu", "ScaledTanh"], "activation_alpha": [0.3, 0.05, 0.9],
             "activation_beta": [0.4, 1.1]},
    "GRU": {"activations": ["Sigmoid", "Affine"], "activation_alpha": [0.5], "activation_beta": [0.25]},
    "RNN": {"activations": ["Softsign"]},
}


def _config(op, name):
    return ACTIVATIONS[op] if name == "activations" else EXTRA.get(name) or CONFIGS[name]


@pytest.mark.parametrize("op,name", CASES)
def test_recurrent_node_equals_onnxruntime(op, name):
    ort = need("onnxruntime")
    cfg = _config(op, name)
    data, names, feeds, n_out = _model(op, cfg)
    _, ours = _ours(data, names, feeds)
    if cfg.get("layout"):  # onnxruntime has no batch-first kernels: its sequence-first one, transposed
        data, _, _, _ = _model(op, {**cfg, "layout": 0})
        feeds = {k: v.swapaxes(0, 1) if k in ("X", "H0", "H1") else v for k, v in feeds.items()}
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    expected = sess.run(None, feeds)
    if cfg.get("layout"):
        expected = [expected[0].transpose(2, 0, 1, 3)] + [e.swapaxes(0, 1) for e in expected[1:]]
    assert len(ours) == n_out
    for got, want, label in zip(ours, expected, ["Y", "Y_h", "Y_c"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=label)


@pytest.mark.parametrize("op,name", [("LSTM", "lengths_bidirectional_batch_first"), ("GRU", "linear_before_reset"),
                                     ("RNN", "lengths_reverse"), ("LSTM", "peepholes")])
def test_recurrent_node_gradients_equal_finite_differences(op, name):
    data, names, feeds, n_out = _model(op, _config(op, name), dtype=np.float64, seed=1)
    mod, outs = _ours(data, names, feeds)
    rng = np.random.default_rng(2)
    cots = [rng.standard_normal(o.shape) for o in outs]
    floats = [n for n in names if n != "L"]
    adj = Gradient("main", floats, list(range(n_out)), seeds="param")(mod)
    args = [feeds[n] for n in names]
    _, grads = retrograd.build(adj)["main_adjoint"](*args, *cots)
    run = retrograd.build(mod)["main"]

    def loss(values):
        return sum(float(np.sum(o * c)) for o, c in zip(run(*values), cots))

    for name_, grad in zip(floats, grads):
        k = names.index(name_)
        value = args[k]
        probe = rng.standard_normal(value.shape)
        eps = 1e-6
        plus = list(args)
        plus[k] = value + eps * probe
        minus = list(args)
        minus[k] = value - eps * probe
        numeric = (loss(plus) - loss(minus)) / (2 * eps)
        np.testing.assert_allclose(np.sum(grad * probe), numeric, rtol=1e-6, atol=1e-8, err_msg=name_)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_exported_recurrent_layers_equal_pytorch(kind):
    torch = need("torch")
    need("onnx")
    from retrograd.frontend.onnx_import import from_onnx

    torch.manual_seed(0)
    layer = getattr(torch.nn, kind)(4, 5, num_layers=2, batch_first=True, bidirectional=kind != "RNN")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return self.layer(x)[0]

    model = M().eval()
    x = torch.randn(2, 3, 4)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=17, input_names=["x"], do_constant_folding=False)
    mod, params = from_onnx(buf.getvalue())
    out = retrograd.build(mod)["main"](x.numpy(), *params.values())
    leaf = x.clone().requires_grad_()
    want = model(leaf)
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-5, atol=1e-6)
    cot = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    want.backward(torch.from_numpy(cot))
    adj = Gradient("main", [mod["main"].params[0].name_hint], seeds="param")(mod)
    _, (gx,) = retrograd.build(adj)["main_adjoint"](x.numpy(), *params.values(), cot)
    np.testing.assert_allclose(gx, leaf.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_unknown_activation_is_named():
    need("onnx")
    from retrograd.frontend.onnx_import import from_onnx

    data, names, feeds, _ = _model("RNN", {"activations": ["Swish"]})
    with pytest.raises(retrograd.errors.DiagnosticError) as info:
        from_onnx(data)
    assert "activation 'Swish' is not supported" in str(info.value) and "(RNN)" in str(info.value)


# -- operators ONNX defines as functions of others --------------------------------------------------
FUNCTION_CASES = ["test_hannwindow", "test_hammingwindow_symmetric", "test_blackmanwindow", "test_rotary_embedding",
                  "test_rotary_embedding_interleaved", "test_rotary_embedding_with_rotary_dim", "test_swiglu_alpha",
                  "test_center_crop_pad_crop_and_pad"]


def test_operators_defined_as_onnx_functions_import_as_their_body():
    """No converter of their own: the node is replaced by the function body ONNX defines for it."""
    collect = need("onnx.backend.test.case.node").collect_testcases
    import bench_onnx_coverage  # benchmarks/ is on pytest's pythonpath

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect(None) if c.name in FUNCTION_CASES]
    assert len(cases) == len(FUNCTION_CASES)
    failed = {c.name: r for c in cases if (r := bench_onnx_coverage.run_case(c, 30.0))[0] != "pass"}
    assert not failed, failed


def test_function_body_gradients_equal_finite_differences():
    onnx = need("onnx")
    from retrograd.frontend.onnx_import import from_onnx

    helper, TP = onnx.helper, onnx.TensorProto
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], interleaved=1, num_heads=2)
    shapes = {"x": (2, 3, 8), "cos": (4, 2), "sin": (4, 2), "pos": (2, 3)}
    inputs = [helper.make_tensor_value_info(n, TP.INT64 if n == "pos" else TP.DOUBLE, s) for n, s in shapes.items()]
    graph = helper.make_graph([node], "rope", inputs, [helper.make_tensor_value_info("y", TP.DOUBLE, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal(shapes["x"]), rng.standard_normal(shapes["cos"]), rng.standard_normal(shapes["sin"]),
             rng.integers(0, 4, shapes["pos"])]
    mod, params = from_onnx(model)
    reference = need("onnx.reference").ReferenceEvaluator(model)
    (want,) = reference.run(None, dict(zip(shapes, feeds)))
    run = retrograd.build(mod)["main"]
    np.testing.assert_allclose(run(*feeds), want, rtol=1e-12, atol=1e-12)
    cot = rng.standard_normal(want.shape)
    adj = Gradient("main", ["x", "cos", "sin"], seeds="param")(mod)
    _, grads = retrograd.build(adj)["main_adjoint"](*feeds, cot)
    for k, grad in enumerate(grads):
        probe = rng.standard_normal(feeds[k].shape)
        plus, minus = list(feeds), list(feeds)
        plus[k], minus[k] = feeds[k] + 1e-6 * probe, feeds[k] - 1e-6 * probe
        numeric = (np.sum(run(*plus) * cot) - np.sum(run(*minus) * cot)) / 2e-6
        np.testing.assert_allclose(np.sum(grad * probe), numeric, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("size,align", [((2, 1, 3, 4), 0), ((2, 1, 3, 4), 1), ((2, 1, 2, 3, 4), 0)])
def test_affine_grid_is_its_function_body_with_its_ifs_resolved(size, align):
    """AffineGrid's body branches (If) on the rank and on align_corners, both known at import."""
    onnx = need("onnx")
    from retrograd.frontend.onnx_import import from_onnx

    helper, TP = onnx.helper, onnx.TensorProto
    dims = len(size) - 2
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("theta", TP.DOUBLE, (2, dims, dims + 1))],
                              [helper.make_tensor_value_info("grid", TP.DOUBLE, None)],
                              [helper.make_tensor("size", TP.INT64, (len(size),), size)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    rng = np.random.default_rng(0)
    theta = rng.standard_normal((2, dims, dims + 1))
    (want,) = need("onnx.reference").ReferenceEvaluator(model).run(None, {"theta": theta})
    mod, params = from_onnx(model)
    run = retrograd.build(mod)["main"]
    np.testing.assert_allclose(run(theta, *params.values()), want, rtol=1e-6, atol=1e-7)  # the reference rounds to float32
    cot = rng.standard_normal(want.shape)
    adj = Gradient("main", ["theta"], seeds="param")(mod)
    _, (grad,) = retrograd.build(adj)["main_adjoint"](theta, *params.values(), cot)
    probe = rng.standard_normal(theta.shape)
    numeric = (np.sum(run(theta + 1e-6 * probe, *params.values()) * cot)
               - np.sum(run(theta - 1e-6 * probe, *params.values()) * cot)) / 2e-6
    np.testing.assert_allclose(np.sum(grad * probe), numeric, rtol=1e-6)


def _if_model(onnx, cond_from_shape: bool):
    """y = If(cond, then: x * 2 + c, else: x - 1); cond either Shape(x)[0] == 3 (known at import) or a graph input."""
    helper, TP = onnx.helper, onnx.TensorProto
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t0"]), helper.make_node("Add", ["t0", "c"], ["t_out"])], "then", [],
        [helper.make_tensor_value_info("t_out", TP.FLOAT, None)], [helper.make_tensor("two", TP.FLOAT, (), [2.0])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "one"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", TP.FLOAT, None)],
                               [helper.make_tensor("one", TP.FLOAT, (), [1.0])])
    nodes, inputs = [], [helper.make_tensor_value_info("x", TP.FLOAT, (3, 4)), helper.make_tensor_value_info("c", TP.FLOAT, (4,))]
    if cond_from_shape:
        nodes += [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"]),
                  helper.make_node("Equal", ["n", "three"], ["cond"])]
    else:
        inputs.append(helper.make_tensor_value_info("cond", TP.BOOL, ()))
    nodes.append(helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TP.FLOAT, None)],
                              [helper.make_tensor("zero", TP.INT64, (), [0]), helper.make_tensor("three", TP.INT64, (), [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_if_on_a_condition_known_at_import_is_its_branch():
    onnx = need("onnx")
    ort = need("onnxruntime")
    from retrograd.frontend.onnx_import import from_onnx

    model = _if_model(onnx, True)
    mod, params = from_onnx(model)
    rng = np.random.default_rng(0)
    x, c = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x, "c": c})
    np.testing.assert_allclose(retrograd.build(mod)["main"](x, c, *params.values()), want, rtol=1e-6)
    adj = Gradient("main", ["x", "c"], seeds="param")(mod)
    cot = rng.standard_normal((3, 4)).astype(np.float32)
    _, (gx, gc) = retrograd.build(adj)["main_adjoint"](x, c, *params.values(), cot)
    np.testing.assert_allclose(gx, 2 * cot, rtol=1e-6)
    np.testing.assert_allclose(gc, cot.sum(0), rtol=1e-5)


def test_if_on_a_run_time_condition_is_named():
    onnx = need("onnx")
    from retrograd.frontend.onnx_import import from_onnx

    with pytest.raises(retrograd.errors.DiagnosticError) as info:
        from_onnx(_if_model(onnx, False))
    assert "'branch' (If)" in str(info.value) and "computed at run time" in str(info.value)
    mod, params = from_onnx(_if_model(onnx, False), static_inputs={"cond": np.array(False)})
    x = np.ones((3, 4), np.float32)
    np.testing.assert_allclose(retrograd.build(mod)["main"](x, np.zeros(4, np.float32), *params.values()), x - 1)


def test_batch_norm_training_mode_gradients_equal_finite_differences():
    onnx = need("onnx")
    from retrograd.frontend.onnx_import import from_onnx

    helper, TP = onnx.helper, onnx.TensorProto
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], training_mode=1,
                            momentum=0.8, epsilon=1e-3)
    shapes = {"x": (3, 2, 4, 2), "s": (2,), "b": (2,), "m": (2,), "v": (2,)}
    inputs = [helper.make_tensor_value_info(n, TP.DOUBLE, shape) for n, shape in shapes.items()]
    outputs = [helper.make_tensor_value_info(n, TP.DOUBLE, None) for n in ("y", "rm", "rv")]
    model = helper.make_model(helper.make_graph([node], "bn", inputs, outputs), opset_imports=[helper.make_opsetid("", 15)])
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal(shapes["x"]), rng.random(2) + 0.5, rng.standard_normal(2), rng.standard_normal(2), rng.random(2) + 0.5]
    mod, _ = from_onnx(model)
    run = retrograd.build(mod)["main"]
    x = feeds[0]
    eps, m = float(np.float32(1e-3)), float(np.float32(0.8))  # ONNX float attributes are float32
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    want_y = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + eps) * feeds[1][None, :, None, None] + feeds[2][None, :, None, None]
    y, rm, rv = run(*feeds)
    np.testing.assert_allclose(y, want_y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rm, m * feeds[3] + (1 - m) * mean, rtol=1e-12)
    np.testing.assert_allclose(rv, m * feeds[4] + (1 - m) * var, rtol=1e-12)
    cot = rng.standard_normal(shapes["x"])
    adj = Gradient("main", ["x", "s", "b"], 0, seeds="param")(mod)
    _, grads = retrograd.build(adj)["main_adjoint"](*feeds, cot)
    for k, grad in enumerate(grads):
        probe = rng.standard_normal(feeds[k].shape)
        plus, minus = list(feeds), list(feeds)
        plus[k], minus[k] = feeds[k] + 1e-6 * probe, feeds[k] - 1e-6 * probe
        numeric = (np.sum(run(*plus)[0] * cot) - np.sum(run(*minus)[0] * cot)) / 2e-6
        np.testing.assert_allclose(np.sum(grad * probe), numeric, rtol=1e-6, atol=1e-9)
