"""Plans of the checkpoint pass measured by the executor: budgets respected, monotone in the budget,
bitwise-equal results, the Revolve optimum on a chain, the policies, and clean-up keeping the plan."""

from __future__ import annotations

import pytest
from passes.checkpoint.helpers import PLAN_MODELS, adjoint_module, bitwise_equal, inputs_for, models, revolve_extra, run

import retrograd
from retrograd.ir.expr import Call
from retrograd.passes import parse_pipeline, plan_checkpoint
from retrograd.passes.checkpoint import InfeasibleBudgetError


def _least(mod) -> int:
    with pytest.raises(InfeasibleBudgetError) as info:
        plan_checkpoint(mod, "main_adjoint", 1)
    return info.value.least_feasible


def _recomputed_ops(mod) -> list:
    return [
        b.value.op.name
        for blk in mod["main_adjoint"].body.blocks
        for b in blk.bindings
        if b.var.name_hint.endswith("_cp") and isinstance(b.value, Call)
    ]


@pytest.mark.parametrize("model", sorted(PLAN_MODELS))
def test_budgets_are_met_as_measured_and_monotone(model):
    mod = adjoint_module(PLAN_MODELS[model]())
    args = inputs_for(mod["main_adjoint"])
    ref, full = run(mod, "main_adjoint", args)
    least = _least(mod)
    assert least <= full
    previous = None
    for k in range(8, -1, -1):
        budget = least + (full - least) * k // 8
        planned, report = plan_checkpoint(mod, "main_adjoint", budget)
        out, peak = run(planned, "main_adjoint", args)
        assert peak <= budget, (budget, peak)
        assert peak == report.predicted_peak
        assert bitwise_equal(out, ref)
        if previous is not None:
            assert peak <= previous  # a lower budget never raises the measured peak
        previous = peak


@pytest.mark.parametrize("layers, slots", [(16, 2), (16, 3), (20, 3), (20, 4), (30, 5)])
def test_sin_chain_recomputes_the_revolve_optimum(layers, slots):
    mod = adjoint_module(models.chain_text(layers, width=8, batch=4))
    act = 8 * 4 * 4
    least = _least(mod)
    planned, report = plan_checkpoint(mod, "main_adjoint", least + (slots - 1) * act)
    sins = sum(op == "relax.sin" for op in _recomputed_ops(planned))
    assert sins == revolve_extra(layers, slots)


def test_cheap_policy_never_recomputes_matmul_conv_or_pool():
    for model in ("transformer", "resnet", "mlp"):
        mod = adjoint_module(PLAN_MODELS[model]())
        args = inputs_for(mod["main_adjoint"])
        ref, full = run(mod, "main_adjoint", args)
        planned, report = plan_checkpoint(mod, "main_adjoint", None, "cheap")
        ops = _recomputed_ops(planned)
        assert not any(op.endswith(("matmul", "conv2d", "conv2d_transpose", "pool2d")) for op in ops)
        assert report.extra_matmul_cost == 0
        out, peak = run(planned, "main_adjoint", args)
        assert peak <= full and bitwise_equal(out, ref)


def test_sqrt_policy_lowers_a_long_chain():
    mod = adjoint_module(models.chain_text(36, width=8, batch=4))
    args = inputs_for(mod["main_adjoint"])
    ref, full = run(mod, "main_adjoint", args)
    planned, report = plan_checkpoint(mod, "main_adjoint", None, "sqrt")
    out, peak = run(planned, "main_adjoint", args)
    act = 8 * 4 * 4
    assert peak <= full - 20 * act  # about 2 sqrt(36) = 12 activations instead of 36
    assert bitwise_equal(out, ref)


def test_planned_pipeline_survives_cleanup_and_round_trip():
    mod = retrograd.parse(models.transformer_text(2, seq=8, d=8))
    planned = parse_pipeline("gradient(func=main), checkpoint(func=main_adjoint, budget=75%)")(mod)
    args = inputs_for(planned["main_adjoint"])
    ref, peak = run(planned, "main_adjoint", args)
    assert _recomputed_ops(planned)
    cleaned = parse_pipeline("cse, simplify, dce, fold-constant")(planned)
    out, peak2 = run(cleaned, "main_adjoint", args)
    assert peak2 == peak and bitwise_equal(out, ref)
    again = retrograd.parse(cleaned.script())
    out3, peak3 = run(again, "main_adjoint", args)
    assert peak3 == peak and bitwise_equal(out3, ref)
