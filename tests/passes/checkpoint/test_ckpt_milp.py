"""The planner against an exact MILP of the simulator's model (Checkmate, Jain et al. 2020, stage order
fixed), written in milp_reference.py independently of the planner's."""

from __future__ import annotations

import random

import pytest
from passes.checkpoint.helpers import random_problem

from retrograd.passes.checkpoint import InfeasibleBudget, simulate, solve

from optional import need  # noqa: E402
need("scipy.optimize")
from passes.checkpoint.milp_reference import milp_plan  # noqa: E402


def test_milp_matches_simulator_on_a_hand_case():
    # a -> b -> c, d reads a and c: keeping a costs 4 bytes through stage 2; recomputing it costs 1
    from retrograd.passes.checkpoint import Problem

    p = Problem(sizes=[4, 8, 4, 2], costs=[1] * 4, deps=[(), (0,), (1,), (0, 2)], recomputable=[True] * 4,
                outputs=(3,))
    assert milp_plan(p)[0] == 12
    cost, sched = milp_plan(p, 12)
    assert cost == 1 and simulate(p, sched).peak_bytes == 12
    assert milp_plan(p, 16)[0] == 0


def stage_lower_bound(p):
    """Parameters, plus a node's inputs and output while it is computed: no plan goes below this."""
    return p.pinned_bytes + max(p.sizes[i] + sum(p.sizes[d] for d in set(p.deps[i])) for i in range(p.n))


def test_planner_matches_milp_on_random_dags():
    matched, ratios, cases = 0, [], 0
    for seed in range(200):
        rng = random.Random(1000 + seed)
        p = random_problem(rng, rng.randint(3, 14))
        high = simulate(p).peak_bytes
        low = stage_lower_bound(p)
        budget = low + (high - low) * rng.choice([0, 1, 1, 2, 2, 3]) // 4
        ref = milp_plan(p, budget)
        if ref is None:
            with pytest.raises(InfeasibleBudget):
                solve(p, budget)
            continue
        ref_cost, ref_sched = ref
        ref_sim = simulate(p, ref_sched)
        assert ref_sim.valid and ref_sim.peak_bytes <= budget and ref_sim.extra_cost == pytest.approx(ref_cost)
        sim = simulate(p, solve(p, budget))
        assert sim.valid and sim.peak_bytes <= budget
        cases += 1
        if sim.extra_cost <= ref_cost + 1e-6:
            matched += 1
        ratios.append((sim.extra_cost + 1e-9) / (ref_cost + 1e-9))
    assert cases >= 150
    assert matched >= 0.95 * cases
    assert max(ratios) <= 1.05


@pytest.mark.parametrize("seed", range(12))
def test_least_feasible_budget_is_the_milp_least_peak(seed):
    rng = random.Random(5000 + seed)
    p = random_problem(rng, rng.randint(4, 12))
    low, low_sched = milp_plan(p)
    assert simulate(p, low_sched).peak_bytes == low
    with pytest.raises(InfeasibleBudget) as err:
        solve(p, low - 1)
    assert err.value.least_feasible == low and f"{low} bytes" in str(err.value)
    assert simulate(p, solve(p, low)).peak_bytes == low


def test_plans_do_not_depend_on_the_clock(monkeypatch):
    """Only counts limit the solvers: with every clock jumping 1,000 s per reading (a machine loaded to a
    standstill), the same problems get the same plans, and the MILP is never handed a time limit."""
    import itertools
    import time

    from passes.checkpoint.helpers import chain_problem

    problems = [random_problem(random.Random(77 + s), 8 + s) for s in range(6)]
    problems += [random_problem(random.Random(90), 70, adjoint=True), chain_problem(40)]
    budgets = [(p, (simulate(p).peak_bytes + p.pinned_bytes * 3) // 4 + simulate(p).peak_bytes // 4) for p in problems]

    def plans():
        out = []
        for p, budget in budgets:
            try:
                out.append(solve(p, budget))
            except InfeasibleBudget as err:
                out.append(err.least_feasible)
        return out

    quiet = plans()
    options = []
    optimize = need("scipy.optimize")
    real_milp = optimize.milp

    def recording_milp(*args, **kwargs):
        options.append(dict(kwargs.get("options") or {}))
        return real_milp(*args, **kwargs)

    monkeypatch.setattr(optimize, "milp", recording_milp)
    ticks = itertools.count()
    for name in ("time", "perf_counter", "monotonic", "process_time"):
        monkeypatch.setattr(time, name, lambda: 1000.0 * next(ticks))
    for name in ("perf_counter_ns", "monotonic_ns", "time_ns"):
        monkeypatch.setattr(time, name, lambda: 10**12 * next(ticks))
    assert plans() == quiet
    assert options and all("time_limit" not in o for o in options)
