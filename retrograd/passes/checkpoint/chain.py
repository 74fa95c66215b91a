"""Plans for chain adjoints (a forward chain the backward reads in reverse order): Revolve (Griewank &
Walther) on uniform chains, the DP of Herrmann et al. 2019 on the others (docs/checkpoint.md). Both choose,
from a checkpoint i with m units (slots; bytes / the DP's unit) free, the next one k (`replay`, `largest`)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from itertools import accumulate
from math import comb, floor, gcd, inf

import numpy as np

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import events, simulate

MAX_UNITS = 256  # memory levels of the DP; sizes are rounded up to coarser units past it
MAX_TRIPLES = 400_000  # (i, k, b) triples: past this the DP is not tried (chains of about 130 reads)
# Revolve plans recomputing over max(MAX_REPEAT * L, MAX_STEPS) steps (about L^(1+1/s) with s slots) are never
# built: on a long chain they take hours. Chains of L <= 362 keep every plan (one slot included).
MAX_REPEAT = 8
MAX_STEPS = 2**16


def revolve_steps(l: int, s: int) -> int:
    """Least forward steps to reverse l steps with the segment's input stored and s free slots."""
    if l <= 1:
        return 0
    r = 1  # Revolve's repetition number: the least r with C(s + 1 + r, s + 1) >= l (s = 0: l(l - 1) / 2 steps)
    while comb(s + 1 + r, s + 1) < l:
        r += 1
    return r * l - comb(s + r + 1, s + 2)


def detect(problem: Problem) -> dict | None:
    """The chain adjoint structure of `problem`, or None: a prefix of nodes forms a chain (none an alias);
    every later node reads at most one of them, in non-increasing order. need[k]: the stage of the first
    backward read of node k (the chain's `need`)."""
    p, m = problem, 0
    while m < p.n and p.recomputable[m] and p.alias_of[m] is None and set(p.deps[m]) == ({m - 1} if m else set()):
        m += 1
    if m < 2 or m == p.n:
        return None
    need, last = {}, m
    for t in range(m, p.n):
        fw = {d for d in p.deps[t] if d < m}
        if len(fw) > 1 or (fw and min(fw) > last):
            return None  # two forward values, or back to a later one: not in reverse order
        if fw:
            last = fw.pop()
            need.setdefault(last, t)
    return need or None


def uniform(problem: Problem, need: dict) -> bool:
    """Revolve's case: every forward node up to the last one read is read, all of one size and cost."""
    ks = range(max(need) + 1)
    return len(need) == len(ks) and all(len({f[k] for k in ks}) == 1 for f in (problem.sizes, problem.costs))


def replay(need: dict, reads, m: int, choose, size) -> Schedule:
    """The plan of the choices `choose(sweep, i, b, m) -> (k, drop)` from the parameters with m units free
    (reads: sorted; b indexes them; sweep: still in the original forward sweep, whose advances are free)."""
    per_stage, pending, stack = {}, [], [(1, -1, len(reads) - 1, m)]
    while stack:
        task = stack.pop()
        if len(task) == 1:  # serve read k: the recomputations since the last read run before it
            per_stage.setdefault(need[task[0]], []).extend(pending)
            pending = []
            continue
        sweep, i, b, m = task
        if b < bisect_right(reads, i):
            continue  # no read after i up to b
        k, drop = choose(sweep, i, b, m)
        if not sweep:
            pending.extend(range(i + 1, k + 1))
        # Run in this order: the reads after k, k itself (unless dropped), the reads before k.
        stack.append((0, i, bisect_left(reads, k) - 1 + drop, m))
        if k in need and not drop:
            stack.append((k,))
        stack.append((sweep, k, b, m - size(k)))
    return Schedule.from_lists(per_stage)


def revolve_choice(sweep: int, i: int, b: int, s: int) -> tuple[int, int]:
    """Revolve's next checkpoint after node i, serving nodes i..b with s free slots: node i + j, the least j
    minimising j + F(l - j, s - 1) + F(j, s) (convex in j)."""
    l = b - i + 1
    if s == 0:
        return b, 0
    if s + 2 >= l:
        return i + 1, 0  # a slot for every value: one sweep
    # The least j < l - 1 where the slope 1 - F'(l - j, s - 1) + F'(j + 1, s) turns non-negative (one does),
    # the slopes F'(l, s) being repetition numbers r(l, s) (see revolve_steps): over the j where r(j + 1, s) is
    # a (a = 1, 2, ...), the slope is non-negative from l - C(s + a + 1, s) (< l - 1) on, r(l - j, s - 1) <= a + 1.
    a = 1
    while True:
        first, last = comb(s + a, s + 1), comb(s + 1 + a, s + 1) - 1
        j = max(first, l - comb(s + a + 1, s))
        if j <= min(last, l - 2):
            return i + j, 0
        a += 1


def chain_schedule(need: dict, c: int) -> Schedule:
    """Revolve's plan with c slots (the input, a parameter, counted) on a uniform chain."""
    reads = list(range(max(need) + 1))  # a list: replay bisects it (a range is far slower to)
    return replay(need, reads, c - 1, revolve_choice, lambda k: 1)


def fewest_slots(L: int) -> int:
    """The fewest slots of a Revolve plan the planner considers on a chain of L (see MAX_REPEAT)."""
    c = 1
    while revolve_steps(L, c - 1) > max(MAX_REPEAT * L, MAX_STEPS):
        c += 1
    return c


def largest(problem: Problem, budget: int, make, guess: int, top: int, bottom: int = 1, per_x: float | None = None
            ) -> tuple[int, Schedule | None]:
    """(the largest x in bottom..top whose plan make(x) fits `budget`, that plan), or (bottom - 1, None); peaks
    grow with x about linearly (`per_x` bytes an x, when known). From `guess`, each next x is a little past where
    the line through the last two peaks (the first: `per_x`, else a neighbour) meets the budget, so that the x
    known to fit and not to close in from both sides; a bisection when that stops halving the gap between them."""
    lo, hi, x, plans, last, widths = bottom - 1, top + 1, guess, {}, None, []
    while hi - lo > 1:
        if len(widths) > 2 and hi - lo > widths[-3] // 2 and bottom <= lo and hi <= top:
            x = (lo + hi) // 2
        x = min(max(x, lo + 1), hi - 1)
        widths.append(hi - lo)
        plan = make(x)
        peak = None if plan is None else simulate(problem, plan, check=False).peak_bytes
        if peak is not None and peak <= budget:
            lo, plans[x] = x, plan
        else:
            hi = x
        slope = per_x if last is None else (peak - last[1]) / (x - last[0]) if peak is not None else 0
        if peak is None or slope is not None and slope <= 0:
            x, last = (lo + hi) // 2, None  # no line to follow: bisect
            continue
        step = -1 if slope is None and x == hi else 1 if slope is None else (budget - peak) / slope * 1.125
        last, x = (x, peak), x + (max(1, int(step)) if x == lo else min(-1, floor(step)))
    return lo, plans.get(lo)


def revolve(problem: Problem, need: dict, budget: int) -> Schedule | None:
    """Revolve's plan with the fewest extra steps whose simulated peak fits `budget` (None if none fits)."""
    L, size = max(need) + 2, problem.sizes[0]
    guess = max(1, min(L, (budget - problem.pinned_bytes) // size - 1)) if size else L  # a value a slot
    c, plan = largest(problem, budget, lambda c: chain_schedule(need, c), guess, L, fewest_slots(L), size)
    if plan is None:
        return None
    steps = revolve_steps(L, c - 1)
    while c > 1 and revolve_steps(L, c - 2) == steps:
        c, plan = c - 1, None  # the same number of steps with fewer slots has the lower peak
    return plan or chain_schedule(need, c)


class ChainDP:
    """The DP on a chain adjoint. cands: the reads, and unread nodes smaller than the next read. transient[l]:
    bytes live while node l is computed from an unheld node l-1. `fill(free)`: cost and choice[sweep, b, i,
    m] (sweep 1: the free original sweep, at the last read; i: 0 for the parameters, 1 + index in cands; a
    choice is k's index, plus len(nodes) when k is dropped)."""

    def __init__(self, problem: Problem, need: dict):
        p = problem
        self.problem, self.need, self.reads = p, need, sorted(need)
        nxt, cands = None, []
        for k in range(self.reads[-1], -1, -1):
            if k in need or p.sizes[k] < p.sizes[nxt]:
                nxt = k if k in need else nxt
                cands.append(k)
        self.cands = cands[::-1]
        self.prefix = [0.0, *accumulate(p.costs[: self.reads[-1] + 1])]
        self.transient = [p.sizes[0]] + [
            p.sizes[l] + (0 if 0 in p.inplace[l] and p.sizes[l] == p.sizes[l - 1] else p.sizes[l - 1])
            for l in range(1, self.reads[-1] + 1)]
        # The backward's memory per read r, in the store-all plan: the most bytes live from r's first read to
        # its last (held), then up to the next read's first (dead), and just before r's first read (before).
        first, last = self.reads[-1] + 1, events(p, None, check=False)[3]  # stages of last reads (outputs: n)
        during, after = [0] * (p.n + 2), [0] * (p.n + 2)
        for v in range(first, p.n):
            # The executor tries the first dying candidate only; v written over it is counted in its stage.
            d = next((p.deps[v][pos] for pos in p.inplace[v] if last[p.deps[v][pos]] == v), None)
            start = v + 1 if d is not None and p.alias_of[d] is None and p.sizes[d] == p.sizes[v] else v
            # difference arrays: += size over [start, last] (during) and [v, last) (after)
            during[start] += p.sizes[v]
            during[min(last[v], p.n - 1) + 1] -= p.sizes[v]
            after[v] += p.sizes[v]
            after[min(last[v], p.n)] -= p.sizes[v]
        during, after = list(accumulate(during)), list(accumulate(after))
        held, dead, before = self.held, self.dead, self.before = {}, {}, {}
        for r, nxt in zip(self.reads[::-1], [*self.reads[-2::-1], None]):
            start, end = need[r], (p.n if nxt is None else need[nxt])
            held[r] = max(during[start : last[r] + 1])
            dead[r] = max(during[last[r] + 1 : end], default=0)
            before[r] = after[start - 1] if start - 1 >= first else 0

    def fill(self, free: int) -> None:
        p, reads, cands, prefix, need = self.problem, self.reads, self.cands, self.prefix, self.need
        # The unit: the gcd of every size added up (exact), or of the checkpoints' alone when that makes
        # more than MAX_UNITS levels (the backward's memory rounded up: conservative), or coarser still.
        sizes = [p.sizes[k] for k in cands]
        every = gcd(*sizes, *self.held.values(), *self.dead.values(), *self.before.values(), *self.transient)
        unit = next((u for u in (every, gcd(*sizes)) if free // max(u, 1) <= MAX_UNITS), None)
        unit = max(1, unit if unit is not None else max(gcd(*sizes), -(-free // MAX_UNITS)))
        self.M = M = max(free // unit, 0)
        self.nodes = nodes = [-1] + cands
        self.index = {k: ii for ii, k in enumerate(nodes)}
        units = lambda values: -(-np.array(values, dtype=np.int64) // unit)  # noqa: E731
        size, pre, trans = units(sizes), units([self.before[r] for r in reads]), units(self.transient)
        self.size = dict(zip(cands, size.tolist()))
        is_read = np.array([k in need for k in cands])
        # Serving k: the backward's memory beside k held, then in k's place once it is dead.
        held = np.where(is_read, units([self.held.get(k, 0) for k in cands]), -1)
        dead = np.where(is_read, units([self.dead.get(k, 0) for k in cands]), -1)
        levels = np.arange(M + 1)
        shifted = levels[None, :] - size[:, None]
        ok = (shifted >= 0) & (shifted >= held[:, None]) & (levels[None, :] >= dead[:, None])
        at = np.maximum(shifted, 0)
        before = np.searchsorted(reads, cands, side="left") - 1  # the last read before k
        drop_before = np.where(is_read, before + 1, -2)  # "drop": k served again from i, with the reads before it
        fa = np.searchsorted(reads, nodes, side="right")  # the first read after each node
        counts = np.searchsorted(cands, reads, side="right")  # the candidates up to each read
        nb, nn = len(reads), len(nodes)
        cost = self.cost = np.zeros((2, nb, nn, M + 1))
        choice = self.choice = np.full((2, nb, nn, M + 1), -1, dtype=np.int64)
        for ii in range(nn - 2, -1, -1):  # the last candidate has no read after it
            i, ks = nodes[ii], np.array(cands[ii:], dtype=np.int64)
            adv = np.array([prefix[k + 1] - prefix[i + 1] for k in ks])
            # The most units live while advancing from i to k (i held outside the free memory).
            advance = np.concatenate([units([p.sizes[i + 1]]), trans[i + 2 : ks[-1] + 1]])
            advance = np.maximum.accumulate(advance)[ks - (i + 1)]
            for b in range(fa[ii], nb):
                c = counts[b] - ii
                kk, sl = np.arange(ii + 1, ii + 1 + c), slice(ii, ii + c)
                live = (b >= fa[kk])[:, None]
                for sweep in (0, 1) if b == nb - 1 else (0,):
                    # Recomputations run just before r_b's first read, beside the backward's memory then.
                    fits = advance[:c, None] + (0 if sweep else pre[b]) <= levels[None, :]
                    base = np.where(live, cost[sweep, b, kk[:, None], at[sl]], 0.0) + (0.0 if sweep else adv[:c, None])
                    row, pick = np.full(M + 1, inf), np.full(M + 1, -1, dtype=np.int64)
                    for drop, bef, good in ((0, before[sl], ok[sl]), (1, drop_before[sl], shifted[sl] >= 0)):
                        # The reads between i and k (k too, when dropped): C(i, bef, m), same memory (bef < b always
                        # holds for k kept; dropping needs a read k, bef -2 otherwise).
                        rest = np.where((bef >= fa[ii])[:, None], cost[0, np.maximum(bef, 0), ii, :], 0.0)
                        total = np.where(good & fits & ((bef >= -1) & (bef < b))[:, None], base + rest, inf)
                        best = total.argmin(axis=0)
                        value = total[best, levels]
                        better = value < row
                        row[better], pick[better] = value[better], kk[best][better] + drop * nn
                    cost[sweep, b, ii], choice[sweep, b, ii] = row, pick

    def plan(self, m: int) -> Schedule | None:
        """The best plan with m units free (after `fill`), or None when none fits."""
        if not 0 <= m <= self.M or not np.isfinite(self.cost[1, -1, 0, m]):
            return None

        def choose(sweep, i, b, m):
            drop, at = divmod(int(self.choice[sweep, b, self.index[i], m]), len(self.nodes))
            return self.nodes[at], drop

        return replay(self.need, self.reads, m, choose, self.size.get)


def chain_costs(problem: Problem, need: dict | None) -> ChainDP | None:
    """The DP of a chain, or None (no chain, or too long for the DP: more than MAX_TRIPLES (i, k, read))."""
    if need is None or (max(need) + 2) ** 2 * len(need) // 6 > 4 * MAX_TRIPLES:
        return None  # far too long: not even measured
    dp = ChainDP(problem, need)
    nc = len(dp.cands) + 1
    return dp if nc * nc * len(dp.reads) // 6 + nc * len(dp.reads) <= MAX_TRIPLES else None


def chain_dp(problem: Problem, budget: int, found: dict | None = None) -> Schedule | None:
    """The DP's plan with the most memory whose simulated peak fits `budget`, or None (none, or no DP)."""
    dp = chain_costs(problem, found or detect(problem))
    if dp is None:
        return None
    dp.fill(budget - problem.pinned_bytes)
    return largest(problem, budget, lambda m: dp.plan(m - 1), dp.M + 1, dp.M + 1)[1]
