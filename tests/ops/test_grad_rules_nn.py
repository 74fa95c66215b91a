"""Gradient rules of the nn.* and grad.* ops, checked without the Gradient pass: emit each rule's expressions
through the BlockBuilder (so they type-check), evaluate them on the kernels, and compare with central
finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

from cases_nn import CASES
from retrograd.errors import GradientError
from retrograd.ir.block import VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Call, Constant, PrimValue, ShapeExpr, Tuple, TupleGetItem, Var
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import get


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


def rule_gradients(case, arrays, seed_grad):
    """The rule's gradient for every argument (None where the rule gives none), evaluated."""
    params = case.params()
    bb = BlockBuilder()
    bb.begin_scope()
    call = bb.normalize(case.call(params))
    out = Var("out", call.struct_info)
    g = Var("g", call.struct_info)
    grads = get(case.op).grad(call, out, g)
    assert len(grads) == len(call.args), "one entry per argument"
    emitted = [None if e is None else bb.emit(e, "grad") for e in grads]
    seq = bb.end_scope(Tuple([v for v in emitted if v is not None]))
    env = dict(zip(params, arrays))
    env[out] = np.asarray(get(case.op).kernel(*arrays, **call.attrs))
    env[g] = seed_grad
    for block in seq.blocks:
        for binding in block.bindings:
            assert isinstance(binding, VarBinding)
            env[binding.var] = np.asarray(evaluate(binding.value, env))
    return [None if v is None else env[v] for v in emitted], call


def directional_fd(case, call, arrays, i, direction, seed_grad, h=1e-6):
    """d/dt <seed_grad, f(x_i + t * direction)> at t = 0, by central differences."""
    kernel = get(case.op).kernel

    def loss(t):
        xs = list(arrays)
        xs[i] = arrays[i] + t * direction
        return float(np.vdot(seed_grad, np.asarray(kernel(*xs, **call.attrs))))

    return (loss(h) - loss(-h)) / (2 * h)


GRAD_CASES = [c for c in CASES if c.is_static]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.id for c in GRAD_CASES])
def test_rule_matches_finite_differences(case):
    case = case.as_dtype("float64")
    rng = np.random.default_rng(0)
    arrays = case.make_inputs(seed=1)
    out_sinfo = None
    params = case.params()
    out_sinfo = BlockBuilder().normalize(case.call(params)).struct_info
    seed_grad = rng.normal(size=out_sinfo.shape)
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
    from op_case import OpCase

    case = OpCase("relax.nn.relu", [case_x])
    grads, _ = rule_gradients(case, [case_x], np.ones(3))
    assert grads[0].tolist() == [0.0, 0.0, 1.0]


def test_conv2d_gradient_needs_static_shapes():
    x = Var("x", TensorStructInfo(("n", 2, 5, 5), "float32"))
    w = Var("w", TensorStructInfo((3, 2, 3, 3), "float32"))
    call = BlockBuilder().normalize(get("relax.nn.conv2d")(x, w))
    out = Var("out", call.struct_info)
    with pytest.raises(GradientError, match="static shape for the data"):
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
