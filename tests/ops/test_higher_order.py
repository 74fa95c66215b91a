"""Higher-order gradients: second order against PyTorch's double backward, third order against finite
differences, and the composed forms that the fused backward ops' gradients differentiate against the
fused kernels themselves."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from ops.all_cases import ALL_CASES
from ops.helpers import dot_of_adjoint, random_value
from retrograd.ir import BlockBuilder, Function, IRModule
from retrograd.ir.expr import Var
from retrograd.ir.struct_info import TupleStructInfo
from retrograd.ops.composed import ComposedVjp
from retrograd.passes.gradient import Gradient
from retrograd.runtime import build
from retrograd.testing import check_gradients
from optional import need  # noqa: E402


def _script(params: dict, body: str) -> IRModule:
    """main(params...) -> sum(<body's y> * c) in float64: `body` assigns y from the params."""
    sig = ", ".join(f"{n}: R.Tensor({tuple(s)}, 'float64')" for n, s in params.items())
    lines = "\n".join(f"        {line}" for line in body.strip().splitlines())
    return retrograd.parse(f"""
@R.function
def main({sig}):
    with R.dataflow():
{lines}
        s = R.sum(R.multiply(y, c))
        R.output(s)
    return s
""")


# -- second order against PyTorch's double backward -----------------------------------------------------

# (id, params with shapes (the last, c, weights the result), the script body, torch's y, params differentiated)
TORCH_CASES = [
    ("layer_norm", dict(x=(2, 3, 5), g=(5,), b=(5,), c=(2, 3, 5)), "y = R.nn.layer_norm(x, g, b, axes=[-1])",
     lambda F, x, g, b: F.layer_norm(x, (5,), g, b, eps=1e-5)),
    ("rms_norm", dict(x=(4, 6), w=(6,), c=(4, 6)), "y = R.nn.rms_norm(x, w, axes=[-1])",
     lambda F, x, w: F.rms_norm(x, (6,), w, eps=1e-5)),
    ("group_norm", dict(x=(2, 4, 3, 2), g=(4,), b=(4,), c=(2, 4, 3, 2)),
     "y = R.nn.group_norm(x, g, b, num_groups=2, channel_axis=1, axes=[2, 3])",
     lambda F, x, g, b: F.group_norm(x, 2, g, b, eps=1e-5)),
    ("instance_norm", dict(x=(2, 3, 5), g=(3,), b=(3,), c=(2, 3, 5)),
     "y = R.nn.instance_norm(x, g, b, channel_axis=1, axes=[2])",
     lambda F, x, g, b: F.instance_norm(x, weight=g, bias=b, eps=1e-5)),
    ("batch_norm", dict(x=(4, 3, 2), g=(3,), b=(3,), m=(3,), v=(3,), c=(4, 3, 2)),
     "t = R.nn.batch_norm(x, g, b, m, v, axis=1)\ny = t[0]",
     lambda F, x, g, b, m, v: F.batch_norm(x, m.detach().clone(), v.detach().clone(), g, b, training=True, eps=1e-5)),
    ("attention_causal_gqa", dict(q=(1, 3, 4, 2), k=(1, 4, 2, 2), v=(1, 4, 2, 3), c=(1, 3, 4, 3)),
     "y = R.nn.attention(q, k, v, causal_mask='TopLeft')", None),
    ("attention_bias", dict(q=(2, 3, 2, 4), k=(2, 5, 2, 4), v=(2, 5, 2, 3), bias=(2, 1, 3, 5), c=(2, 3, 2, 3)),
     "y = R.nn.attention_bias(q, k, v, bias, scale=0.4)", None),
    ("conv2d_gelu", dict(x=(2, 3, 6, 6), w=(4, 3, 3, 3), c=(2, 4, 3, 3)),
     "y = R.nn.gelu(R.nn.conv2d(x, w, strides=2, padding=1))",
     lambda F, x, w: F.gelu(F.conv2d(x, w, stride=2, padding=1))),
    ("conv1d_tanh", dict(x=(2, 3, 7), w=(4, 3, 3), c=(2, 4, 5)), "y = R.tanh(R.nn.conv1d(x, w))",
     lambda F, x, w: F.conv1d(x, w).tanh()),
    ("conv3d_transpose_sigmoid", dict(x=(1, 2, 3, 3, 2), w=(2, 3, 2, 2, 2), c=(1, 3, 6, 6, 4)),
     "y = R.sigmoid(R.nn.conv3d_transpose(x, w, strides=2))",
     lambda F, x, w: F.conv_transpose3d(x, w, stride=2).sigmoid()),
    ("max_pool2d_square", dict(x=(1, 2, 6, 6), c=(1, 2, 3, 3)),
     "y = R.nn.max_pool2d(R.multiply(x, x), pool_size=3, strides=2, padding=1)",
     lambda F, x: F.max_pool2d(x * x, 3, 2, 1)),
    ("max_pool3d_square", dict(x=(1, 2, 4, 5, 4), c=(1, 2, 2, 3, 2)),
     "y = R.nn.max_pool3d(R.multiply(x, x), pool_size=2, strides=2, padding=[0, 1, 0, 0, 1, 0], ceil_mode=True)",
     lambda F, x: F.max_pool3d(x * x, 2, 2, padding=(0, 1, 0), ceil_mode=True)),
    ("avg_pool3d_exp", dict(x=(1, 2, 4, 4, 4), c=(1, 2, 2, 2, 2)),
     "y = R.nn.avg_pool3d(R.exp(x), pool_size=2, strides=2)", lambda F, x: F.avg_pool3d(x.exp(), 2, 2)),
    ("grid_sample_bilinear", dict(x=(1, 2, 4, 5), grid=(1, 2, 3, 4), c=(1, 2, 3, 4)),
     "y = R.image.grid_sample(x, grid)",
     lambda F, x, grid: F.grid_sample(x, grid.permute(0, 2, 3, 1), align_corners=False)),
    ("grid_sample_border", dict(x=(1, 2, 4, 5), grid=(1, 2, 3, 4), c=(1, 2, 3, 4)),
     "y = R.image.grid_sample(x, grid, padding_mode='border', align_corners=True)",
     lambda F, x, grid: F.grid_sample(x, grid.permute(0, 2, 3, 1), padding_mode="border", align_corners=True)),
]


def _torch_attention(torch, F, q, k, v, bias=None, scale=None, causal=False):
    qt, kt, vt = (a.transpose(1, 2) for a in (q, k, v))
    groups = qt.shape[1] // kt.shape[1]
    kt, vt = kt.repeat_interleave(groups, 1), vt.repeat_interleave(groups, 1)
    scores = qt @ kt.transpose(-1, -2) * (scale if scale is not None else qt.shape[-1] ** -0.5)
    if bias is not None:
        scores = scores + bias
    if causal:
        keep = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return (scores.softmax(-1) @ vt).transpose(1, 2)


@pytest.mark.parametrize("name,params,body,torch_fn", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_second_order_matches_torch_double_backward(name, params, body, torch_fn):
    torch = need("torch")
    F = torch.nn.functional
    if torch_fn is None:  # attention, written out (TVM's causal mask is PyTorch's top-left one here)
        causal, scale = "TopLeft" in body, 0.4 if "scale" in body else None
        torch_fn = lambda F, *a: _torch_attention(torch, F, *a, scale=scale, causal=causal)  # noqa: E731
    names = list(params)
    wrt = [i for i, n in enumerate(names) if n not in ("c", "m", "v") or (n == "v" and name.startswith("attention"))]
    mod = dot_of_adjoint(_script(params, body), "main", wrt)
    mod = Gradient("main_dot", wrt)(mod)
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in params.values()]
    if name == "batch_norm":
        arrays[names.index("v")] = rng.uniform(0.5, 1.5, params["v"])
    ws = [rng.standard_normal(params[names[i]]) for i in wrt]
    ex = build(mod)
    _, grads = ex["main_adjoint"](*arrays)
    _, hv = ex["main_dot_adjoint"](*arrays, *ws)

    ts = [torch.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    loss = (torch_fn(F, *ts[:-1]) * ts[-1]).sum()
    t_grads = torch.autograd.grad(loss, [ts[i] for i in wrt], create_graph=True)
    s = sum((g * torch.tensor(w)).sum() for g, w in zip(t_grads, ws))
    # allow_unused: a shift such as beta has a constant gradient, so no second derivative at all.
    t_hv = torch.autograd.grad(s, [ts[i] for i in wrt], allow_unused=True)
    t_hv = [torch.zeros_like(ts[i]) if h is None else h for i, h in zip(wrt, t_hv)]
    for ours, theirs in zip(list(grads) + list(hv), list(t_grads) + list(t_hv)):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-8, atol=1e-10)


# -- third order against finite differences ---------------------------------------------------------------

THIRD_CASES = [
    ("tanh", dict(x=(3, 4), c=(3, 4)), "y = R.tanh(x)"),
    ("sigmoid", dict(x=(5,), c=(5,)), "y = R.sigmoid(x)"),
    ("layer_norm", dict(x=(2, 5), g=(5,), b=(5,), c=(2, 5)), "y = R.nn.layer_norm(x, g, b, axes=[-1])"),
    ("matmul_chain", dict(a=(2, 3), b=(3, 4), d=(4, 2), c=(2, 2)), "y = R.matmul(R.tanh(R.matmul(a, b)), d)"),
]


@pytest.mark.parametrize("name,params,body", THIRD_CASES, ids=[c[0] for c in THIRD_CASES])
def test_third_order_matches_finite_differences(name, params, body):
    wrt = list(range(len(params) - 1))
    mod = dot_of_adjoint(_script(params, body), "main", wrt)
    mod = dot_of_adjoint(mod, "main_dot", wrt)  # main_dot_dot: <d/dp <grad, w>, w2>
    rng = np.random.default_rng(1)
    func = mod["main_dot_dot"]
    inputs = [random_value(p.struct_info, rng) for p in func.params]
    report = check_gradients(mod, "main_dot_dot", inputs, require_grads=wrt, rtol=1e-5, atol=1e-7)
    assert report.ok, str(report)


# -- composed forms against the fused kernels ------------------------------------------------------------


def _composed_cases():
    out = []
    for c in ALL_CASES:
        if c.is_static and c.op.startswith("relax.grad.") and c.opdef.grad is not None:
            bb = BlockBuilder()
            bb.begin_scope()
            call = bb.normalize(c.call(c.params()))
            if isinstance(c.opdef.grad(call, Var("o", call.struct_info), Var("g", call.struct_info)), ComposedVjp):
                out.append(c)
    return out


COMPOSED = _composed_cases()


def test_every_fused_backward_op_with_a_composed_form_is_checked():
    ops = {c.op for c in COMPOSED}
    for name in ("layer_norm", "rms_norm", "group_norm", "batch_norm", "attention", "grid_sample"):
        assert f"relax.grad.{name}_backward" in ops


@pytest.mark.parametrize("case", COMPOSED, ids=lambda c: c.id)
def test_the_vjp_of_the_composed_form_is_the_fused_kernel(case):
    case = case.as_dtype("float64")
    params = case.params()
    bb = BlockBuilder()
    bb.begin_scope()
    with bb.dataflow():
        call = bb.normalize(case.call(params))
        vjp = case.opdef.grad(call, Var("o", call.struct_info), Var("g", call.struct_info))
        primals = [bb.emit(p, "primal") for p in vjp.primals]
        out = bb.emit_output(vjp.forward(*primals), "out")
    body = bb.end_scope(out)
    mod = IRModule({"main": Function(params, body, body.struct_info, attrs={"global_symbol": "main"})})
    mod = Gradient("main", primals, None, seeds="param")(mod)
    arrays = case.make_inputs(seed=2)
    env = dict(zip(params, arrays))
    cot = vjp.cotangent
    cot_value = tuple(env[f] for f in cot.fields) if isinstance(out.struct_info, TupleStructInfo) else env[cot]
    _, grads = build(mod)["main_adjoint"](*arrays, cot_value)
    fused = case.run_kernel(arrays)
    fused = [fused] if vjp.single else list(fused)
    assert len(fused) == len(grads)
    for got, want in zip(grads, fused):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11)


# -- in context: checkpoint segments, and the adjoint differentiated directly --------------------------

CHECKPOINTED = """
@R.function
def main(x: R.Tensor((2, 3, 4), "float64"), g: R.Tensor((4,), "float64"), b: R.Tensor((4,), "float64"),
         q: R.Tensor((2, 3, 1, 4), "float64")):
    with R.dataflow():
        x1 = R.grad.start_checkpoint(x)
        y = R.nn.layer_norm(x1, g, b, axes=[-1])
        z = R.tanh(y)
        z1 = R.grad.end_checkpoint(z)
        k = R.reshape(z1, R.shape([2, 3, 1, 4]))
        a = R.nn.attention(q, k, k, causal_mask="TopLeft")
        s = R.sum(R.multiply(a, a))
        R.output(s)
    return s
"""


def test_second_order_through_a_checkpointed_norm_and_attention():
    mod = dot_of_adjoint(retrograd.parse(CHECKPOINTED), "main", [0, 1, 2, 3])
    rng = np.random.default_rng(0)
    inputs = [random_value(p.struct_info, rng) for p in mod["main_dot"].params]
    report = check_gradients(mod, "main_dot", inputs, require_grads=[0, 1, 2, 3], rtol=1e-5, atol=1e-7)
    assert report.ok, str(report)


def test_differentiating_the_adjoint_directly_equals_differentiating_a_call_to_it():
    # Gradient of main_adjoint's gradient tuple (a vjp with cotangent w) is main_dot's gradient.
    mod = dot_of_adjoint(retrograd.parse(CHECKPOINTED), "main", [0, 1, 2, 3])
    direct = Gradient("main_adjoint", [0, 1, 2, 3], 1, seeds="param")(mod)
    via_call = Gradient("main_dot", [0, 1, 2, 3])(mod)
    rng = np.random.default_rng(2)
    params = mod["main_dot"].params
    inputs = [random_value(p.struct_info, rng) for p in params]
    _, want = build(via_call)["main_dot_adjoint"](*inputs)
    _, got = build(direct)["main_adjoint_adjoint"](*inputs[:4], tuple(inputs[4:]))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_merge_sparse_rows_differentiates_in_its_values_at_first_and_second_order():
    mod = retrograd.parse("""
@R.function
def main(idx: R.Tensor((5,), "int64"), v: R.Tensor((5, 3), "float64"), c: R.Tensor((4, 3), "float64")):
    with R.dataflow():
        m = R.grad.merge_sparse_rows(idx, R.multiply(v, v), num_rows=6)
        rows = m[1]
        s = R.sum(R.multiply(R.tanh(rows), c))
        R.output(s)
    return s
""")
    rng = np.random.default_rng(3)
    # Repeated and negative indices (-1 is row 5): 4 distinct rows.
    inputs = [np.array([2, -1, 2, 0, 4]), rng.standard_normal((5, 3)), rng.standard_normal((4, 3))]
    report = check_gradients(mod, "main", inputs, require_grads=[1])
    assert report.ok, str(report)
    mod = dot_of_adjoint(mod, "main", [1])
    report = check_gradients(mod, "main_dot", inputs + [rng.standard_normal((5, 3))], require_grads=[1])
    assert report.ok, str(report)
