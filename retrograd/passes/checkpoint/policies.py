"""solve(problem, budget, policy): the planner's entry point.

A solver is `(Problem, budget) -> Schedule | None`: a plan whose simulated peak fits the budget, or None.
Policy "budget" takes the least recomputation cost within the budget, ties broken by the lower peak
(a plan recomputing a matmul, conv or pool ranks after every plan that does not). Its solvers, each
the only one to find the best plan somewhere (tests/passes/checkpoint):
- revolve (chain.py): Revolve's optimum on uniform chain adjoints; taken as soon as it fits;
- exact (exact.py): the MILP, on problems of up to EXACT_NODES nodes when scipy is importable; taken
  as soon as it fits when its memory is the simulator's (no aliases);
- chain_dp (rotor.py): the heterogeneous-chain DP, on other chain adjoints;
- heuristic: the greedy descent (greedy.py) and Chen-style segmentations of SEGMENTS' lengths (sqrt.py),
  each with recomputations shared between close uses (share.py), the best that fits.
Every limit is a count (nodes, trials, levels), never wall-clock time: a plan depends on its input only.
Policies "sqrt" (Chen et al.'s segmentation) and "cheap" (recompute only the nodes `cheap` allows, each
from values live where it is needed, to the least peak that gives) take no budget.
"""

from __future__ import annotations

from typing import Callable

from retrograd.passes.checkpoint import chain, exact, greedy, rotor
from retrograd.passes.checkpoint.problem import CHEAP_KINDS, HEAVY_KINDS, InfeasibleBudget, Problem, Schedule
from retrograd.passes.checkpoint.share import share
from retrograd.passes.checkpoint.simulate import simulate
from retrograd.passes.checkpoint.sqrt import segment_schedule, sqrt_schedule

Solver = Callable[[Problem, int], "Schedule | None"]

EXACT_NODES = 32
CHAIN_EXACT_NODES = 16
SEGMENTS = (2, 3, 4, 6, 8, 16, 32)


def cheap(problem: Problem) -> tuple[bool, ...]:
    """The "cheap" policy's predicate: pointwise ops, views and reductions may be recomputed."""
    return tuple(r and k in CHEAP_KINDS for r, k in zip(problem.recomputable, problem.kinds))


def light(problem: Problem) -> tuple[bool, ...]:
    """Recomputable nodes that are not matmul, conv or pool (the descent's first pass)."""
    return tuple(r and k not in HEAVY_KINDS for r, k in zip(problem.recomputable, problem.kinds))


POLICIES = {
    "budget": None,
    "sqrt": sqrt_schedule,
    "cheap": lambda problem: greedy.least_peak(problem, cheap(problem), single=True)[0],
}


def solve(problem: Problem, budget: int | None = None, policy: str = "budget") -> Schedule:
    """A Schedule for `problem` (see the module docstring); InfeasibleBudget when no plan fits the budget."""
    if policy not in POLICIES:
        raise ValueError(f"unknown checkpoint policy {policy!r} (one of {', '.join(POLICIES)})")
    if policy != "budget":
        return POLICIES[policy](problem)
    if budget is None:
        return Schedule()
    plan = plan_budget(problem, int(budget))
    if plan is None:
        raise InfeasibleBudget(int(budget), least_feasible(problem))
    return plan


def use_exact(problem: Problem) -> bool:
    # Past CHAIN_EXACT_NODES a chain is Revolve's or the DP's alone: the MILP's node limit is reached from
    # 26 nodes on (an 8-layer adjoint); smaller ones, with uneven sizes, the MILP may beat.
    if problem.n > EXACT_NODES or (problem.n > CHAIN_EXACT_NODES and chain.detect(problem) is not None):
        return False
    return exact.available()


def solvers(problem: Problem) -> list[tuple[Solver, bool]]:
    """(solver, optimal) for the solvers that apply to `problem`, in the order they are tried; an optimal
    solver's plan is taken as soon as it fits."""
    found = chain.detect(problem)
    uniform = found is not None and found.uniform(problem)
    out: list[tuple[Solver, bool]] = [(chain.revolve, True)] if uniform else []
    if use_exact(problem):
        out.append((exact.solve, all(a is None for a in problem.alias_of)))
    if found is not None and not uniform:
        out.append((rotor.chain_dp, False))
    out.append((heuristic, False))
    return out


def plan_budget(problem: Problem, budget: int) -> Schedule | None:
    """The "budget" policy's plan, or None when no solver finds one within the budget."""
    if budget < lower_bound(problem):
        return None
    found = []
    for solver, optimal in solvers(problem):
        s = solver(problem, budget)
        if s is not None and optimal:
            return s
        if s is not None:
            found.append(s)
    return min(found, key=lambda s: rank(problem, s)) if found else None


def heuristic(problem: Problem, budget: int) -> Schedule | None:
    """The scalable solver: the greedy descent's plan (light kinds first), then, past the exact solver's
    size, segmentations that fit and cost no more than the descent's plan; each shared (share.py)."""
    plans = []
    descent = greedy.descend(problem, budget, light(problem))
    if descent is not None:
        plans.append(shared(problem, descent[0]))
    if not use_exact(problem):
        bound = min((rank(problem, s, sim)[:2] for s, sim in plans), default=None) if problem.n > greedy.BATCH_NODES else None
        for s, sim in segment_plans(problem, bound):
            if sim.peak_bytes <= budget:
                plans.append(shared(problem, s))
    return min(plans, key=lambda ps: rank(problem, *ps))[0] if plans else None


def shared(problem: Problem, schedule: Schedule):
    """(plan, simulation): the plan with recomputations shared between uses where its own peak allows
    (on problems small enough for the descent's pruning). The limit is the plan's own peak, not the
    budget: a plan then depends on the budget only through the descent's first fit, which keeps plans
    monotone in the budget."""
    sim = simulate(problem, schedule, check=False)
    if problem.n > greedy.BATCH_NODES:
        return schedule, sim
    return share(problem, schedule, sim.peak_bytes, sim)


def segment_plans(problem: Problem, bound: tuple | None = None) -> list:
    """(plan, simulation) of each Chen-style segmentation of SEGMENTS' lengths that recomputes something,
    leaving out those whose (heavy, extra cost) rank below `bound` (not chosen anyway). Bounded, a
    segmentation whose recomputations reach back through the earlier segments (O(n^2) of them) stops
    being built once it costs more than the bound."""
    worse = None
    if bound is not None:
        heavy_b, extra_b = bound
        extra_b *= 1 + 1e-9  # sums in another order: a tie must not count as worse

        def worse(heavy, extra):
            return (heavy and not heavy_b) or (heavy == heavy_b and extra > extra_b)

    base = greedy.Planner(problem)
    plans = (segment_schedule(problem, size, base, worse) for size in SEGMENTS)
    return [(s, simulate(problem, s, check=False)) for s in plans if s is not None and s.recompute]


def rank(problem: Problem, schedule: Schedule, sim=None):
    sim = sim or simulate(problem, schedule, check=False)
    heavy = sum(problem.costs[v] for st in schedule.recompute for v in st if problem.kinds[v] in HEAVY_KINDS)
    return (heavy > 0, sim.extra_cost, sim.peak_bytes)


def least_feasible(problem: Problem) -> int:
    """The least budget `solve` meets: exact (MILP) on small problems without aliases (or when the
    descent reaches the lower bound), otherwise the lowest peak of the plans tried (an upper bound)."""
    low = greedy.lowest(problem, light(problem))
    best = []
    if use_exact(problem) and lower_bound(problem) < low:
        least = exact.exact_least_peak(problem)
        if least is not None:
            if all(a is None for a in problem.alias_of):
                return least[0]
            best.append(simulate(problem, least[1]).peak_bytes)
    found = chain.detect(problem)
    if found is not None and found.uniform(problem):
        best.append(simulate(problem, chain.chain_schedule(problem, found, 1)).peak_bytes)
    if not use_exact(problem):
        best.extend(sim.peak_bytes for _, sim in segment_plans(problem))
    return min(best + [low])


def lower_bound(problem: Problem) -> int:
    """No plan's peak is lower: parameters, plus each node's distinct input buffers and its own
    (unless it may reuse an input's) while it is computed."""
    p = problem
    root = list(range(p.n))
    for v in range(p.n):
        if p.alias_of[v] is not None:
            root[v] = root[p.alias_of[v]]
    best = 0
    for v in range(p.n):
        need = sum(p.sizes[r] for r in {root[d] for d in p.deps[v]})
        own = 0 if p.alias_of[v] is not None or p.inplace[v] else p.sizes[v]
        best = max(best, need + own)
    return p.pinned_bytes + best
