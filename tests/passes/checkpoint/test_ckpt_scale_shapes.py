"""The scaling benchmark's adjoint shapes (benchmarks/bench_checkpoint_scale.py) at small size: plans run,
give the unplanned gradients bitwise and peak within the budget; segmentations bounded by the best plan
found leave the chosen plan unchanged and are built in linear work on residual chains."""

from __future__ import annotations


import pytest
from passes.checkpoint.helpers import bitwise_equal, inputs_for, run

from retrograd.passes import plan_checkpoint
from retrograd.passes.checkpoint import greedy, policies
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.simulate import simulate

import bench_checkpoint_scale as scale  # noqa: E402

# Layers giving adjoints of 450-700 bindings: past greedy.BATCH_NODES, where the descent batches and
# the segmentations are bounded (below it, sharing lowers a plan's cost after it is built).
LAYERS = {"chain": 150, "residual": 80, "fanin": 60, "fanin_tree": 60, "fanout": 80, "params": 80,
          "mlp": 40, "tuples": 12, "norm": 20, "forward": 150}


@pytest.mark.parametrize("budget", ["50%", "90%"])
@pytest.mark.parametrize("shape", sorted(LAYERS))
def test_plans_run_bitwise_within_budget(shape, budget):
    if shape in ("params", "tuples") and budget == "50%":
        budget = "70%"  # half is infeasible (params: parameters are a third of the peak; tuples: small)
    mod, name = scale.build(shape, LAYERS[shape])
    planned, report = plan_checkpoint(mod, name, budget)
    assert report.predicted_peak <= report.budget
    args = inputs_for(mod[name])
    want, _ = run(mod, name, args)
    got, peak = run(planned, name, args)
    assert bitwise_equal(got, want)
    assert peak <= report.budget


def _unbounded_choice(problem, budget):
    """plan_budget's choice with every segmentation built in full (the policy before the bound)."""
    found = []
    for solver, optimal in policies.solvers(problem):
        if solver is not policies.heuristic:
            s = solver(problem, budget)
            if s is not None and optimal:
                return s
            found += [s] if s is not None else []
    descent = greedy.descend(problem, budget, policies.light(problem))
    if descent is not None:
        found.append(policies.shared(problem, descent[0])[0])
    for s, sim in policies.segment_plans(problem):
        if sim.peak_bytes <= budget:
            found.append(policies.shared(problem, s)[0])
    return min(found, key=lambda s: policies.rank(problem, s)) if found else None


@pytest.mark.parametrize("shape", ["residual", "fanin", "params", "mlp", "norm"])
@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.7, 0.9])
def test_bounded_segmentations_choose_the_same_plan(shape, fraction):
    mod, name = scale.build(shape, LAYERS[shape])
    problem = extract(mod[name]).problem
    assert problem.n > greedy.BATCH_NODES
    budget = int(simulate(problem).peak_bytes * fraction)
    assert policies.plan_budget(problem, budget) == _unbounded_choice(problem, budget)


def _segmentation_work(layers: int) -> int:
    """Nodes the closures visit while the bounded segmentations of a residual chain's adjoint are built."""
    mod, name = scale.build("residual", layers)
    problem = extract(mod[name]).problem
    seen = [0]
    closure = greedy.Planner.closure

    def counting(self, v, b, dropped, have, out):
        start = len(out)
        ok = closure(self, v, b, dropped, have, out)
        seen[0] += len(out) - start
        return ok

    greedy.Planner.closure = counting
    try:
        policies.plan_budget(problem, simulate(problem).peak_bytes // 2)
    finally:
        greedy.Planner.closure = closure
    return seen[0]


def test_residual_segmentations_take_linear_work():
    # Unbounded, each segment's recomputations reached back through all earlier ones: 4x the work at
    # twice the layers. Bounded by the descent's plan, the work doubles.
    small, large = _segmentation_work(100), _segmentation_work(200)
    assert large < 2.5 * small
