"""Each solver `plan_budget` runs earns its place: on some problem it alone finds the best-ranked plan (issue
20: exact for small problems, the chain DP for chains, Revolve on uniform chains past the DP, the heuristic
for the rest), and `plan_budget` returns a plan ranked at least as well as every solver's."""

from __future__ import annotations

import random

from optional import need
from passes.checkpoint.helpers import chain_problem, hetero_chain, random_problem, revolve_extra

from retrograd.passes.checkpoint import chain, exact, least_feasible, policies, simulate


def budgets(p, fractions=(0.1, 0.3, 0.5, 0.7, 0.9)):
    high, low = simulate(p).peak_bytes, least_feasible(p)
    return sorted({low + int((high - low) * f) for f in fractions})


def ranks(p, b, solvers):
    """{solver: rank of its plan} for the solvers that find one within b."""
    plans = {name: solve(p, b) for name, solve in solvers.items()}
    return {name: policies.rank(p, s) for name, s in plans.items() if s is not None}


def alone_best(p, b, solvers, name) -> bool:
    r = ranks(p, b, solvers)
    best = policies.plan_budget(p, b)
    for s in r.values():  # plan_budget takes the best of its solvers
        assert best is not None and policies.rank(p, best) <= s
    return name in r and all(r[name] < v for k, v in r.items() if k != name)


def test_the_milp_alone_finds_the_best_plan_on_small_problems():
    need("scipy.optimize")  # the exact solver's optional dependency
    wins = cases = 0
    for seed in range(8):
        rng = random.Random(seed)
        p = random_problem(rng, rng.randint(8, 14), extras=seed % 2 == 1)
        if not policies.use_exact(p, chain.detect(p)):
            continue
        for b in budgets(p):
            cases += 1
            wins += alone_best(p, b, {"exact": exact.solve, "heuristic": policies.heuristic}, "exact")
    assert cases >= 25 and wins >= 3, (wins, cases)


def test_the_chain_dp_alone_finds_the_best_plan_on_uneven_chains():
    wins = cases = 0
    for seed in range(8):
        rng = random.Random(seed)
        p = hetero_chain(rng, rng.randint(17, 30))  # past CHAIN_EXACT_NODES: no MILP
        found = chain.detect(p)
        assert not chain.uniform(p, found) and not policies.use_exact(p, found)
        solvers = {"dp": lambda q, b: chain.chain_dp(q, b, found), "heuristic": policies.heuristic}
        for b in budgets(p):
            cases += 1
            wins += alone_best(p, b, solvers, "dp")
    assert cases >= 30 and wins >= cases // 4, (wins, cases)


def test_revolve_alone_finds_the_best_plan_on_uniform_chains_too_long_for_the_dp():
    steps, size, pinned = 400, 8, 16
    p = chain_problem(steps, size=size, pinned=pinned)
    found = chain.detect(p)
    assert chain.uniform(p, found) and chain.chain_costs(p, found) is None and not policies.use_exact(p, found)
    for c in (4, 8, 30):  # c slots, the input counted: test_ckpt_chain.py's budget mapping
        budget = pinned + (c + 1) * size
        sim = simulate(p, chain.revolve(p, found, budget))
        assert sim.peak_bytes <= budget and sim.recomputed_count == revolve_extra(steps, c)
        other = policies.heuristic(p, budget)
        assert other is None or policies.rank(p, other) > policies.rank(p, chain.revolve(p, found, budget))
