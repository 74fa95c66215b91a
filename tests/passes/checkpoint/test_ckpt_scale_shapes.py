"""The scaling benchmark's adjoint shapes (benchmarks/bench_checkpoint_scale.py) at small size: plans run,
give the unplanned gradients bitwise and peak within the budget; planning a residual chain takes linear
closure work."""

from __future__ import annotations


import pytest
from passes.checkpoint.helpers import bitwise_equal, inputs_for, run

from retrograd.passes import plan_checkpoint
from retrograd.passes.checkpoint import greedy, policies
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.simulate import simulate

import bench_checkpoint_scale as scale  # noqa: E402

# Layers giving adjoints of 450-700 bindings: past greedy.BATCH_NODES, where the descent batches and
# sharing is skipped.
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


def _segmentation_work(layers: int) -> int:
    """Nodes the closures visit while a residual chain's adjoint is planned."""
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


def test_planning_a_residual_chain_takes_linear_closure_work():
    # A plan whose recomputations reached back through all earlier layers would take 4x the work at
    # twice the layers; the work doubles.
    small, large = _segmentation_work(100), _segmentation_work(200)
    assert large < 2.5 * small
