"""The least feasible budget the pass reports is the least peak its plans reach: over every function of the
corpus and its adjoint, and the checkpoint benchmarks' models, the least budget of the refusal message is
accepted, a budget one byte under it is refused, and the plan at it peaks exactly there (the exact memory
model for the corpus, the executor's meter for the models)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from passes.checkpoint.helpers import ALIASING_IF, PLAN_MODELS, adjoint_module, corpus_functions, inputs_for, run

from retrograd.analysis import peak_memory
from retrograd.errors import DiagnosticError
from retrograd.passes import Gradient
from retrograd.passes.checkpoint import InfeasibleBudgetError, plan_checkpoint

ROOT = Path(__file__).resolve().parents[3]
CORPUS = sorted((ROOT / "tests" / "corpus").glob("c*.py"))


def _least(mod, name) -> int | None:
    """The least feasible budget of the refusal of a 1-byte budget (None: the function cannot be planned)."""
    try:
        peak_memory(mod, name)
        plan_checkpoint(mod, name, 1)
    except InfeasibleBudgetError as err:
        stated = int(re.search(r"least feasible budget is (\d+) bytes", str(err)).group(1))
        assert stated == err.least_feasible
        return err.least_feasible
    except DiagnosticError:
        return None
    raise AssertionError(f"{name}: a 1-byte budget was met")


def _check(mod, name, measure) -> bool:
    least = _least(mod, name)
    if least is None:
        return False
    planned, report = plan_checkpoint(mod, name, least)
    assert report.predicted_peak == least, name
    assert measure(planned, name) == least, name
    with pytest.raises(InfeasibleBudgetError) as refused:
        plan_checkpoint(mod, name, least - 1)
    assert refused.value.least_feasible == least
    return True


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus(path):
    for mod, name in corpus_functions(path):
        _check(mod, name, peak_memory)


@pytest.mark.parametrize("model", sorted(PLAN_MODELS))
def test_benchmark_models_by_the_executor(model):
    mod = adjoint_module(PLAN_MODELS[model]())
    args = inputs_for(mod["main_adjoint"])
    assert _check(mod, "main_adjoint", lambda m, name: run(m, name, args)[1])


@pytest.mark.parametrize("shape", ["mlp", "residual", "fanout"])
def test_scaling_shapes(shape):
    # mlp: the descent's plan for its lowest peak is shared (share.py) down to a lower one, which alone
    # must then be the least (and every budget from it met).
    import bench_checkpoint_scale as scale

    mod, name = scale.build(shape, 10)
    assert _check(mod, name, peak_memory)


def test_an_if_returning_an_outer_value():
    # The Problem counts the If's result as a buffer of its own (it is a or b): the least feasible budget
    # is still the peak the executor's model measures for the plan the pass returns at it.
    import retrograd

    mod = retrograd.parse(ALIASING_IF)
    assert _check(mod, "main", peak_memory)
    assert _check(Gradient("main", seeds="ones")(mod), "main_adjoint", peak_memory)



def test_a_uniform_chain_past_the_revolve_limit(monkeypatch):
    # Revolve's plans recomputing more than max(MAX_REPEAT * L, MAX_STEPS) steps are never built (the one-slot
    # plan's L^2 / 2 would make refusing a budget quadratic): the least feasible budget is the least peak of
    # the plans that are, met when passed back.
    import bench_checkpoint_scale as scale

    from retrograd.passes.checkpoint import chain
    from retrograd.passes.checkpoint.extract import extract

    mod, name = scale.build("params", 500)  # a parameter per layer: the gradients are outputs
    problem = extract(mod[name]).problem
    found = chain.detect(problem)
    L = max(found) + 2
    assert chain.uniform(problem, found) and L == 1000 and chain.fewest_slots(L) == 2
    assert chain.revolve_steps(L, 0) > chain.MAX_STEPS >= chain.revolve_steps(L, 1) > chain.MAX_REPEAT * L
    slots, schedule = [], chain.chain_schedule
    monkeypatch.setattr(chain, "chain_schedule", lambda f, c: slots.append(c) or schedule(f, c))
    assert _check(mod, name, peak_memory)
    assert slots and min(slots) == 2
