"""Every differentiable op, through the Gradient pass: adjoints against float64 central differences.

Generated from the registry and the OpCases: a new case is checked automatically, and an op that has a
gradient rule but no case with something to differentiate fails `test_every_rule_has_a_case`."""

from __future__ import annotations

import pytest

from ops.all_cases import ALL_CASES
from ops.helpers import OWN_OPS, bound_dims, has_int_tensors
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Var
from retrograd.errors import GradientError
from retrograd.ops.composed import ComposedVjp
from retrograd.ops.registry import all_ops
from retrograd.testing import check_gradients

GRAD_CASES = [c for c in ALL_CASES if c.differentiable_params()]


def _case_id(case) -> str:
    return case.id


@pytest.mark.parametrize("case", GRAD_CASES, ids=_case_id)
def test_adjoint_matches_finite_differences(case):
    if not case.is_static and has_int_tensors(case):
        pytest.skip("symbolic case with random integer inputs (indices/targets need a valid range)")
    mod = case.build()
    inputs = bound_dims(case).make_inputs(seed=1)
    try:
        report = check_gradients(
            mod, "main", inputs, require_grads=case.differentiable_params(), target_index=None, seed=2
        )
    except GradientError as err:
        if not case.is_static and "static shape" in err.message:
            pytest.skip(f"the rule needs static shapes: {err.message}")
        raise
    assert report.ok, f"{case.op} {case.name}:\n{report}"


def _rule_gives_gradients(op, case) -> bool:
    """Whether the op's rule returns any gradient at all (comparisons and creation ops return None)."""
    params = case.params()
    bb = BlockBuilder()
    bb.begin_scope()
    call = bb.normalize(case.call(params))
    out = Var("out", call.struct_info)
    g = Var("g", call.struct_info)
    try:
        grads = op.grad(call, out, g)
    except Exception:  # noqa: BLE001 - a rule that cannot even run on its own case is a differentiable op
        return True
    if isinstance(grads, ComposedVjp):
        return True  # a fused backward op differentiated through its composed form
    return any(e is not None and getattr(getattr(e, "op", None), "name", "") != "relax.grad.no_grad" for e in grads)


def test_every_rule_has_a_case():
    by_op: dict = {}
    for c in ALL_CASES:
        by_op.setdefault(c.op, []).append(c)
    missing = []
    for op in all_ops():
        if op.grad is None:
            continue
        cases = by_op.get(op.name)
        if op.name in OWN_OPS:
            continue  # run-time-shaped results the generated tests cannot draw: checked by their own tests
        if not cases:
            missing.append(f"{op.name} (no OpCase at all)")
            continue
        if any(c.differentiable_params() and c.is_static for c in cases):
            continue
        if _rule_gives_gradients(op, cases[0]):
            missing.append(f"{op.name} (its rule gives gradients but no static case checks them)")
    assert not missing, "ops with a gradient rule and no finite-difference case:\n  " + "\n  ".join(missing)
