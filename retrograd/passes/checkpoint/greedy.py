"""A fast heuristic for large problems: drop, one at a time, the value idle across the peak that is cheapest to recompute.

A value's uses (its readers' stages, and the end for an output) split its life into gaps; dropping a
gap frees the value after the gap's first end and recomputes it right before the second, from the
values live there (recursively recomputing those that are not). Starting from the unplanned program,
each step drops the gap(s) of the buffer with the least recompute cost per byte among those live but
unread across the current peak (of the first few, the cheapest whose drop does not raise the peak: a
recomputation can hold more across the peak than the drop frees). The sequence of plans does not depend on the budget, and the plan
for a budget is the first one that fits: a lower budget never gets a higher peak.
"""

from __future__ import annotations

from bisect import bisect_left

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import Simulation, simulate


BATCH_NODES = 400
BATCH_FRACTION = 12
TRIES = 4


class _Plus:
    """The gaps of `base` and of `extra`, for `in` tests: a candidate's cost is asked with its gaps
    dropped too, for every candidate of a step, and copying the dropped set each time made a step
    O(candidates x dropped) (quadratic where a plan drops most of a wide function's values)."""

    __slots__ = ("base", "extra")

    def __init__(self, base, extra):
        self.base, self.extra = base, set(extra)

    def __contains__(self, gap) -> bool:
        return gap in self.extra or gap in self.base


class Planner:
    """The state of the descent: dropped gaps, the schedule they give, its simulation."""

    def __init__(self, problem: Problem, allowed=None, single: bool = False):
        p = self.p = problem
        self.single = single  # recompute a value only from values live where it is needed
        n = p.n
        self.allowed = allowed if allowed is not None else p.recomputable
        outputs = set(p.outputs)
        # points[v]: v's stage, its readers' stages (and n for an output)
        self.points: list[list[int]] = [[v] for v in range(n)]
        for j, ds in enumerate(p.deps):
            for d in set(ds):
                self.points[d].append(j)
        for v in outputs:
            self.points[v].append(n)
        self.root = list(range(n))
        for v in range(n):
            a = p.alias_of[v]
            if a is not None:
                self.root[v] = self.root[a]
        self.dropped: set[tuple[int, int]] = set()  # (v, index of the gap's second point in points[v])
        self.schedule = Schedule()
        self.sim = simulate(p, self.schedule, check=False)
        self.cost_cache: dict = {}

    # -- plans from dropped gaps ---------------------------------------------
    def gap(self, d: int, b: int) -> int:
        """Index k of d's points with points[k-1] < b <= points[k] (0 when b is outside d's life)."""
        pts = self.points[d]
        k = bisect_left(pts, b)
        return k if 0 < k < len(pts) else 0

    def closure(self, v: int, b: int, dropped, have: set, out: list) -> bool:
        """Add to `out` (and `have`) what recomputing v before stage b needs; False when impossible."""
        stack = [(v, False)]
        while stack:
            x, expanded = stack.pop()
            if x in have:
                continue
            if expanded:
                have.add(x)
                out.append(x)
                continue
            if not self.allowed[x] or (self.single and x != v):
                return False
            stack.append((x, True))
            for d in self.p.deps[x]:
                if d in have:
                    continue
                k = self.gap(d, b)
                if k and (self.points[d][k] == b or (d, k) not in dropped):
                    continue  # live at b (or recomputed there for node b itself)
                stack.append((d, False))
        return True

    def build(self, dropped) -> Schedule | None:
        per_stage: dict[int, tuple[set, list]] = {}
        for v, k in sorted(dropped, key=lambda g: (self.points[g[0]][g[1]], g[0])):
            b = self.points[v][k]
            have, out = per_stage.setdefault(b, (set(), []))
            if not self.closure(v, b, dropped, have, out):
                return None
        return Schedule.from_lists(self.p.n, {b: out for b, (_, out) in per_stage.items()})

    # -- the descent -----------------------------------------------------------
    def candidates(self, t: int) -> list[tuple[float, int, int, list]]:
        """(cost per byte, -bytes, root, gaps) for each buffer held only by values idle across stage t."""
        p = self.p
        by_root: dict[int, list] = {}
        blocked: set[int] = set()
        for v in range(t):
            k = self.gap(v, t)
            if not k:
                continue
            pts = self.points[v]
            r = self.root[v]
            if pts[k] == t or pts[k - 1] == t or pts[k] == p.n or (v, k) in self.dropped or not self.allowed[v]:
                if pts[k] != p.n or (v, k) not in self.dropped:
                    blocked.add(r)
                continue
            by_root.setdefault(r, []).append((v, k))
        out = []
        for r, gaps in by_root.items():
            size = p.sizes[r]
            if r in blocked or size <= 0:
                continue
            cost = self._cost(gaps, _Plus(self.dropped, gaps))
            if cost is not None:
                out.append((cost / size, -size, r, gaps))
        out.sort(key=lambda c: c[:3])
        return out

    def _cost(self, gaps, dropped) -> float | None:
        """Cost of recomputing the values of `gaps` at their gaps' ends, given the dropped gaps."""
        cost = 0.0
        for v, k in gaps:
            have: set = set()
            lst: list = []
            if not self.closure(v, self.points[v][k], dropped, have, lst):
                return None
            cost += sum(self.p.costs[x] for x in lst)
        return cost

    def step(self) -> bool:
        """Drop the best candidates across the current peak; False when there are none.

        On large problems a step drops, in order, candidates freeing a sixteenth of the activation
        peak (at least one), so that a plan takes tens of simulations, not thousands.
        """
        t = self.sim.peak_stage
        if t < 0:
            return False
        cands = self.candidates(t)
        want = (self.sim.peak_bytes - self.p.pinned_bytes) // BATCH_FRACTION if self.p.n > BATCH_NODES else 0
        if want > 0:
            trial, freed = set(self.dropped), 0
            for score, neg, _, gaps in cands:
                # Skip a candidate that earlier ones made dearer (a longer chain to recompute).
                cost = self._cost(gaps, _Plus(trial, gaps))
                if cost is None or cost > -score * neg * (1 + 1e-9):
                    continue
                trial.update(gaps)
                freed -= neg
                if freed >= want:
                    break
            before = (self.dropped, self.schedule, self.sim)
            if len(trial) > len(self.dropped) and self._accept(trial):
                if self.sim.peak_bytes < before[2].peak_bytes:
                    return True
                self.dropped, self.schedule, self.sim = before  # a batch that does not lower the peak
        # The cheapest candidate whose drop does not raise the peak, among the first TRIES that can be
        # built; else the cheapest of them (recomputations can hold more than a drop frees).
        before, first, tries = (self.dropped, self.schedule, self.sim), None, 0
        for _, _, _, gaps in cands:
            if not self._accept(self.dropped | set(gaps)):
                continue
            if self.sim.peak_bytes <= before[2].peak_bytes:
                return True
            first = first or (self.dropped, self.schedule, self.sim)
            self.dropped, self.schedule, self.sim = before
            tries += 1
            if tries == TRIES:
                break
        if first is None:
            return False
        self.dropped, self.schedule, self.sim = first
        return True

    def prune(self, budget: int) -> None:
        """Keep again, dearest first, each dropped gap whose recomputation the budget does not need
        (a later step's drop often makes an earlier one unnecessary). One simulation per dropped gap."""
        for g in sorted(self.dropped, key=lambda g: (-(self._cost([g], self.dropped) or 0), g)):
            trial = self.dropped - {g}
            sched = self.build(trial)
            if sched is None:
                continue
            sim = simulate(self.p, sched, check=False)
            if sim.peak_bytes <= budget and sim.extra_cost < self.sim.extra_cost:
                self.dropped, self.schedule, self.sim = trial, sched, sim

    def _accept(self, trial) -> bool:
        sched = self.build(trial)
        if sched is None:
            return False
        self.dropped, self.schedule = trial, sched
        self.sim = simulate(self.p, sched, check=False)
        return True


def descend(problem: Problem, budget: int, light):
    """(schedule, simulation) of the first plan that fits of the descent recomputing the `light` nodes
    first, then every recomputable one; None when none fits."""
    pl = Planner(problem, light)
    while pl.sim.peak_bytes > budget and pl.step():
        pass
    if pl.sim.peak_bytes > budget:
        pl.allowed = problem.recomputable
        while pl.sim.peak_bytes > budget and pl.step():
            pass
    if pl.sim.peak_bytes > budget:
        return None
    if problem.n <= BATCH_NODES:
        # Ties go to the lower peak: steps that add no cost are taken while they lower it.
        best = (pl.dropped, pl.schedule, pl.sim)
        while pl.step() and pl.sim.extra_cost <= best[2].extra_cost:
            if pl.sim.peak_bytes < best[2].peak_bytes:
                best = (pl.dropped, pl.schedule, pl.sim)
        pl.dropped, pl.schedule, pl.sim = best
        pl.prune(pl.sim.peak_bytes)
    return pl.schedule, pl.sim


def least_peak(problem: Problem, allowed=None, single: bool = False, then=None) -> tuple[Schedule, Simulation]:
    """The plan of the descent with the lowest peak (the first one reaching it), recomputing the
    `allowed` nodes, then the `then` ones."""
    pl = Planner(problem, allowed, single)
    best = (pl.schedule, pl.sim)
    for allowed_ in (allowed, then)[: 1 + (then is not None)]:
        pl.allowed = allowed_ if allowed_ is not None else problem.recomputable
        while pl.step():
            if pl.sim.peak_bytes < best[1].peak_bytes:
                best = (pl.schedule, pl.sim)
    return best


def idle_across_peak(pl: Planner) -> list[tuple[int, int]]:
    """(value, gap) of the recomputable values idle across the unplanned plan's peak, in program order,
    each recomputable alone (not reading a value that cannot be)."""
    t, p = pl.sim.peak_stage, pl.p
    out = []
    for v in range(max(t, 0)):
        k = pl.gap(v, t)
        if k and pl.points[v][k - 1] < t < pl.points[v][k] != p.n and p.recomputable[v]:
            if pl.closure(v, pl.points[v][k], {(v, k)}, set(), []):
                out.append((v, k))
    return out
