"""Gradient rules of the nn.* and grad.* ops, checked without the Gradient pass: emit each rule's expressions
through the BlockBuilder (so they type-check), evaluate them on the kernels, and compare with central
finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

from ops.cases_nn import CASES
from ops.helpers import dot_of_adjoint
from retrograd.errors import GradientError
from retrograd.ir.block import VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Call, Constant, PrimValue, ShapeExpr, Tuple, TupleGetItem, Var
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops.api import R
from retrograd.ops.composed import ComposedVjp
from retrograd.ops.registry import get
from optional import need  # noqa: E402


def evaluate(expr, env):
    """A tiny interpreter over normalized expressions: enough for what the rules emit."""
    if isinstance(expr, Var):
        return env[expr]
    if isinstance(expr, Constant):
        return np.asarray(expr.data)
    if isinstance(expr, ShapeExpr):
        return tuple(expr.values)
    if isinstance(expr, PrimValue):
        return expr.value
    if isinstance(expr, Tuple):
        return tuple(evaluate(f, env) for f in expr.fields)
    if isinstance(expr, TupleGetItem):
        return evaluate(expr.tuple_value, env)[expr.index]
    if isinstance(expr, Call):
        return expr.op.kernel(*(evaluate(a, env) for a in expr.args), **expr.attrs)
    raise TypeError(type(expr).__name__)


def _as_value(v):
    """A kernel's result: an array, or a tuple of them (tuple-valued ops such as batch_norm)."""
    return tuple(_as_value(f) for f in v) if isinstance(v, tuple | list) else np.asarray(v)


def _vdot(a, b) -> float:
    if isinstance(a, tuple):
        return sum(_vdot(x, y) for x, y in zip(a, b))
    return float(np.vdot(a, b))


def _random_like(rng, sinfo):
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random_like(rng, f) for f in sinfo.fields)
    return rng.normal(size=sinfo.shape)


def rule_gradients(case, arrays, seed_grad):
    """The rule's gradient for every argument (None where the rule gives none), evaluated."""
    params = case.params()
    bb = BlockBuilder()
    bb.begin_scope()
    call = bb.normalize(case.call(params))
    out = Var("out", call.struct_info)
    g = Var("g", call.struct_info)
    grads = get(case.op).grad(call, out, g)
    if isinstance(grads, ComposedVjp):
        pytest.skip("a composed-form rule: only the Gradient pass expands it (test_op_gradients.py checks it)")
    assert len(grads) == len(call.args), "one entry per argument"
    emitted = [None if e is None else bb.emit(e, "grad") for e in grads]
    seq = bb.end_scope(Tuple([v for v in emitted if v is not None]))
    env = dict(zip(params, arrays))
    env[out] = _as_value(get(case.op).kernel(*case.kernel_args(arrays), **call.attrs))
    env[g] = seed_grad
    for block in seq.blocks:
        for binding in block.bindings:
            assert isinstance(binding, VarBinding)
            env[binding.var] = _as_value(evaluate(binding.value, env))
    return [None if v is None else env[v] for v in emitted], call


def directional_fd(case, call, arrays, i, direction, seed_grad, h=1e-6):
    """d/dt <seed_grad, f(x_i + t * direction)> at t = 0, by central differences."""
    kernel = get(case.op).kernel

    def loss(t):
        xs = list(arrays)
        xs[i] = arrays[i] + t * direction
        return _vdot(seed_grad, _as_value(kernel(*case.kernel_args(xs), **call.attrs)))

    return (loss(h) - loss(-h)) / (2 * h)


GRAD_CASES = [c for c in CASES if c.is_static and c.opdef.grad is not None]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_rule_matches_finite_differences(case):
    case = case.as_dtype("float64")
    rng = np.random.default_rng(0)
    arrays = case.make_inputs(seed=1)
    out_sinfo = BlockBuilder().normalize(case.call(case.params())).struct_info
    seed_grad = _random_like(rng, out_sinfo)
    grads, call = rule_gradients(case, arrays, seed_grad)
    checked = 0
    for i, (arr, grad) in enumerate(zip(arrays, grads)):
        if not np.issubdtype(arr.dtype, np.floating) or case.op == "relax.grad.no_grad":
            continue
        direction = rng.normal(size=arr.shape)
        fd = directional_fd(case, call, arrays, i, direction, seed_grad)
        if i in case.diff_args:
            assert grad is not None, f"no gradient for argument {i}"
            assert grad.shape == arr.shape and grad.dtype == arr.dtype
            np.testing.assert_allclose(np.vdot(grad, direction), fd, rtol=1e-6, atol=1e-7)
            checked += 1
        elif grad is None and isinstance(case.inputs[i], TensorStructInfo):
            # A rule that gives no gradient claims the result does not depend on this argument locally.
            assert abs(fd) < 1e-7, f"argument {i} has no rule but a derivative of {fd}"
    assert checked == len(case.diff_args)


def test_no_grad_stops_the_gradient():
    x = Var("x", TensorStructInfo((3,), "float32"))
    call = BlockBuilder().normalize(get("relax.grad.no_grad")(x))
    assert get("relax.grad.no_grad").grad(call, Var("o", call.struct_info), Var("g", call.struct_info)) == [None]


def test_relu_gradient_is_zero_at_zero():
    case_x = np.array([-1.0, 0.0, 2.0])
    from ops.op_case import OpCase

    case = OpCase("relax.nn.relu", [case_x])
    grads, _ = rule_gradients(case, [case_x], np.ones(3))
    assert grads[0].tolist() == [0.0, 0.0, 1.0]


def test_conv2d_gradient_needs_static_channels_and_handles_symbolic_spatial_dims():
    # Spatial dims may be symbolic (values are checked in tests/passes/test_gradient_symbolic.py).
    x = Var("x", TensorStructInfo(("n", 2, "h", 5), "float32"))
    w = Var("w", TensorStructInfo((3, 2, 3, 3), "float32"))
    call = BlockBuilder().normalize(get("relax.nn.conv2d")(x, w))
    out = Var("out", call.struct_info)
    dx, _ = get("relax.nn.conv2d").grad(call, out, out)
    assert dx.op.name == "relax.take" and dx.attrs["axis"] == 2
    x = Var("x", TensorStructInfo((1, "c", 5, 5), "float32"))
    w = Var("w", TensorStructInfo((3, "c", 3, 3), "float32"))
    call = BlockBuilder().normalize(get("relax.nn.conv2d")(x, w))
    out = Var("out", call.struct_info)
    with pytest.raises(GradientError, match="static channel and spatial dims for the data"):
        get("relax.nn.conv2d").grad(call, out, out)


def test_conv2d_weight_gradient_binding_count():
    # TVM's formulation: one conv2d for the weight (no crop when the unread rows fit in the padding).
    x = Var("x", TensorStructInfo((2, 3, 7, 7), "float32"))
    w = Var("w", TensorStructInfo((4, 3, 3, 3), "float32"))
    bb = BlockBuilder()
    bb.begin_scope()
    call = bb.normalize(get("relax.nn.conv2d")(x, w, strides=2, padding=1))
    out = Var("out", call.struct_info)
    dx, dw = get("relax.nn.conv2d").grad(call, out, out)
    assert dx.op.name == "relax.nn.conv2d_transpose" and dx.attrs["output_padding"] == (0, 0)
    assert dw.op.name == "relax.nn.conv2d" and dw.attrs["padding"] == (1, 1, 1, 1)
    # 8 + 2 - 3 = 7 rows: one row is never read, and it lies in the padding, which is trimmed.
    call = bb.normalize(get("relax.nn.conv2d")(Var("x", TensorStructInfo((2, 3, 8, 8), "float32")), w, strides=2, padding=1))
    dx, dw = get("relax.nn.conv2d").grad(call, Var("o", call.struct_info), Var("g", call.struct_info))
    assert dx.attrs["output_padding"] == (1, 1) and dw.attrs["padding"] == (1, 1, 0, 0)


# -- in context: the Gradient pass and the executor, first and second order, against PyTorch ------------


def _module(params, body_fn):
    from retrograd.ir import Function, IRModule

    bb = BlockBuilder()
    bb.begin_scope()
    with bb.dataflow():
        out = bb.emit_output(body_fn(bb, *params))
    body = bb.end_scope(out)
    return IRModule({"main": Function(params, body, body.struct_info, attrs={"global_symbol": "main"})})


def _with_hvp(mod, grad_params):
    """main_adjoint, and main_dot_adjoint: the gradient of sum_i <d main / d p_i, v_i> (Hessian-vector products)."""
    from retrograd.passes.gradient import Gradient

    return Gradient("main_dot", require_grads=grad_params).transform_module(dot_of_adjoint(mod, "main", grad_params))


def _torch_hvp(loss_fn, tensors, vs):
    torch = need("torch")
    loss = loss_fn(*tensors)
    grads = torch.autograd.grad(loss, [t for t in tensors if t.requires_grad], create_graph=True)
    s = sum((g * torch.tensor(v)).sum() for g, v in zip(grads, vs))
    return loss, grads, torch.autograd.grad(s, [t for t in tensors if t.requires_grad])


def test_cnn_gradient_and_hessian_vector_product_match_torch():
    torch = need("torch")
    from retrograd.ir.expr import shape_expr
    from retrograd.runtime.executor import build

    F = torch.nn.functional
    f64 = "float64"
    x, w1, w2 = Var("x", TensorStructInfo((2, 4, 9, 9), f64)), Var("w1", TensorStructInfo((6, 2, 3, 3), f64)), Var("w2", TensorStructInfo((6, 4, 2, 2), f64))
    t = Var("t", TensorStructInfo((2,), "int64"))

    def body(bb, x, w1, w2, t):
        y = bb.emit(R.nn.conv2d(x, w1, strides=2, padding=1, groups=2))
        y = bb.emit(R.nn.gelu(y))
        y = bb.emit(R.nn.conv2d_transpose(y, w2, strides=2, padding=1, output_padding=1, groups=2))
        y = bb.emit(R.nn.silu(y))
        y = bb.emit(R.nn.max_pool2d(y, pool_size=3, strides=2, padding=1))
        y = bb.emit(R.nn.avg_pool2d(y, pool_size=2, strides=2, ceil_mode=True))
        y = bb.emit(R.nn.relu(R.reshape(y, shape_expr((2, 72)))))
        return R.nn.nll_loss(R.nn.log_softmax(y), t)

    def torch_loss(x, w1, w2, t):
        y = F.silu(F.conv_transpose2d(F.gelu(F.conv2d(x, w1, stride=2, padding=1, groups=2)), w2, stride=2, padding=1, output_padding=1, groups=2))
        y = F.avg_pool2d(F.max_pool2d(y, 3, 2, 1), 2, 2, ceil_mode=True, count_include_pad=False)
        return F.nll_loss(torch.log_softmax(F.relu(y.reshape(2, 72)), -1), t)

    mod = _with_hvp(_module([x, w1, w2, t], body), ["x", "w1", "w2"])
    rng = np.random.default_rng(0)
    arrays = [rng.normal(size=p.struct_info.shape) for p in (x, w1, w2)] + [np.array([3, 17])]
    vs = [rng.normal(size=a.shape) for a in arrays[:3]]
    ex = build(mod)
    loss, grads = ex["main_adjoint"](*arrays)
    _, hv = ex["main_dot_adjoint"](*arrays, *vs)
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays[:3]] + [torch.tensor(arrays[3])]
    t_loss, t_grads, t_hv = _torch_hvp(torch_loss, tensors, vs)
    np.testing.assert_allclose(loss, t_loss.item(), rtol=1e-12)
    for ours, theirs in zip(list(grads) + list(hv), list(t_grads) + list(t_hv)):
        np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_embedding_hessian_vector_product_matches_torch():
    torch = need("torch")
    from retrograd.runtime.executor import build

    f64 = "float64"
    table, idx, labels = Var("table", TensorStructInfo((5, 4), f64)), Var("idx", TensorStructInfo((6,), "int64")), Var("labels", TensorStructInfo((6, 4), f64))

    def body(bb, table, idx, labels):
        e = bb.emit(R.take(table, idx, axis=0))
        return R.nn.cross_entropy_with_logits(R.nn.log_softmax(R.multiply(e, e)), labels)

    def torch_loss(table, idx, labels):
        return -(torch.log_softmax(table[idx] ** 2, -1) * labels).sum() / 6

    mod = _with_hvp(_module([table, idx, labels], body), ["table"])
    rng = np.random.default_rng(1)
    # duplicate and negative indices
    arrays = [rng.normal(size=(5, 4)), np.array([0, 2, 2, -1, 4, 2]), rng.dirichlet(np.ones(4), size=6)]
    vs = [rng.normal(size=(5, 4))]
    ex = build(mod)
    _, grads = ex["main_adjoint"](*arrays)
    _, hv = ex["main_dot_adjoint"](*arrays, *vs)
    tensors = [torch.tensor(arrays[0], requires_grad=True), torch.tensor(arrays[1]), torch.tensor(arrays[2])]
    _, t_grads, t_hv = _torch_hvp(torch_loss, tensors, vs)
    np.testing.assert_allclose(grads[0], t_grads[0].detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(hv[0], t_hv[0].numpy(), rtol=1e-9, atol=1e-12)


def test_conv2d_out_dtype_gradients_come_back_in_the_input_dtype():
    from ops.op_case import OpCase, T

    case = OpCase("relax.nn.conv2d", [T(1, 3, 5, 5), T(2, 3, 2, 2)], {"out_dtype": "float64", "padding": (1, 1)})
    arrays = case.make_inputs(seed=3)
    seed = np.random.default_rng(4).normal(size=(1, 2, 6, 6))
    grads, _ = rule_gradients(case, arrays, seed)
    ref, _ = rule_gradients(case.as_dtype("float64"), [a.astype("float64") for a in arrays], seed)
    for got, want in zip(grads, ref):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
