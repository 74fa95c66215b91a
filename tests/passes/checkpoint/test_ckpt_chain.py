"""Chain adjoints: the planner's extra forward steps equal Revolve's optimum, computed here by the classic DP.

Budget mapping. chain_problem(L) is the adjoint of an L-step chain y_k = f(y_{k-1}) whose backward
step k reads y_{k-1} and the incoming gradient (like a `sin` chain's). Revolve's c slots count the
input x = y_0, here a parameter (pinned), so c - 1 slots hold forward values; Revolve also has its
working state (the value being advanced, overwritten in place), and the backward needs its own
working set: the incoming gradient (overwritten in place by the outgoing one). So c slots mean a
budget of pinned + (c - 1 + 1 + 1) * size bytes.
"""

from __future__ import annotations

import pytest
from passes.checkpoint.helpers import chain_problem, revolve_extra, revolve_table

from retrograd.passes.checkpoint import InfeasibleBudget, simulate, solve
from retrograd.passes.checkpoint.chain import detect, revolve_steps, uniform
from optional import need  # noqa: E402

SIZE, PINNED = 8, 16


def chain_budget(c: int) -> int:
    return PINNED + (c + 1) * SIZE


def test_revolve_figures_from_the_issue():
    assert [revolve_extra(100, c) for c in (5, 10, 20)] == [217, 123, 79]


@pytest.mark.parametrize("steps", [8, 9, 12, 17, 25, 40, 64, 100])
def test_chain_extra_steps_equal_revolve_dp(steps):
    p = chain_problem(steps, size=SIZE, pinned=PINNED)
    assert detect(p) is not None and uniform(p, detect(p))
    for c in range(2, 21):
        budget = chain_budget(c)
        sim = simulate(p, solve(p, budget))
        assert sim.valid, sim.error
        assert sim.peak_bytes <= budget
        assert sim.recomputed_count == max(0, revolve_extra(steps, c)), (steps, c)
        assert sim.extra_cost == sim.recomputed_count


def test_closed_form_equals_dp():
    table = revolve_table(89, 9)
    for s in range(0, 10):
        for l in range(1, 90):
            assert revolve_steps(l, s) == table[s][l]


@pytest.mark.parametrize("steps", [6, 8])
def test_exact_milp_with_in_place_agrees_with_the_dp(steps):
    """A second solver (the planner's MILP, which models in-place reuse) finds the same optimum:
    the budget mapping above leaves no room for a plan better than Revolve's."""
    need("scipy.optimize")
    from retrograd.passes.checkpoint.exact import Model

    p = chain_problem(steps, size=SIZE, pinned=PINNED)
    m = Model(p)
    for c in range(2, 5):
        sched, cost = m.solve(chain_budget(c))
        assert round(cost) == revolve_extra(steps, c)
        assert simulate(p, sched).peak_bytes <= chain_budget(c)


def test_long_chain_is_valid_and_fits():
    p = chain_problem(2000, size=SIZE, pinned=PINNED)
    for c in (3, 8, 40):
        sim = simulate(p, solve(p, chain_budget(c)))
        assert sim.valid and sim.peak_bytes <= chain_budget(c)
        assert sim.recomputed_count == revolve_steps(2000, c - 1) - 1999


def test_chain_below_one_slot_is_infeasible():
    p = chain_problem(30, size=SIZE, pinned=PINNED)
    least = chain_budget(1)  # the input, the working state and the gradient
    assert simulate(p, solve(p, least)).peak_bytes == least
    with pytest.raises(InfeasibleBudget) as err:
        solve(p, least - 1)
    assert err.value.least_feasible == least


@pytest.mark.parametrize("seed", range(40))
def test_slot_search_finds_the_largest_fit_and_probes_little_near_the_guess(seed, monkeypatch):
    """`largest` against a naive scan, the plans' peaks growing with the slot count x (a fake plan is its
    peak); a budget one slot under the guess costs two probes, an infeasible one three (the bottom's)."""
    import random

    import retrograd.passes.checkpoint.chain as chain

    rng = random.Random(seed)
    top = rng.randint(2, 5000)
    bottom = rng.randint(1, min(top, 40))
    fit = rng.choice([bottom - 1, top, rng.randint(bottom - 1, top)])  # the largest x that fits
    guess = rng.choice([fit + 1, rng.randint(1, top)]) if fit < top else rng.randint(1, top)
    guess = max(1, min(top, guess))
    probes = []
    monkeypatch.setattr(chain, "simulate", lambda problem, plan, check: type("S", (), {"peak_bytes": plan})())

    def make(x):
        probes.append(x)
        return x

    # peak x - fit <= 0 exactly for x <= fit
    found, plan = chain.largest(None, 0, lambda x: make(x) - fit, guess, top, bottom)
    want = max([x for x in range(bottom, top + 1) if x <= fit], default=bottom - 1)
    assert found == want and (plan is None) == (want < bottom)
    assert len(probes) <= 2 * top.bit_length() + 3
    if guess == fit + 1 and fit >= bottom:
        assert len(probes) == 2
    if fit < bottom and guess > bottom:
        assert len(probes) <= 3
    # Peaks of a slope the caller knows, guesses wrongly or not at all, and staircases (the same peak over a
    # run of x, as Revolve's plans give): the same answer as the scan, in few probes.
    slope, width = rng.randint(1, 300), rng.randint(1, 50)
    for per_x in (None, slope, slope * rng.choice([0.2, 5.0])):
        for peak in (lambda x: slope * (x - fit), lambda x: slope * (x // width - fit // width)):
            probes.clear()
            found, plan = chain.largest(None, 0, lambda x: make(x) and peak(x), guess, top, bottom, per_x)
            want = max([x for x in range(bottom, top + 1) if peak(x) <= 0], default=bottom - 1)
            assert found == want and (plan is None) == (want < bottom), (per_x, found, want)
            assert len(probes) <= 4 * top.bit_length() + 4
