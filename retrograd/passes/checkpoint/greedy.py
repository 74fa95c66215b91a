"""The scalable heuristic: drop, step by step, the value idle across the peak cheapest to recompute per byte.

A value's uses (its readers' stages, and the end for an output) split its life into gaps; dropping a gap frees
the value after the gap's first end and recomputes it before the second, from the values live there
(recursively recomputing those that are not). Each step drops, of the first TRIES buffers idle across the
current peak, the cheapest whose drop does not raise it. The sequence of plans does not depend on the budget
and the plan for a budget is the first that fits: a lower budget never gets a higher peak."""

from __future__ import annotations

from bisect import bisect_left
from itertools import compress

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import Simulation, events, simulate

BATCH_NODES = 400
BATCH_FRACTION = 12
TRIES = 4


class Planner:
    """The state of the descent: `state` = (dropped gaps, the schedule they give, its simulation)."""

    def __init__(self, problem: Problem, allowed=None, single: bool = False):
        p = self.p = problem
        self.single = single  # recompute a value only from values live where it is needed
        self.allowed = allowed or p.recomputable
        # points[v]: v's stage, its readers' stages (and n for an output)
        self.points: list[list[int]] = [[v, *users] for v, users in enumerate(p.users())]
        for v in set(p.outputs):
            self.points[v].append(p.n)
        self.ends = [pts[-1] for pts in self.points]
        self.root = p.roots()
        # Kept across steps (a step drops a few hundred gaps of thousands): closure memo (remember, sync), last events.
        self.memo, self.watch, self.seen, self.last = {}, {}, (None, set()), None
        self.state = self.attempt(set())

    dropped = property(lambda self: self.state[0])  # {(v, index of the gap's second point in points[v])}
    sim = property(lambda self: self.state[2])

    def gap(self, d: int, b: int) -> int:
        """Index k of d's points with points[k-1] < b <= points[k] (0 when b is outside d's life)."""
        k = bisect_left(pts := self.points[d], b)
        return k if 0 < k < len(pts) else 0

    def closure(self, v: int, b: int, dropped, have: set, out: list) -> bool:
        """Add to `out` (and `have`) what recomputing v before stage b needs; False when impossible."""
        stack = [v]
        while stack:
            if (x := stack.pop()) in have:
                continue
            if not self.allowed[x] or (self.single and x != v):
                return False
            have.add(x)
            out.append(x)
            for d in self.p.deps[x]:
                k = self.gap(d, b)  # not live at b (nor recomputed there for node b itself):
                if d not in have and (not k or (self.points[d][k] != b and (d, k) in dropped)):
                    stack.append(d)
        return True

    def build(self, dropped, at=None) -> Schedule | None:
        """The schedule recomputing each dropped gap (v, k) before stage at[v, k] (default: its end)."""
        self.sync(dropped)
        gaps: dict[int, list] = {}
        for v, k in sorted(dropped):
            gaps.setdefault(self.points[v][k] if at is None else at[v, k], []).append((v, k))
        rec = [()] * (max(gaps, default=-1) + 1)  # no empty stages at the end
        for b, g in gaps.items():
            key = (b, *g)  # memo's key: the stage and its gaps
            if key not in self.memo:  # a value's dependencies first (single)
                have, out = set(), []
                if not all(self.closure(v, b, dropped, have, out) for v, _ in key[1:]):
                    return None
                self.remember(key, tuple(sorted(out)), [(b, out)])
            rec[b] = self.memo[key]
        return Schedule(rec)

    def sync(self, dropped: set) -> None:
        """Forget what memo holds of closures looking up a gap dropped or kept since (all when `allowed` changed)."""
        if self.seen[0] is not self.allowed:
            self.memo, self.watch = {}, {}
        for key in [key for g in self.seen[1] ^ dropped for key in self.watch.pop(g, ())]:
            self.memo.pop(key, None)
        self.seen = (self.allowed, set(dropped))

    def remember(self, key, value, closures):
        """memo[key] = value, forgotten when a gap read by the nodes of `closures` ((stage, nodes)) changes."""
        self.memo[key] = value
        for g in {(d, self.gap(d, b)) for b, lst in closures for x in lst for d in self.p.deps[x]}:
            self.watch.setdefault(g, []).append(key)
        return value

    def attempt(self, dropped) -> tuple | None:
        """The state of dropping `dropped` (None: it cannot be built), simulated from the last one's events."""
        sched = self.build(dropped)
        if sched is not None:
            marks: list = []
            self.last = (sched, events(self.p, sched, False, self.last, marks), marks)
            return dropped, sched, simulate(self.p, sched, check=False, ev=self.last[1], marks=marks)

    def candidates(self, t: int) -> list[tuple[float, int, int, list]]:
        """(cost per byte, -bytes, root, gaps) for each buffer held only by values idle across stage t."""
        p, n, dropped, by_root, blocked, points, root, allowed = self.p, self.p.n, self.dropped, {}, set(), self.points, self.root, self.allowed
        self.sync(dropped)
        for v in compress(range(t), map(t.__le__, self.ends)):  # the values live at t (the loop is O(n) a step)
            k = bisect_left(pts := points[v], t)  # self.gap(v, t), inlined
            if pts[k] == t or pts[k] == n or (v, k) in dropped or not allowed[v]:
                if pts[k] != n or (v, k) not in dropped:
                    blocked.add(root[v])
            else:
                by_root.setdefault(root[v], []).append((v, k))
        out = []
        for r, gaps in by_root.items():
            key = tuple(gaps)
            cost = None if r in blocked or p.sizes[r] <= 0 else self.memo[key] if key in self.memo else self.cost(gaps, dropped, key)
            if cost is not None:
                out.append((cost / p.sizes[r], -p.sizes[r], r, gaps))
        return sorted(out)  # roots are distinct: the gaps are never compared

    def cost(self, gaps, dropped: set, key=None) -> float | None:
        """Cost of recomputing the values of `gaps` at their gaps' ends, given the dropped gaps and `gaps` (memo[key] if
        a key is given); `gaps` join `dropped` for the closures and leave it after (a copy made a step O(cands x dropped))."""
        new = [g for g in gaps if g not in dropped]
        dropped.update(new)
        try:
            lists: list[list] = [[] for _ in gaps]
            if not all(self.closure(v, self.points[v][k], dropped, set(), lst) for (v, k), lst in zip(gaps, lists)):
                return None
            cost = sum((sum(self.p.costs[x] for x in lst) for lst in lists), 0.0)
            return cost if key is None else self.remember(key, cost, [(self.points[v][k], lst) for (v, k), lst in zip(gaps, lists)])
        finally:
            dropped.difference_update(new)

    def step(self) -> bool:
        """Drop the best candidates across the current peak (False: none). On large problems a step first drops,
        in order, candidates freeing a twelfth of the activation peak: tens of simulations a plan, not thousands."""
        t, peak = self.sim.peak_stage, self.sim.peak_bytes
        if t < 0:
            return False
        cands = self.candidates(t)
        want = (peak - self.p.pinned_bytes) // BATCH_FRACTION if self.p.n > BATCH_NODES else 0
        if want > 0:
            trial, freed, stale = set(self.dropped), 0, set()
            for score, neg, _, gaps in cands:
                # Skip one that earlier ones made dearer: its cost (memo) holds unless a gap its closures read joined.
                cost = self.cost(gaps, trial) if tuple(gaps) in stale else -score * neg
                if cost is not None and cost <= -score * neg * (1 + 1e-9):
                    trial.update(gaps)
                    stale.update(key for g in gaps for key in self.watch.get(g, ()))
                    freed -= neg
                    if freed >= want:
                        break
            new = self.attempt(trial) if len(trial) > len(self.dropped) else None
            if new is not None and new[2].peak_bytes < peak:  # else a batch that does not lower the peak
                self.state = new
                return True
        # (The module docstring's step.) Else the cheapest tried: recomputations can hold more than a drop frees.
        tried = []
        for *_, gaps in cands:
            new = self.attempt(self.dropped | set(gaps))
            tried += [new] if new is not None else []
            if new is not None and new[2].peak_bytes <= peak or len(tried) == TRIES:
                break
        if tried:  # only the last one tried can be the one found
            self.state = tried[-1] if tried[-1][2].peak_bytes <= peak else tried[0]
        return bool(tried)

    def prune(self, budget: int) -> None:
        """Keep again, dearest first, each dropped gap whose recomputation the budget does not need
        (a later step's drop often makes an earlier one unnecessary). One simulation per dropped gap."""
        for g in sorted(self.dropped, key=lambda g: (-(self.cost([g], self.dropped) or 0), g)):
            new = self.attempt(self.dropped - {g})
            if new is not None and new[2].peak_bytes <= budget and new[2].extra_cost < self.sim.extra_cost:
                self.state = new


def descend(problem: Problem, budget: int | None, light, single=False) -> tuple[Schedule, Simulation] | None:
    """(schedule, simulation) of the descent recomputing the `light` nodes first, then every recomputable one
    (`single`: the light ones alone, each from values live where it is needed): its first plan within
    `budget` (None when none is), or without a budget the plan of lowest peak (the first reaching it)."""
    pl = Planner(problem, light, single)
    best = pl.state
    for allowed in (light,) if single else (light, problem.recomputable):
        if budget is None or pl.sim.peak_bytes > budget:
            pl.allowed = allowed
            while (budget is None or pl.sim.peak_bytes > budget) and pl.step():
                best = pl.state if pl.sim.peak_bytes < best[2].peak_bytes else best
    pl.state = best
    if budget is not None and pl.sim.peak_bytes > budget:
        return None
    if budget is not None and problem.n <= BATCH_NODES:
        # Ties go to the lower peak: steps that add no cost are taken while they lower it.
        while pl.step() and pl.sim.extra_cost <= best[2].extra_cost:
            best = pl.state if pl.sim.peak_bytes < best[2].peak_bytes else best
        pl.state = best
        pl.prune(pl.sim.peak_bytes)
    return pl.state[1:]
