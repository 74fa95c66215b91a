"""Checkpoint plans on the torch backend: a plan made for a byte budget keeps the torch executor's measured
peak within it (equal to the plan's prediction) and gives results bitwise equal to the unplanned adjoint
on the same backend; on CUDA also the allocator's peak falls with the budget."""

from __future__ import annotations


import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.passes import plan_checkpoint
from retrograd.passes.checkpoint import InfeasibleBudgetError

from passes.checkpoint.helpers import PLAN_MODELS, adjoint_module, inputs_for  # noqa: E402


def _run(mod, args, device):
    ex = retrograd.build(mod, backend="torch", device=device)
    out = ex.numpy(ex["main_adjoint"](*args))
    return out, ex.stats


def _flat(v):
    return [x for y in v for x in _flat(y)] if isinstance(v, tuple) else [np.asarray(v)]


def _budgets(mod):
    with pytest.raises(InfeasibleBudgetError) as info:
        plan_checkpoint(mod, "main_adjoint", 1)
    return info.value.least_feasible


def _check(model, device):
    mod = adjoint_module(PLAN_MODELS[model]())
    args = inputs_for(mod["main_adjoint"])
    ref, full = _run(mod, args, device)
    least = _budgets(mod)
    for k in (8, 4, 0):
        budget = least + (full.peak_live_bytes - least) * k // 8
        planned, report = plan_checkpoint(mod, "main_adjoint", budget)
        out, stats = _run(planned, args, device)
        assert stats.peak_live_bytes <= budget
        assert stats.peak_live_bytes == report.predicted_peak
        for a, b in zip(_flat(out), _flat(ref)):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)), model  # bitwise
    return full


@pytest.mark.parametrize("model", sorted(PLAN_MODELS))
def test_plans_hold_on_torch_cpu(model):
    need("torch")
    _check(model, "cpu")


@pytest.mark.parametrize("model", sorted(PLAN_MODELS))
def test_plans_hold_on_cuda(model):
    torch = need("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    _check(model, "cuda")
