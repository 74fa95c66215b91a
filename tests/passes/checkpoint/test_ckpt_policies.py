"""Policies: monotone budgets, sqrt (Chen et al.), cheap (PyTorch's default), errors; the greedy on larger graphs."""

from __future__ import annotations

import random
from math import isqrt

import pytest
from passes.checkpoint.helpers import Builder, chain_problem, random_problem

from retrograd.passes.checkpoint import InfeasibleBudget, Problem, Schedule, least_feasible, simulate, solve
from retrograd.passes.checkpoint.problem import HEAVY_KINDS


def sweep(p: Problem, points: int = 12):
    """(budget, peak, extra cost) from the unplanned peak down to the least feasible budget."""
    high, low = simulate(p).peak_bytes, least_feasible(p)
    out = []
    for k in range(points + 1):
        budget = high - (high - low) * k // points
        sim = simulate(p, solve(p, budget))
        assert sim.valid and sim.peak_bytes <= budget
        out.append((budget, sim.peak_bytes, sim.extra_cost))
    return out


def assert_monotone(rows):
    for (b1, p1, c1), (b2, p2, c2) in zip(rows, rows[1:]):
        assert b2 <= b1
        assert p2 <= p1, f"budget {b2} got peak {p2} > {p1} at the larger budget {b1}"
        assert c2 >= c1 - 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_monotone_small_exact(seed):
    rng = random.Random(seed)
    assert_monotone(sweep(random_problem(rng, rng.randint(6, 12)), points=6))


@pytest.mark.parametrize("seed", range(4))
def test_monotone_greedy_larger_graphs(seed):
    rng = random.Random(100 + seed)
    p = random_problem(rng, 80, adjoint=True, extras=seed % 2 == 1)
    assert_monotone(sweep(p, points=10))


def test_monotone_chain():
    assert_monotone(sweep(chain_problem(60), points=15))


def test_budget_none_and_unknown_policy():
    p = chain_problem(10)
    assert solve(p, None) == Schedule()
    with pytest.raises(ValueError, match="unknown checkpoint policy"):
        solve(p, 100, policy="fastest")


def test_infeasible_on_a_large_graph_states_a_feasible_budget():
    rng = random.Random(7)
    p = random_problem(rng, 70, adjoint=True)
    least = least_feasible(p)
    assert simulate(p, solve(p, least)).peak_bytes <= least
    with pytest.raises(InfeasibleBudget) as err:
        solve(p, least - 1)
    assert err.value.least_feasible == least


def test_sqrt_on_a_chain_is_chen():
    L = 100
    p = chain_problem(L)
    s = solve(p, policy="sqrt")
    sim = simulate(p, s).check()
    counts = {}
    for st in s.recompute:
        for v in st:
            counts[v] = counts.get(v, 0) + 1
    # every forward value recomputed at most once, about sqrt(L) kept, about 2 sqrt(L) live at once
    assert max(counts.values()) == 1
    assert L - 3 * isqrt(L) <= sim.recomputed_count <= L
    assert sim.peak_bytes <= p.pinned_bytes + (2 * isqrt(L) + 4) * p.sizes[0]
    assert sim.peak_bytes < simulate(p).peak_bytes / 3


def _matmul_cos_chain(layers: int) -> tuple[Problem, int]:
    """cos(x) then `layers` times cos(x @ w), and its backward (gradient nodes of size 0)."""
    b = Builder()
    add = b.add
    c = add(4, 1, (), "elementwise")
    mms, coss = [], [c]
    for _ in range(layers):
        mms.append(add(4, 100, (coss[-1],), "matmul"))
        coss.append(add(4, 1, (mms[-1],), "elementwise"))
    add(0, 1, (coss[-1],), "reduce", output=True)
    gc = add(0, 1, (), "other", False)
    for i in range(layers - 1, -1, -1):
        gm = add(0, 1, (mms[i], gc), "other", False)
        add(0, 100, (coss[i], gm), "other", False, True)
        gc = add(0, 100, (gm,), "other", False)
    return b.build(), layers


def test_cheap_keeps_matmul_outputs_and_recomputes_the_rest():
    p, layers = _matmul_cos_chain(30)
    s = solve(p, policy="cheap")
    sim = simulate(p, s).check()
    assert not any(p.kinds[v] in HEAVY_KINDS for st in s.recompute for v in st)
    # only the matmul outputs stay for the backward (plus the cos being recomputed and its reader)
    assert sim.peak_bytes <= 4 * (layers + 2)
    assert simulate(p).peak_bytes == 4 * 2 * layers + 4


def test_budget_recomputes_no_matmul_while_cheap_ops_fit():
    p, layers = _matmul_cos_chain(30)  # 90+ nodes: the greedy path
    cheap_peak = simulate(p, solve(p, policy="cheap")).peak_bytes
    for budget in (cheap_peak, cheap_peak + 8, cheap_peak + 40):
        s = solve(p, budget)
        assert simulate(p, s).peak_bytes <= budget
        assert not any(p.kinds[v] in HEAVY_KINDS for st in s.recompute for v in st)
    s = solve(p, cheap_peak - 12)
    assert any(p.kinds[v] in HEAVY_KINDS for st in s.recompute for v in st)


def test_without_scipy_the_heuristics_plan(monkeypatch):
    """scipy is optional: without it the exact solver is off and the greedy plans, within budget."""
    import sys

    from retrograd.passes.checkpoint import exact

    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    assert not exact.available()
    for seed in range(30):
        rng = random.Random(300 + seed)
        p = random_problem(rng, rng.randint(4, 14), extras=seed % 3 == 0)
        high = simulate(p).peak_bytes
        for budget in (high, (high + p.pinned_bytes) // 2):
            try:
                s = solve(p, budget)
            except InfeasibleBudget as err:
                assert err.least_feasible > budget
                assert simulate(p, solve(p, err.least_feasible)).peak_bytes <= err.least_feasible
                continue
            sim = simulate(p, s)
            assert sim.valid and sim.peak_bytes <= budget


def test_sqrt_drops_around_a_value_that_cannot_be_recomputed():
    """A ResNet adjoint: a backward value live across the peak reads the loss seed (a view that cannot be
    recomputed); it stays and the forward values around it are still segmented."""
    from passes.checkpoint.helpers import adjoint_module, models

    from retrograd.passes.checkpoint.extract import extract

    mod = adjoint_module(models.resnet_text(stages=2, blocks=2, channels=4, size=8, batch=1))
    p = extract(mod["main_adjoint"]).problem
    sim = simulate(p, solve(p, policy="sqrt")).check()
    assert sim.recomputed_count > 0
    assert sim.peak_bytes < simulate(p).peak_bytes


@pytest.mark.parametrize("seed", range(4))
def test_budget_plan_needs_each_of_its_recomputations(seed):
    """Beyond the exact solver's size: keeping any one recomputed value instead raises the peak past the
    plan's (or costs no less), checked by recomputing the plan from the schedule without it."""
    from retrograd.passes.checkpoint.greedy import Planner

    rng = random.Random(200 + seed)
    p = random_problem(rng, 80, adjoint=True, extras=seed % 2 == 1)
    high, low = simulate(p).peak_bytes, least_feasible(p)
    budget = (high + low) // 2
    s = solve(p, budget)
    sim = simulate(p, s).check()
    assert sim.peak_bytes <= budget
    pl = Planner(p)
    stages = {(v, pl.gap(v, b)) for b, st in enumerate(s.recompute) for v in st}
    for g in stages:
        other = pl.build(stages - {g})
        if other is None:
            continue
        alt = simulate(p, other, check=False)
        assert alt.peak_bytes > sim.peak_bytes or alt.extra_cost >= sim.extra_cost - 1e-9
