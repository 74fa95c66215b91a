"""The heterogeneous-chain DP (chain.py): against brute force over every plan that recomputes right before
the backward reads, Revolve's optimum on uniform chains, and the matmul+relu chain through the pass."""

from __future__ import annotations

import itertools
import random

from passes.checkpoint.helpers import adjoint_module, chain_problem, hetero_chain, inputs_for, models, revolve_extra, run

from retrograd.passes import plan_checkpoint
from retrograd.passes.checkpoint import Problem, Schedule, chain, simulate
from retrograd.passes.checkpoint.extract import extract


def brute_force(p: Problem, budget: int, need: dict) -> float | None:
    """Least extra cost over every schedule recomputing any forward nodes right before each read's first
    backward stage (the class of plans the DP builds), simulated; None when none fits."""
    reads = sorted(need, reverse=True)
    options = [[c for size in range(r + 2) for c in itertools.combinations(range(r + 1), size)] for r in reads]
    best = None
    for combo in itertools.product(*options):
        sim = simulate(p, Schedule.from_lists({need[r]: list(c) for r, c in zip(reads, combo) if c}))
        if sim.valid and sim.peak_bytes <= budget and (best is None or sim.extra_cost < best):
            best = sim.extra_cost
    return best


def test_dp_matches_brute_force_on_random_heterogeneous_chains():
    matched = cases = 0
    for seed in range(40):
        rng = random.Random(seed)
        p = hetero_chain(rng, rng.randint(3, 4))
        need = chain.detect(p)
        high = simulate(p).peak_bytes
        low = min(simulate(p, Schedule.from_lists({need[r]: list(range(r + 1)) for r in need})).peak_bytes, high)
        for frac in (0, 1, 2, 3, 4):
            budget = low + (high - low) * frac // 4
            ref = brute_force(p, budget, need)
            plan = chain.chain_dp(p, budget)
            if plan is None:
                continue
            sim = simulate(p, plan)
            assert sim.valid and sim.peak_bytes <= budget
            assert ref is not None and sim.extra_cost >= ref - 1e-9  # the brute force covers the DP's plans
            cases += 1
            matched += sim.extra_cost <= ref + 1e-9
        # With room for everything the DP keeps everything.
        assert simulate(p, chain.chain_dp(p, high)).extra_cost == 0
    assert cases >= 150
    assert matched >= 0.97 * cases, f"{matched} of {cases}"


def test_dp_finds_revolves_optimum_on_uniform_chains():
    """On the executor's uniform chain (steps overwrite their dying input), the DP given the peak of
    Revolve's plan with c slots recomputes exactly Revolve's optimum (Griewank & Walther's DP, in
    passes/checkpoint/helpers), and never more than Revolve's plan when nothing is written in place."""
    for steps in (8, 12, 20, 30):
        for inplace in (True, False):
            p = chain_problem(steps, inplace=inplace)
            ch = chain.detect(p)
            for c in range(2, 8):
                budget = simulate(p, chain.chain_schedule(ch, c)).peak_bytes
                sim = simulate(p, chain.chain_dp(p, budget))
                assert sim.valid and sim.peak_bytes <= budget
                if inplace:
                    assert sim.extra_cost == revolve_extra(steps, c), (steps, c)
                else:
                    assert sim.extra_cost <= revolve_extra(steps, c), (steps, c)


def test_unread_nodes_no_smaller_than_the_next_read_are_not_checkpoints():
    # m0 -> h0 -> m1 -> h1: the backward reads h1, h0 only; m1 is as big as h1, m0 smaller than h0.
    p = Problem(
        sizes=[4, 8, 8, 8, 4, 4],
        costs=[10, 1, 10, 1, 1, 1],
        deps=[(), (0,), (1,), (2,), (3,), (4, 1)],
        recomputable=[True] * 4 + [False] * 2,
        outputs=(5,),
    )
    het = chain.chain_costs(p, chain.detect(p))
    assert het.reads == [1, 3] and het.cands == [0, 1, 3]


def test_matmul_relu_chain_is_planned_by_the_dp_and_measured_within_budget():
    """The adjoint of a matmul+relu chain is a heterogeneous chain (matmuls cost more than relus; the
    relu overwrites the matmul's result, which the backward never reads): the pass meets each budget as
    measured, at no more cost than the DP's own plan."""
    mod = adjoint_module(models.matmul_relu_chain_text(12, width=8, batch=32))
    func = mod["main_adjoint"]
    problem = extract(func).problem
    het = chain.chain_costs(problem, chain.detect(problem))
    assert het is not None and not chain.uniform(problem, chain.detect(problem))
    args = inputs_for(func)
    _, full = run(mod, "main_adjoint", args)
    pinned = problem.pinned_bytes
    for fraction in (0.9, 0.75, 0.6, 0.5):
        budget = pinned + int((full - pinned) * fraction)
        dp = chain.chain_dp(problem, budget)
        planned, report = plan_checkpoint(mod, "main_adjoint", budget)
        _, peak = run(planned, "main_adjoint", args)
        assert peak <= budget and peak == report.predicted_peak
        if dp is not None:
            assert report.extra_cost <= simulate(problem, dp).extra_cost + 1e-6


def test_chains_too_long_for_the_dp_are_left_to_the_other_solvers():
    # 1,000 uneven steps: the DP's table would hold ~10^8 (i, k, read) triples; detect declines at once.
    rng = random.Random(1)
    p = hetero_chain(rng, 1000)
    assert chain.detect(p) is not None and chain.chain_costs(p, chain.detect(p)) is None
    q = hetero_chain(rng, 40)
    assert chain.chain_costs(q, chain.detect(q)) is not None
