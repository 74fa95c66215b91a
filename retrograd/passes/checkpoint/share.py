"""Share recomputations: the greedy descent recomputes, before each later use, the whole chain a dropped
value needs; `share` removes recomputations, dearest first, so that a later use reads the earlier instance
(which lives longer instead), with those nothing reads any more, while the simulated peak stays within the
limit."""

from __future__ import annotations

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import Simulation, events, simulate

MAX_TRIALS = 600  # removals tried per plan: each costs one simulation


def _drop_unread(problem: Problem, groups: list[list[int]]) -> None:
    """Remove, in place, the recomputations whose instance nothing reads, and then those only they read
    (one pass with reader counts: removing an unread instance changes no other read)."""
    outputs = set(problem.outputs)
    nodes, stages, reads, last_use = events(problem, Schedule(tuple(map(tuple, groups))), check=False)
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


def _exclusive_cost(problem: Problem, group: list[int], t: int, v: int) -> float:
    """Cost of v's recomputation at stage t and of those of stage t only v's recomputation reads."""
    members, readers, gone, cost = set(group), {}, {v}, problem.costs[v]
    for u in group:
        for d in problem.deps[u]:
            if d in members:
                readers.setdefault(d, set()).add(u)
    # Readers within the group come after their inputs: scan back from v. Stage t's own node (and so
    # later stages) may read any of them: only those read solely by gone ones count.
    for u in reversed(group[: group.index(v)]):
        if readers.get(u) and readers[u] <= gone and u not in problem.deps[t]:
            gone.add(u)
            cost += problem.costs[u]
    return cost


def share(problem: Problem, schedule: Schedule, limit: int, sim: Simulation | None = None) -> tuple[Schedule, Simulation]:
    """A plan recomputing no more than `schedule` whose peak stays within max(limit, the plan's own peak)."""
    sim = sim or simulate(problem, schedule, check=False)
    if not schedule.count:
        return schedule, sim
    limit, groups, trials, changed = max(limit, sim.peak_bytes), [list(g) for g in schedule.recompute], 0, True
    while changed and trials < MAX_TRIALS:
        changed = False
        order = sorted(((t, v) for t, g in enumerate(groups) for v in g), key=lambda tv: (-_exclusive_cost(problem, groups[tv[0]], *tv), -tv[0], tv[1]))
        for t, v in order:
            if trials >= MAX_TRIALS:
                break
            if v in groups[t]:
                trials += 1
                trial = [list(g) for g in groups]
                trial[t].remove(v)
                _drop_unread(problem, trial)
                ts = simulate(problem, Schedule(tuple(map(tuple, trial))), check=False)
                if ts.peak_bytes <= limit and ts.extra_cost < sim.extra_cost:
                    groups, sim, changed = trial, ts, True
    while groups and not groups[-1]:
        groups.pop()
    return Schedule(tuple(map(tuple, groups))), sim
