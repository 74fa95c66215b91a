"""The "sqrt" policy: Chen et al. 2016 (Training Deep Nets with Sublinear Memory Cost), segments of about sqrt(n).

The values live across the unplanned peak (in an adjoint: forward values kept for the backward) are
split, in program order, into about sqrt(k) segments ending at articulation points of the program
where there are some (no dependency jumps over them). Each segment keeps its last value; the others
are freed after their forward uses and recomputed together, from the kept values, right before the
first later use of any of them, then live until their own uses.
"""

from __future__ import annotations

from math import isqrt

from retrograd.passes.checkpoint.greedy import Planner
from retrograd.passes.checkpoint.problem import HEAVY_KINDS, Problem, Schedule


def sqrt_schedule(problem: Problem) -> Schedule:
    return segment_schedule(problem, None)


def segment_schedule(problem: Problem, size: int | None, planner: Planner | None = None, worse=None) -> Schedule | None:
    """Segments of `size` values (None: about the square root of their number), each keeping its last.

    `planner`: an unplanned Planner of the problem, to share between calls. `worse(heavy, extra)`: None
    is returned as soon as it holds of the recomputations so far (heavy: one of HEAVY_KINDS with a cost;
    extra: their total cost), for a caller that then would not take the plan. Without a jump-free cut
    in a segment (a residual chain) its recomputations reach back through every earlier segment: the
    plan recomputes O(n^2) values, and building it stops early instead.
    """
    p = problem
    pl = planner if planner is not None and not planner.dropped else Planner(p)
    t = pl.sim.peak_stage
    if t < 0:
        return Schedule()
    # values idle across the peak, with the gap that spans it
    across = []
    for v in range(t):
        k = pl.gap(v, t)
        if k and pl.points[v][k - 1] < t < pl.points[v][k] != p.n and p.recomputable[v]:
            # kept when even alone it cannot be recomputed (it reads a value that cannot be)
            if pl.closure(v, pl.points[v][k], {(v, k)}, set(), []):
                across.append((v, k))
    if len(across) < 3:
        return Schedule()
    reach = 0
    cut = set()
    for v in range(t + 1):
        if reach <= v:
            cut.add(v)
        for j in pl.points[v][1:]:
            if j <= t:
                reach = max(reach, j)
    if size is None:
        size = max(2, isqrt(len(across) - 1) + 1)
    segments: list[list[tuple[int, int]]] = []
    seg: list[tuple[int, int]] = []
    for idx, (v, k) in enumerate(across):
        seg.append((v, k))
        at_cut = v in cut or not any(w in cut for w, _ in across[idx + 1 : idx + size])
        if len(seg) >= size and at_cut:
            segments.append(seg)
            seg = []
    if seg:
        segments.append(seg)
    dropped = set()
    for seg in segments:
        dropped.update(seg[:-1])
    per_stage: dict[int, tuple[set, list]] = {}
    heavy, extra = False, 0.0
    for seg in segments:
        drop = seg[:-1]
        if not drop:
            continue
        b = min(pl.points[v][k] for v, k in drop)
        have, out = per_stage.setdefault(b, (set(), []))
        for v, _ in drop:
            start = len(out)
            if not pl.closure(v, b, dropped, have, out):
                return Schedule()
            if worse is not None:
                for x in out[start:]:
                    extra += p.costs[x]
                    heavy = heavy or (p.kinds[x] in HEAVY_KINDS and p.costs[x] > 0)
                if worse(heavy, extra):
                    return None
    return Schedule.from_lists(p.n, {b: out for b, (_, out) in per_stage.items()})
