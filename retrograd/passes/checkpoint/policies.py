"""solve(problem, budget, policy): the planner's entry point, choosing among the exact, chain and greedy solvers.

policy "budget": the least recomputation cost whose simulated peak fits the budget, ties broken by
the lower peak (with FLOP costs a matmul or conv costs more than the cheap ops that could replace it;
the greedy descent also tries everything else before them). Revolve on uniform chain adjoints; the
heterogeneous-chain DP (rotor.py) among the candidates on other chain adjoints; exact
(MILP) for problems of up to EXACT_NODES nodes when scipy is importable; otherwise the greedy
descent (its plan pruned of recomputations the descent's own peak does not need) and Chen-style
segmentations of several lengths, each with recomputations shared between close uses (share.py),
the best that fits. policy "sqrt": Chen et al.'s segmentation.
policy "cheap": recompute only cheap kinds, each from values live where it is needed (no chains
of recomputation), to the least peak that gives; no budget (PyTorch's default partitioner's choice).
"""

from __future__ import annotations

from functools import lru_cache

from retrograd.passes.checkpoint import chain, exact, greedy, rotor
from retrograd.passes.checkpoint.share import share
from retrograd.passes.checkpoint.problem import CHEAP_KINDS, HEAVY_KINDS, InfeasibleBudget, Problem, Schedule
from retrograd.passes.checkpoint.simulate import simulate

EXACT_NODES = 32
CHAIN_EXACT_NODES = 16
SEGMENTS = (2, 3, 4, 6, 8, 16, 32)
POLICIES = ("budget", "sqrt", "cheap")


def cheap_only(problem: Problem) -> tuple[bool, ...]:
    return tuple(r and k in CHEAP_KINDS for r, k in zip(problem.recomputable, problem.kinds))


def light_only(problem: Problem) -> tuple[bool, ...]:
    """Recomputable nodes that are not matmul, conv or pool."""
    return tuple(r and k not in HEAVY_KINDS for r, k in zip(problem.recomputable, problem.kinds))


def solve(problem: Problem, budget: int | None = None, policy: str = "budget") -> Schedule:
    """A Schedule for `problem` (see the module docstring); InfeasibleBudget when no plan fits the budget."""
    if policy == "cheap":
        return greedy.least_peak(problem, cheap_only(problem), single=True)[0]
    if policy == "sqrt":
        from retrograd.passes.checkpoint.sqrt import sqrt_schedule

        return sqrt_schedule(problem)
    if policy != "budget":
        raise ValueError(f"unknown checkpoint policy {policy!r} (one of {', '.join(POLICIES)})")
    if budget is None:
        return Schedule()
    budget = int(budget)
    plan = plan_budget(problem, budget)
    if plan is None:
        raise InfeasibleBudget(budget, least_feasible(problem))
    return plan


def _use_exact(problem: Problem) -> bool:
    # Past CHAIN_EXACT_NODES a chain is Revolve's alone: its MILP (the least peak above all) takes HiGHS
    # seconds from 26 nodes on (an 8-layer adjoint); smaller ones, with uneven sizes, the MILP may beat.
    if problem.n > EXACT_NODES or (problem.n > CHAIN_EXACT_NODES and chain.detect(problem) is not None):
        return False
    return exact.available()


def _exact_is_model(problem: Problem) -> bool:
    """The MILP's memory is the simulator's (no aliases)."""
    return all(a is None for a in problem.alias_of)


def plan_budget(problem: Problem, budget: int) -> Schedule | None:
    """The "budget" policy's plan, or None when no solver finds one within the budget."""
    ch = chain.detect(problem)
    if ch is not None:
        s = chain.solve_chain(problem, budget, ch)
        if s is not None:
            return s
    if budget < lower_bound(problem):
        return None
    found = []
    # A heterogeneous chain adjoint: the optimal persistent plan of the discretized-memory DP (rotor.py).
    rot = rotor.solve_rotor(problem, budget) if ch is None else None
    if rot is not None:
        found.append(rot)
    # Light kinds first, then everything: the descent recomputes a matmul only when the rest does not fit.
    descent = greedy.descend(problem, budget, light_only(problem))
    if _use_exact(problem):
        # Proving a MILP infeasible is slow; the least peak, when the descent found nothing, is not.
        least = exact.exact_least_peak(problem) if descent is None else None
        if least is not None and budget < least[0] and _exact_is_model(problem):
            return None
        s = exact.exact_plan(problem, budget)
        if s is not None:
            if _exact_is_model(problem):
                return s
            found.append(s)
        elif least is not None and simulate(problem, least[1]).peak_bytes <= budget:
            found.append(least[1])
    sims = {}
    if descent is not None:
        descent, sims[id(descent)] = _shared(problem, descent[0])
        found.append(descent)
    ranks = {id(s): _rank(problem, s, sims.get(id(s))) for s in found}
    if not _use_exact(problem):
        # Chen-style segmentations of several lengths: plans fixed in advance, taken when they fit better.
        for s, sim in _segment_plans(problem, _bound(problem, ranks.values())):
            if sim.peak_bytes <= budget:
                s, sims[id(s)] = _shared(problem, s)
                ranks[id(s)] = _rank(problem, s, sims[id(s)])
                found.append(s)
    if not found:
        return None
    return min(found, key=lambda s: ranks[id(s)])


def _bound(problem: Problem, ranks) -> tuple | None:
    """(heavy, extra cost) of the best plan found, past which a segmentation cannot be chosen; None on
    problems small enough for sharing (which lowers a plan's cost after it is built)."""
    if problem.n <= greedy.BATCH_NODES:
        return None
    return min((r[:2] for r in ranks), default=None)


@lru_cache(maxsize=32)
def _shared(problem: Problem, schedule: Schedule):
    """(plan, simulation): the plan with recomputations shared between uses where its own peak allows
    (on problems small enough for the descent's pruning). The limit is the plan's own peak, not the
    budget: a plan then depends on the budget only through the descent's first fit, which keeps plans
    monotone in the budget. Cached: a sweep of budgets meets the same plans again."""
    sim = simulate(problem, schedule, check=False)
    if problem.n > greedy.BATCH_NODES:
        return schedule, sim
    return share(problem, schedule, sim.peak_bytes, sim)


@lru_cache(maxsize=8)
def _segment_plans(problem: Problem, bound: tuple | None = None) -> tuple:
    """(plan, simulation) of each Chen-style segmentation of SEGMENTS' lengths that recomputes something,
    leaving out those whose (heavy, extra cost) rank below `bound` (not chosen anyway: ranks then break
    ties by the peak and the earlier plan). Bounded, a segmentation whose recomputations reach back
    through the earlier segments (O(n^2) of them) stops being built once it costs more than the bound."""
    from retrograd.passes.checkpoint.sqrt import segment_schedule

    worse = None
    if bound is not None:
        heavy_b, extra_b = bound
        extra_b *= 1 + 1e-9  # sums in another order: a tie must not count as worse

        def worse(heavy, extra):
            return (heavy and not heavy_b) or (heavy == heavy_b and extra > extra_b)

    base = _base_planner(problem)
    plans = (segment_schedule(problem, size, base, worse) for size in SEGMENTS)
    return tuple((s, simulate(problem, s, check=False)) for s in plans if s is not None and s.recompute)


@lru_cache(maxsize=8)
def _base_planner(problem: Problem) -> greedy.Planner:
    """The unplanned Planner the segmentations start from (one store-all simulation per problem)."""
    return greedy.Planner(problem)


def _rank(problem: Problem, schedule: Schedule, sim=None):
    sim = sim or simulate(problem, schedule, check=False)
    heavy = sum(problem.costs[v] for st in schedule.recompute for v in st if problem.kinds[v] in HEAVY_KINDS)
    return (heavy > 0, sim.extra_cost, sim.peak_bytes)


def least_feasible(problem: Problem) -> int:
    """The least budget `solve` meets: exact (MILP) on small problems without aliases (or when the
    descent reaches the lower bound), otherwise the lowest peak of the plans tried (an upper bound)."""
    best = None
    if _use_exact(problem) and lower_bound(problem) < greedy_least(problem):
        least = exact.exact_least_peak(problem)
        if least is not None:
            if _exact_is_model(problem):
                return least[0]
            best = simulate(problem, least[1]).peak_bytes
    ch = chain.detect(problem)
    if ch is not None:
        p1 = simulate(problem, chain.chain_schedule(problem, ch, 1)).peak_bytes
        best = p1 if best is None else min(best, p1)
    if not _use_exact(problem):
        for _, sim in _segment_plans(problem):
            best = sim.peak_bytes if best is None else min(best, sim.peak_bytes)
    low = greedy_least(problem)
    return low if best is None else min(best, low)


@lru_cache(maxsize=8)
def greedy_least(problem: Problem) -> int:
    return greedy.lowest(problem, light_only(problem))


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
