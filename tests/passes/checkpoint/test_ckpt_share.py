"""Sharing recomputations between close uses: valid, never dearer, within the limit (by the naive simulator), and on models."""

from __future__ import annotations

import random
from itertools import combinations

import pytest
from passes.checkpoint.helpers import Builder, adjoint_module, bitwise_equal, inputs_for, models, naive_peak, random_problem, random_schedule, run

from retrograd.passes import plan_checkpoint
from retrograd.passes.checkpoint import Schedule, simulate
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.greedy import descend
from retrograd.passes.checkpoint.policies import of_kinds, share
from retrograd.passes.checkpoint.problem import LIGHT_KINDS


def _entries(s: Schedule) -> set:
    return {(t, v) for t, group in enumerate(s.recompute) for v in group}


@pytest.mark.parametrize("seed", range(40))
def test_share_is_valid_never_dearer_and_within_the_limit(seed):
    rng = random.Random(9000 + seed)
    p = random_problem(rng, rng.randint(6, 30), extras=seed % 2 == 1)
    s = random_schedule(rng, p, density=0.4)
    base_peak, base_cost = naive_peak(p, s)
    limit = base_peak + rng.choice([0, 4, 16, 64])
    out, sim = share(p, s, limit)
    assert simulate(p, out).valid
    peak, cost = naive_peak(p, out)
    assert (peak, cost) == (sim.peak_bytes, pytest.approx(sim.extra_cost))
    assert peak <= limit
    assert cost <= base_cost + 1e-9
    assert _entries(out) <= _entries(s)  # only removals


def _two_use_problem():
    """a (cost 10) -> b -> c -> big (32 bytes) -> d, then a backward reading b at g1 and at g3: b idle across big."""
    bld = Builder()
    a = bld.add(8, 10, (), "matmul")
    b = bld.add(8, 1, (a,), "elementwise")
    c = bld.add(8, 1, (b,), "elementwise")
    big = bld.add(32, 1, (c,), "elementwise")
    d = bld.add(8, 1, (big,), "elementwise")
    g1 = bld.add(8, 1, (d, b), "other")
    g2 = bld.add(8, 1, (g1,), "other")
    g3 = bld.add(8, 1, (g2, b), "other", output=True)
    return bld.build(pinned_bytes=16), (a, b, g1, g3)


def _brute_force(p, s, limit):
    """The cheapest plan made by removing recomputations from s (every subset), within the limit."""
    entries = sorted(_entries(s))
    best = None
    for k in range(len(entries) + 1):
        for gone in combinations(entries, k):
            keep = {}
            for t, v in entries:
                if (t, v) not in gone:
                    keep.setdefault(t, []).append(v)
            cand = Schedule.from_lists(keep)
            sim = simulate(p, cand)
            if sim.valid and sim.peak_bytes <= limit and (best is None or sim.extra_cost < best):
                best = sim.extra_cost
    return best


def test_a_chain_recomputed_for_one_use_serves_the_next():
    p, (a, b, g1, g3) = _two_use_problem()
    # b dropped after c; recomputed (with a) before g1 and again before g3
    s = Schedule.from_lists({g1: [a, b], g3: [a, b]})
    sim0 = simulate(p, s)
    assert sim0.extra_cost == 22
    unplanned = naive_peak(p, Schedule())[0]
    assert unplanned == 16 + 8 + 8 + 32  # b idle across big
    # room for b from g1 to g3 but not across big: one recomputation of a and b serves both uses
    limit = 16 + 8 + 32
    assert sim0.peak_bytes <= limit
    out, sim = share(p, s, limit)
    assert sim.extra_cost == _brute_force(p, s, limit) == 11
    assert naive_peak(p, out) == (sim.peak_bytes, 11)
    for lim in range(sim0.peak_bytes, unplanned + 1, 4):
        assert share(p, s, lim)[1].extra_cost == _brute_force(p, s, lim)


@pytest.mark.parametrize("seed", range(12))
def test_share_matches_brute_force_removals_on_small_plans(seed):
    """Greedy removal finds the cheapest subset of removals on small plans (independent brute force)."""
    rng = random.Random(9500 + seed)
    while True:  # a plan small enough for the brute force
        p = random_problem(rng, rng.randint(5, 9))
        s = random_schedule(rng, p, density=0.5)
        if 1 <= s.count <= 7:
            break
    limit = naive_peak(p, s)[0] + rng.choice([0, 8, 24])
    best = _brute_force(p, s, limit)
    _, sim = share(p, s, limit)
    assert sim.extra_cost <= best * 1.5 + 1e-9  # greedy: near the optimum of the removal problem


def test_resnet_descent_plan_gets_cheaper_by_sharing():
    mod = adjoint_module(models.resnet_text(stages=2, blocks=4, channels=4, size=16, batch=1))
    p = extract(mod["main_adjoint"]).problem
    full = simulate(p).peak_bytes
    budget = p.pinned_bytes + (full - p.pinned_bytes) * 6 // 10  # the least feasible is about 56%
    plan = descend(p, budget, of_kinds(p, LIGHT_KINDS))
    assert plan is not None
    s, sim = plan
    out, shared = share(p, s, sim.peak_bytes, sim)
    assert shared.peak_bytes <= sim.peak_bytes
    assert shared.extra_cost < sim.extra_cost
    # and the pass (which shares) is measured within budget with bitwise-equal results
    args = inputs_for(mod["main_adjoint"])
    ref, _ = run(mod, "main_adjoint", args)
    planned, report = plan_checkpoint(mod, "main_adjoint", budget)
    got, peak = run(planned, "main_adjoint", args)
    assert peak <= budget and peak == report.predicted_peak
    assert bitwise_equal(got, ref)
    assert report.extra_cost <= shared.extra_cost + 1e-6
