"""solve(problem, budget, policy): the planner's entry point (docs/checkpoint.md). A solver is `(Problem,
budget) -> Schedule | None`. Policy "budget" takes the least recomputation cost within the budget, ties to
the lower peak (plans recomputing a matmul, conv or pool last), from solvers each alone best somewhere
(tests): chain (Revolve, optimal: taken as soon as it fits; the DP), exact (the MILP on up to EXACT_NODES
nodes, with scipy; taken as soon as it fits without aliases), the greedy descent (then `share`). Limits are
counts, never time. "sqrt" and "cheap" are predicates over the problem, like JAX's `save_*` policies."""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from math import isqrt

from retrograd.passes.checkpoint import chain, exact, greedy
from retrograd.passes.checkpoint.problem import CHEAP_KINDS, LIGHT_KINDS, InfeasibleBudget, Problem, Schedule
from retrograd.passes.checkpoint.simulate import Simulation, events, simulate

EXACT_NODES = 32
CHAIN_EXACT_NODES = 16
MAX_TRIALS = 600  # removals `share` tries per plan: each costs one simulation


def of_kinds(problem: Problem, kinds) -> tuple[bool, ...]:
    """Recomputable nodes of `kinds`: CHEAP_KINDS for the "cheap" policy, LIGHT_KINDS for the descent's first pass."""
    return tuple(r and k in kinds for r, k in zip(problem.recomputable, problem.kinds))


def sqrt_saved(problem: Problem, pl: greedy.Planner, across: list) -> tuple[bool, ...]:
    """The "sqrt" policy's predicate (Chen et al. 2016): of the k values `across` the unplanned peak (in
    an adjoint: the forward values kept for the backward), the last of each segment of about sqrt(k) is
    saved, segments ending at articulation points (no dependency jumps over them) where there are some."""
    save = [True] * problem.n
    if len(across) < 3:
        return tuple(save)
    t, reach, cut, run = pl.sim.peak_stage, 0, set(), 0
    for v in range(t + 1):
        if reach <= v:
            cut.add(v)
        reach = max([reach] + [j for j in pl.points[v][1:] if j <= t])
    size = max(2, isqrt(len(across) - 1) + 1)
    for idx, (v, _) in enumerate(across[:-1]):
        run += 1
        if run >= size and (v in cut or not any(w in cut for w, _ in across[idx + 1 : idx + size])):
            run = 0  # v ends its segment: saved
        else:
            save[v] = False
    return tuple(save)


def remat(problem: Problem, saved) -> Schedule:
    """Apply a save predicate `saved(problem, planner, across)`, across: (value, gap) of the values idle across
    the unplanned peak, in program order, each recomputable alone (not reading a value that cannot be). Each
    run of unsaved values between two saved ones is recomputed together before the first later use of any."""
    pl = greedy.Planner(problem)
    t, pts = pl.sim.peak_stage, pl.points
    across = [(v, k) for v in range(max(t, 0)) if (k := pl.gap(v, t)) and pts[v][k - 1] < t < pts[v][k] != problem.n
              and problem.recomputable[v] and pl.closure(v, pts[v][k], {(v, k)}, set(), [])]
    save = saved(problem, pl, across)
    runs = [list(run) for kept, run in groupby(across, key=lambda g: save[g[0]]) if not kept]
    at = {g: min(pts[v][k] for v, k in r) for r in runs for g in r}
    return pl.build(set(at), at) or Schedule()


POLICIES = {
    "budget": lambda problem: Schedule(),  # without a budget
    "sqrt": lambda problem: remat(problem, sqrt_saved),
    "cheap": lambda problem: greedy.descend(problem, None, of_kinds(problem, CHEAP_KINDS), single=True)[0],
}


def solve(problem: Problem, budget: int | None = None, policy: str = "budget", least=None) -> Schedule:
    """A Schedule for `problem` (see the module docstring); InfeasibleBudget when no plan fits the budget.
    `least(problem)`: (the least feasible budget, a plan meeting it), least_plan by default."""
    if policy not in POLICIES:
        raise ValueError(f"unknown checkpoint policy {policy!r} (one of {', '.join(POLICIES)})")
    if policy != "budget" or budget is None:
        return POLICIES[policy](problem)
    plan = plan_budget(problem, int(budget))
    if plan is None:
        # A heuristic's plan for a budget may peak lower than any plan it finds for less: the plan of the
        # least feasible budget is taken when it fits, so that every budget from it up is met.
        least, plan = (least or least_plan)(problem)
        if plan is None or least > budget:
            raise InfeasibleBudget(budget, least)
    return plan


def use_exact(problem: Problem, found) -> bool:
    # Past CHAIN_EXACT_NODES a chain (`found`) is Revolve's or the DP's alone: the MILP's node limit is
    # reached from 26 nodes on (an 8-layer adjoint); smaller ones, with uneven sizes, the MILP may beat.
    return problem.n <= (EXACT_NODES if found is None else CHAIN_EXACT_NODES) and exact.available()


def plan_budget(problem: Problem, budget: int) -> Schedule | None:
    """The "budget" policy's plan (see the module docstring), or None when no solver finds one that fits."""
    if budget < problem.pinned_bytes:
        return None  # not even the parameters fit (the MILP's unit count would be negative)
    found = chain.detect(problem)
    solvers: list = []  # (solver, optimal: taken as soon as it fits)
    if use_exact(problem, found):
        solvers.append((exact.solve, all(a is None for a in problem.alias_of)))
    if found and chain.uniform(problem, found):  # Revolve's optimum: first
        solvers.insert(0, (lambda p, b: chain.revolve(p, found, b), True))
    elif found:  # the DP's plan is ranked with the others
        solvers.append((lambda p, b: chain.chain_dp(p, b, found), False))
    plans = []
    for solver, optimal in solvers + [(heuristic, False)]:
        s = solver(problem, budget)
        if s is not None and optimal:
            return s
        plans += [s] if s is not None else []
    # A lone plan is not ranked (ranking simulates each plan).
    return plans[0] if len(plans) == 1 else min(plans, key=lambda s: rank(problem, s), default=None)


def heuristic(problem: Problem, budget: int) -> Schedule | None:
    """The greedy descent's plan (light kinds first), shared within its own peak, not the budget, on up to
    BATCH_NODES nodes (plans then depend on the budget through the descent's first fit alone: monotone)."""
    descent = greedy.descend(problem, budget, of_kinds(problem, LIGHT_KINDS))
    if descent is None or problem.n > greedy.BATCH_NODES:
        return None if descent is None else descent[0]
    return share(problem, descent[0], descent[1].peak_bytes, descent[1])[0]


def rank(problem: Problem, schedule: Schedule):
    sim = simulate(problem, schedule, check=False)
    heavy = sum(problem.costs[v] for st in schedule.recompute for v in st if problem.kinds[v] not in LIGHT_KINDS)
    return (heavy > 0, sim.extra_cost, sim.peak_bytes)


def least_feasible(problem: Problem) -> int:
    return least_plan(problem)[0]


def least_plan(problem: Problem) -> tuple[int, Schedule | None]:
    """(least peak, a plan reaching it), simulated: the MILP's on small problems without aliases, else the
    peak of the plan for the lowest peak of the plans tried (on long chains, see chain.MAX_REPEAT)."""
    found = chain.detect(problem)
    best = [greedy.descend(problem, None, of_kinds(problem, LIGHT_KINDS))[1].peak_bytes]
    least = exact.Model(problem).solve(None) if use_exact(problem, found) else None
    if least is not None and all(a is None for a in problem.alias_of):
        return simulate(problem, least[0], check=False).peak_bytes, least[0]  # the model's memory is the simulator's
    best += [simulate(problem, least[0]).peak_bytes] if least is not None else []
    if found and chain.uniform(problem, found):
        fewest = chain.chain_schedule(found, chain.fewest_slots(max(found) + 2))
        best.append(simulate(problem, fewest, check=False).peak_bytes)
    plan = plan_budget(problem, min(best))
    return (min(best), None) if plan is None else (simulate(problem, plan, check=False).peak_bytes, plan)


def _without(problem: Problem, groups: list[list[int]], t: int, v: int) -> list[list[int]]:
    """The groups without v's recomputation at stage t, nor the recomputations then unread (those only it
    read, then those only they read)."""
    outputs = set(problem.outputs)
    groups = [list(g) for g in groups]
    groups[t].remove(v)
    nodes, stages, reads, _ = events(problem, Schedule(groups), check=False)
    readers = Counter(i for r in reads for i in r)
    unread = lambda e: readers[e] == 0 and stages[e] != nodes[e] and nodes[e] not in outputs  # noqa: E731
    stack = [e for e in range(len(nodes)) if unread(e)]
    while stack:
        e = stack.pop()
        groups[stages[e]].remove(nodes[e])
        for i in reads[e]:
            readers[i] -= 1
            if unread(i):
                stack.append(i)
    return groups


def share(problem: Problem, schedule: Schedule, limit: int, sim: Simulation | None = None) -> tuple[Schedule, Simulation]:
    """A plan recomputing no more than `schedule` whose peak stays within max(limit, the plan's own peak):
    recomputations removed, dearest first, so that a later use reads an earlier one (docs/checkpoint.md)."""
    sim = sim or simulate(problem, schedule, check=False)
    limit, groups, trials, changed = max(limit, sim.peak_bytes), [list(g) for g in schedule.recompute], 0, True
    while changed and trials < MAX_TRIALS:
        changed = False
        # Dearest first: the least cost left without the recomputation (and those only it read).
        left = lambda tv: sum(problem.costs[u] for g in _without(problem, groups, *tv) for u in g)  # noqa: E731
        for t, v in sorted(((t, v) for t, g in enumerate(groups) for v in g), key=lambda tv: (left(tv), -tv[0], tv[1])):
            if trials < MAX_TRIALS and v in groups[t]:
                trials += 1
                trial = _without(problem, groups, t, v)
                ts = simulate(problem, Schedule(trial), check=False)
                if ts.peak_bytes <= limit and ts.extra_cost < sim.extra_cost:
                    groups, sim, changed = trial, ts, True
    while groups and not groups[-1]:
        groups.pop()
    return Schedule(groups), sim
