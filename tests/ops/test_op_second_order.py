"""Second-order gradients of every differentiable op: Gradient applied to the first-order adjoint.

For each static OpCase with something to differentiate, the vjp `main_adjoint(params, cot)` is built,
then main_dot(params, cot, w...) = sum_i sum(grad_i * w_i) is differentiated again with Gradient (with
respect to the params and the cotangent) and checked against float64 central differences of
main_dot, which the executor computes by running the first-order adjoint. The fused backward ops
(grad.*) have cases of their own, so for them this is the third order."""

from __future__ import annotations

import numpy as np
import pytest

from ops.all_cases import ALL_CASES
from ops.helpers import dot_of_adjoint, random_value
from ops.helpers import bound_dims, has_int_tensors
from retrograd.errors import DiagnosticError
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ir.well_formed import well_formed
from retrograd.passes.gradient import Gradient
from retrograd.passes.gradient.activity import all_float
from retrograd.runtime import build
from retrograd.testing import check_gradients, to_float64

SECOND_CASES = [c for c in ALL_CASES if c.is_static and c.differentiable_params()]


def _with_shape(sinfo, value):
    """`sinfo` with the run-time shape of `value` where it is not static (unknown or symbolic)."""
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(tuple(_with_shape(f, v) for f, v in zip(sinfo.fields, value)))
    if isinstance(sinfo, TensorStructInfo) and not sinfo.is_static:
        return TensorStructInfo(np.shape(value), sinfo.dtype)
    return sinfo


@pytest.mark.parametrize("case", SECOND_CASES, ids=lambda c: c.id)
def test_second_order_matches_finite_differences(case):
    required = case.differentiable_params()
    mod = dot_of_adjoint(to_float64(case.build()), "main", required, target_index=None, seeds="param")
    _check_numerically(case, mod, required)


def _check_numerically(case, mod, required):
    dot = mod["main_dot"]
    inputs = [np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v for v in case.make_inputs(seed=1)]
    n = len(inputs)
    rng = np.random.default_rng(3)
    # Shapes known only at run time (symbolic dims, dynamic_strided_slice): the cotangent's from the
    # result, the weights' from their inputs.
    result = build(mod)["main"](*inputs)
    like = [result] + [inputs[k] for k in required]
    extra = [random_value(_with_shape(p.struct_info, v), rng) for p, v in zip(dot.params[n:], like)]
    # The params and the cotangent (unless it carries integers: topk's indices take no cotangent).
    wrt = required + ([n] if all_float(dot.params[n].struct_info) else [])
    report = check_gradients(mod, "main_dot", inputs + extra, require_grads=wrt, rtol=1e-4, atol=1e-6, max_coords=8, seed=4)
    assert report.ok, f"{case.op} {case.name}:\n{report}"


SYMBOLIC_CASES = [c for c in ALL_CASES if not c.is_static and c.differentiable_params()]


@pytest.mark.parametrize("case", SYMBOLIC_CASES, ids=lambda c: c.id)
def test_second_order_of_symbolic_cases_is_well_formed_or_a_located_error(case):
    required = case.differentiable_params()
    try:
        mod = dot_of_adjoint(to_float64(case.build()), "main", required, target_index=None, seeds="param")
        second = Gradient("main_dot", required)(mod)
    except DiagnosticError as err:
        # Rules that need static sizes say so, at first or second order, naming the function and binding.
        assert err.message.startswith("in function 'main") and "binding '" in err.message, err.message
        return
    assert well_formed(second) == []
    if has_int_tensors(case):
        return  # indices/targets need a valid range the symbolic case does not give
    # The module stays symbolic; the data binds its dims to small sizes.
    _check_numerically(bound_dims(case), mod, required)


def test_every_registered_op_has_a_gradient_rule():
    # Gradients of gradients need a rule for every op a rule may emit: non-differentiable ops say so
    # with `no_gradient`, so that a missing rule is always a decision, never an omission.
    from retrograd.ops.registry import all_ops

    missing = sorted(op.name for op in all_ops() if op.grad is None)
    assert not missing, f"ops without a gradient rule (use registry.no_gradient when none applies): {missing}"
