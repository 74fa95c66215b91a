"""Share recomputations: keep a recomputed value until its next use instead of recomputing it again, where memory allows.

The greedy descent and the segmentations recompute, before each later use, the whole chain a dropped
value needs, so a chain recomputed for one use is often rebuilt for the next use a few stages on.
`share` removes recomputations from a plan, dearest first: the later use then reads the earlier
instance (an original or a recomputed one), which lives longer instead; recomputations nothing reads
any more go with it. A removal is kept when the simulated peak stays within the limit.
"""

from __future__ import annotations

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import Simulation, events, simulate

# Removals tried per plan: each costs one simulation.
MAX_TRIALS = 600


def _drop_unread(problem: Problem, groups: list[list[int]]) -> None:
    """Remove, in place, the recomputations whose instance nothing reads, and then those only they read
    (one pass with reader counts: removing an unread instance changes no other read)."""
    outputs = set(problem.outputs)
    nodes, stages, reads, last_use = events(problem, Schedule(tuple(tuple(g) for g in groups)), check=False)
    readers = [0] * len(nodes)
    for r in reads:
        for i in r:
            readers[i] += 1
    stack = [e for e in range(len(nodes)) if last_use[e] == e and stages[e] != nodes[e] and nodes[e] not in outputs]
    while stack:
        e = stack.pop()
        groups[stages[e]].remove(nodes[e])
        for i in reads[e]:
            readers[i] -= 1
            if readers[i] == 0 and stages[i] != nodes[i] and nodes[i] not in outputs:
                stack.append(i)


def _exclusive_cost(problem: Problem, groups: list[list[int]], t: int, v: int) -> float:
    """Cost of v's recomputation at stage t and of those of stage t only v's recomputation reads."""
    group = groups[t]
    pos = {u: i for i, u in enumerate(group)}
    gone = {v}
    cost = problem.costs[v]
    # Readers within the group come after their inputs; scan backwards from v.
    readers: dict[int, set] = {}
    for u in group:
        for d in problem.deps[u]:
            if d in pos:
                readers.setdefault(d, set()).add(u)
    # the stage's own node and later stages may read any of them: only count those read solely by gone ones
    later = set(problem.deps[t])
    for u in reversed(group[: pos[v]]):
        rs = readers.get(u, set())
        if rs and rs <= gone and u not in later:
            gone.add(u)
            cost += problem.costs[u]
    return cost


def share(problem: Problem, schedule: Schedule, limit: int, sim: Simulation | None = None) -> tuple[Schedule, Simulation]:
    """A plan recomputing no more than `schedule` whose peak stays within max(limit, the plan's own peak)."""
    sim = sim or simulate(problem, schedule, check=False)
    if not schedule.count:
        return schedule, sim
    limit = max(limit, sim.peak_bytes)
    groups = [list(g) for g in schedule.recompute]
    trials = 0
    changed = True
    while changed and trials < MAX_TRIALS:
        changed = False
        order = sorted(
            ((t, v) for t, g in enumerate(groups) for v in g),
            key=lambda tv: (-_exclusive_cost(problem, groups, *tv), -tv[0], tv[1]),
        )
        for t, v in order:
            if v not in groups[t] or trials >= MAX_TRIALS:
                continue
            trials += 1
            trial = [list(g) for g in groups]
            trial[t].remove(v)
            _drop_unread(problem, trial)
            s = Schedule(tuple(tuple(g) for g in trial))
            ts = simulate(problem, s, check=False)
            if ts.peak_bytes <= limit and ts.extra_cost < sim.extra_cost:
                groups, sim, changed = trial, ts, True
    while groups and not groups[-1]:
        groups.pop()
    return Schedule(tuple(tuple(g) for g in groups)), sim
