"""Plans for chain adjoints: Revolve's binomial closed form (Griewank & Walther) on uniform chains, of any
length, and the discretized-memory DP of Herrmann, Shi, Beaumont, Eyraud-Dubois and Pallez (2019),
"Optimal checkpointing for heterogeneous chains" (docs/checkpoint.md), on the others.

A chain adjoint is a forward prefix y_1..y_m (each node reads only its predecessor; y_1 reads only
parameters), followed by a backward part that reads the forward values one at a time, in reverse
order, each value's backward reads before the next smaller one's.

Revolve: state x_k is node k-1 (x_0 is a parameter); reversing step k reads x_{k-1}. With c slots
(x_0 counted), the least number of forward steps is F(L, c-1), F(l, s) = r*l - C(s+r+1, s+2) for the
least r with C(s+1+r, s+1) >= l (F(l, 0) = l(l-1)/2), of which L-1 are the original forward sweep. The
slot count meeting a byte budget is found by simulating the plans (the backward's own working set is
whatever it is).

The DP: C(i, b, M), the least cost of serving the reads after checkpoint i up to read b, i held, M
memory units free: advance from i to a checkpoint k (the costs of i+1..k; free in the original forward
sweep), serve the reads after k with M - size(k), serve k, then the reads between i and k with M (or
drop k after the reads after it and serve it again from i). What the backward part itself holds while
each read is served (its gradients pile up as it goes; measured on the store-all plan), and what a
recomputation holds while it runs, must fit in what is free. Recomputations run right before the first
read they serve. The DP rounds sizes to its memory unit, so its plan is simulated, with less memory
until it fits. On a uniform chain it finds Revolve's optimum (tests/passes/checkpoint/test_ckpt_rotor.py).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import accumulate
from math import comb, gcd

import attrs
import numpy as np

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import simulate

MAX_UNITS = 256  # memory levels of the DP; sizes are rounded up to coarser units past it
MAX_TRIPLES = 400_000  # (i, k, b) triples: past this the DP is not tried (chains of about 130 reads)
RETRIES = 6  # plans tried with one unit less each, when transient memory makes the simulated peak exceed
INF = float("inf")


@lru_cache(maxsize=1 << 16)  # keyed on two ints: the binary searches of _split ask the same few again and again
def revolve_steps(l: int, s: int) -> int:
    """Least forward steps to reverse l steps with the segment's input stored and s free slots."""
    if l <= 1:
        return 0
    if s == 0:
        return l * (l - 1) // 2
    r = 1
    while comb(s + 1 + r, s + 1) < l:
        r += 1
    return r * l - comb(s + r + 1, s + 2)


def _split(l: int, s: int) -> int:
    """The first checkpoint's distance from the segment's input in an optimal plan (s >= 1, l >= 2).

    j + F(l - j, s - 1) + F(j, s) is convex in j (F is convex in l), so the least j whose next
    difference is not negative is a minimiser: a binary search.
    """

    def g(j):
        return j + revolve_steps(l - j, s - 1) + revolve_steps(j, s)

    lo, hi = 1, l - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if g(mid + 1) - g(mid) >= 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


@attrs.frozen(eq=False)
class Chain:
    """A chain adjoint: nodes 0..forward-1 form a chain (node k reads only node k-1, node 0 only
    parameters, none an alias); every later node reads at most one of them, in non-increasing order.
    need[k]: the stage of the first backward read of forward node k (read nodes only)."""

    forward: int
    need: dict

    @property
    def reads(self) -> list[int]:
        return sorted(self.need)

    @property
    def last(self) -> int:
        return max(self.need)

    def uniform(self, problem: Problem) -> bool:
        """Revolve's case: every forward node up to the last one read is read, all of one size and cost."""
        K = self.last
        return (
            all(k in self.need for k in range(K + 1))
            and len({problem.sizes[k] for k in range(K + 1)}) == 1
            and len({problem.costs[k] for k in range(K + 1)}) == 1
        )


def detect(problem: Problem) -> Chain | None:
    """The chain adjoint structure of `problem` (see Chain), or None."""
    p = problem
    n = p.n
    m = 0
    while m < n and p.recomputable[m] and p.alias_of[m] is None and set(p.deps[m]) == ({m - 1} if m else set()):
        m += 1
    if m < 2 or m == n:
        return None
    need: dict[int, int] = {}
    last = m
    for t in range(m, n):
        fw = {d for d in p.deps[t] if d < m}
        if len(fw) > 1:
            return None
        if fw:
            f = fw.pop()
            if f > last:
                return None  # back to a later value: not in reverse order
            need.setdefault(f, t)
            last = f
    return Chain(m, need) if need else None


def chain_schedule(problem: Problem, chain: Chain, c: int) -> Schedule:
    """Revolve's plan with c slots (a uniform chain of L = last + 2 steps), as recomputations before the
    backward reads: advancing to state x_k (node k-1) after the first reversal is a recomputation, run
    before the read reversing the next step. Segments (i, l, s): l steps from state i, s free slots."""
    per_stage: dict[int, list[int]] = {}
    pending: list[int] = []
    started = False

    def advance(states):
        if started:
            pending.extend(k - 1 for k in states)

    def reverse(k):
        nonlocal started, pending
        started = True
        if k >= 2 and pending:
            per_stage.setdefault(chain.need[k - 2], []).extend(pending)
        pending = []

    stack = [(0, chain.last + 2, c - 1)]
    while stack:
        i, l, s = stack.pop()
        if l == 1:
            reverse(i + 1)
        elif s + 2 >= l:  # slots for every state: one sweep, then reverse
            advance(range(i + 1, i + l))
            for k in range(i + l, i, -1):
                reverse(k)
        elif s == 0:
            for k in range(l, 0, -1):
                advance(range(i + 1, i + k))
                reverse(i + k)
        else:
            j = _split(l, s)
            advance(range(i + 1, i + j + 1))
            stack.append((i, j, s))
            stack.append((i + j, l - j, s - 1))
    return Schedule.from_lists(problem.n, per_stage)


def revolve(problem: Problem, chain: Chain, budget: int) -> Schedule | None:
    """Revolve's plan with the fewest extra steps whose simulated peak fits `budget` (None if none fits)."""
    L = chain.last + 2
    plans, peak = {}, {}

    def fits(c):
        if c not in peak:
            plans[c] = chain_schedule(problem, chain, c)
            peak[c] = simulate(problem, plans[c], check=False).peak_bytes
        return peak[c] <= budget

    # The largest c that fits (peaks grow with c). A slot holds one value, so the peak of a few slots
    # places the answer: check around that estimate first, then bisect what is left.
    lo, hi, size, probe = 0, L + 1, problem.sizes[0], min(L, 4)
    if size > 0 and fits(probe):
        lo = probe
        guess = min(L, probe + (budget - peak[probe]) // size)
        if guess > lo and fits(guess):
            lo, hi = guess, (guess + 1 if guess < L and not fits(guess + 1) else hi)
        elif guess > lo:
            hi = guess
    elif size > 0:
        hi = probe
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    if lo == 0:
        return None
    # The same number of steps with fewer slots has the lower peak.
    steps, c = revolve_steps(L, lo - 1), lo
    while c > 1 and revolve_steps(L, c - 2) == steps:
        c -= 1
    return plans[c] if c in plans else chain_schedule(problem, chain, c)


def solve(problem: Problem, budget: int) -> Schedule | None:
    """The chain solver: Revolve's plan on a uniform chain adjoint, the DP's on another one (None when
    none fits, when the problem is not a chain adjoint, or a chain too long for the DP)."""
    found = detect(problem)
    if found is None:
        return None
    if found.uniform(problem):
        return revolve(problem, found, budget)
    return chain_dp(problem, budget, found)


class ChainCosts:
    """What the DP needs of a chain adjoint: checkpoint candidates, prefix costs, the backward's own memory per read."""

    def __init__(self, problem: Problem, chain: Chain):
        self.problem = problem
        need = self.need = chain.need
        self.reads = sorted(need)
        p = problem
        cands = []
        nxt = None
        for k in range(self.reads[-1], -1, -1):
            if k in need:
                nxt = k
                cands.append(k)
            elif p.sizes[k] < p.sizes[nxt]:
                cands.append(k)
        cands.reverse()
        self.cands = cands
        self.prefix = [0.0]
        for k in range(self.reads[-1] + 1):
            self.prefix.append(self.prefix[-1] + p.costs[k])
        self.held, self.dead, self.before = _backward_memory(problem, need, self.reads)
        # transient[l]: bytes live while node l is computed from an unheld node l-1 (in place when it may)
        self.transient = [p.sizes[0]] + [
            p.sizes[l] if (0 in p.inplace[l] and p.sizes[l] == p.sizes[l - 1]) else p.sizes[l] + p.sizes[l - 1]
            for l in range(1, self.reads[-1] + 1)
        ]

    def triples(self) -> int:
        nc, nr = len(self.cands) + 1, len(self.reads)
        return nc * nc * nr // 6 + nc * nr


def _backward_memory(problem: Problem, need: dict, reads: list) -> tuple[dict, dict, dict]:
    """The memory of the nodes after the chain (the backward part's), per read r, in the store-all plan:
    (with_r, after_r, before): the most bytes live during a stage from r's first read to its last one
    (r held), then up to the next smaller read's first one (r dead), and between the stages just before
    r's first read (where the recomputations serving r run)."""
    p = problem
    first = reads[-1] + 1
    last = list(range(p.n))  # the stage of each node's last read (outputs: past the end)
    for t in range(p.n):
        for d in p.deps[t]:
            last[d] = t
    for o in p.outputs:
        last[o] = p.n
    during = [0] * (p.n + 2)
    after = [0] * (p.n + 2)
    for v in range(first, p.n):
        size = p.sizes[v]
        start = v
        for pos in p.inplace[v]:
            d = p.deps[v][pos]
            if last[d] == v:  # the executor tries the first dying candidate only
                if p.alias_of[d] is None and p.sizes[d] == size:
                    start = v + 1  # written over d's buffer, counted during its own stage already
                break
        if size:  # difference arrays: += size over [start, last] (during) and [v, last) (after)
            during[start] += size
            during[min(last[v], p.n - 1) + 1] -= size
            after[v] += size
            after[min(last[v], p.n)] -= size
    during = list(accumulate(during))
    after = list(accumulate(after))
    order = sorted(reads, reverse=True)
    held, dead, before = {}, {}, {}
    for idx, r in enumerate(order):
        start = need[r]
        end = need[order[idx + 1]] if idx + 1 < len(order) else p.n
        held[r] = max(during[start : last[r] + 1])
        dead[r] = max(during[last[r] + 1 : end], default=0)
        before[r] = after[start - 1] if start - 1 >= first else 0
    return held, dead, before


def _units(chain: ChainCosts, free: int) -> int:
    """The DP's memory unit: the gcd of every size it adds up (exact), or of the checkpoints' sizes alone
    when that makes more than MAX_UNITS levels (the backward's memory rounded up: conservative), or
    coarser still."""
    p = chain.problem
    sizes = [p.sizes[k] for k in chain.cands]
    others = [*chain.held.values(), *chain.dead.values(), *chain.before.values(), *chain.transient]
    for group in (sizes + others, sizes):
        unit = 0
        for s in group:
            unit = gcd(unit, int(s))
        unit = max(unit, 1)
        if free // unit <= MAX_UNITS:
            return unit
    return max(unit, -(-free // MAX_UNITS))


class Table:
    """The DP filled once for up to `free` bytes: cost[sweep, b, i, M] and choice[sweep, b, i, M] (sweep 1:
    the free original sweep; i: 0 for the parameters, 1 + position in chain.cands)."""

    def __init__(self, chain: ChainCosts, free: int):
        self.chain = chain
        self.unit = unit = _units(chain, free)
        self.M = M = max(free // unit, 0)
        p = chain.problem
        reads, cands, prefix = chain.reads, chain.cands, chain.prefix
        nodes = [-1] + cands
        self.index = {k: ii for ii, k in enumerate(nodes)}
        self.size = size = {k: -(-p.sizes[k] // unit) for k in cands}
        held = {r: -(-chain.held[r] // unit) for r in reads}
        dead = {r: -(-chain.dead[r] // unit) for r in reads}
        pre = np.array([-(-chain.before[r] // unit) for r in reads], dtype=np.int64)
        trans = [-(-t // unit) for t in chain.transient]
        first_after = []
        j = 0
        for i in nodes:
            while j < len(reads) and reads[j] <= i:
                j += 1
            first_after.append(j)
        self.first_after = first_after
        # k -> index of the last read before k (-1: none).
        self.last_before = {k: first_after[self.index[k]] - (2 if k in chain.need else 1) for k in cands}
        nb, nn = len(reads), len(nodes)
        cost = np.zeros((2, nb, nn, M + 1))
        choice = np.full((2, nb, nn, M + 1), -1, dtype=np.int64)
        levels = np.arange(M + 1)
        fa = np.array(first_after)
        cand_arr = np.array(cands)
        for ii in range(nn - 1, -1, -1):
            i = nodes[ii]
            # Every candidate after i, once; each b takes those up to its read (a prefix: cands are sorted).
            kk_all = np.arange(ii + 1, nn)
            ks_all = cand_arr[ii:]
            shifted_all = levels[None, :] - np.array([size[k] for k in ks_all], dtype=np.int64).reshape(-1, 1)
            before_all = np.array([self.last_before[k] for k in ks_all], dtype=np.int64)
            # Serving k: the backward's memory beside k held, then in k's place once it is dead.
            held_all = np.array([held[k] if k in chain.need else -1 for k in ks_all], dtype=np.int64)
            dead_all = np.array([dead[k] if k in chain.need else -1 for k in ks_all], dtype=np.int64)
            ok_all = (shifted_all >= 0) & (shifted_all >= held_all[:, None]) & (levels[None, :] >= dead_all[:, None])
            at_all = np.maximum(shifted_all, 0)
            adv_all = np.array([prefix[k + 1] - prefix[i + 1] for k in ks_all])
            # The most units live while advancing from i to k (i held outside the free memory).
            peak_to = np.maximum.accumulate(
                np.array([-(-p.sizes[i + 1] // unit)] + trans[i + 2 : ks_all[-1] + 1], dtype=np.int64)
            ) if len(ks_all) else np.zeros(0, dtype=np.int64)
            advance_all = peak_to[ks_all - (i + 1)] if len(ks_all) else peak_to
            # Variant "drop": a read k used as a checkpoint for the reads after it, then dropped and
            # served again from i (with the reads before it), instead of being held until its read.
            read_all = np.array([k in chain.need for k in ks_all])
            drop_before = np.where(read_all, before_all + 1, -2)
            counts = np.searchsorted(ks_all, reads, side="right")
            for b in range(first_after[ii], nb):
                c = counts[b]
                kk, at = kk_all[:c], at_all[:c]
                live = (b >= fa[kk])[:, None]
                for sweep in (0, 1) if b == nb - 1 else (0,):
                    # Recomputations run just before r_b's first read, beside the backward's memory then.
                    fits = advance_all[:c, None] + (0 if sweep else pre[b]) <= levels[None, :]
                    inner = np.where(live, cost[sweep, b, kk[:, None], at], 0.0)
                    base = inner + (0.0 if sweep else adv_all[:c, None])
                    row = np.full(M + 1, INF)
                    pick = np.full(M + 1, -1, dtype=np.int64)
                    for drop, before, ok in ((0, before_all[:c], ok_all[:c]), (1, drop_before[:c], shifted_all[:c] >= 0)):
                        usable = (before >= -1) & (before < b) if drop else np.ones(c, dtype=bool)
                        # The reads between i and k (k too, when dropped): C(i, before, M), same memory.
                        rest = np.where((before >= first_after[ii])[:, None], cost[0, np.maximum(before, 0), ii, :], 0.0)
                        total = np.where(ok & fits & usable[:, None], base + rest, INF)
                        best = total.argmin(axis=0)
                        cand = total[best, levels]
                        better = cand < row
                        row[better] = cand[better]
                        pick[better] = kk[best][better] + drop * nn
                    cost[sweep, b, ii] = row
                    choice[sweep, b, ii] = pick
        self.cost, self.choice = cost, choice
        self.nodes = nodes

    def plan(self, M: int):
        """(cost, Schedule) of the best plan with M units free, or None when none fits."""
        b = len(self.chain.reads) - 1
        if not 0 <= M <= self.M or not np.isfinite(self.cost[1, b, 0, M]):
            return None
        return float(self.cost[1, b, 0, M]), self._schedule(M)

    def _schedule(self, M: int) -> Schedule:
        """The plan's recomputations, each group right before the first backward read it serves."""
        chain = self.chain
        per_stage: dict[int, list[int]] = {}
        pending: list[int] = []
        stack = [("solve", 1, -1, len(chain.reads) - 1, M)]
        while stack:
            task = stack.pop()
            if task[0] == "serve":
                if pending:
                    per_stage.setdefault(chain.need[task[1]], []).extend(pending)
                    pending = []
                continue
            _, sweep, i, b, m = task
            ii = self.index[i]
            if b < self.first_after[ii]:
                continue  # nothing to serve
            drop, at = divmod(int(self.choice[sweep, b, ii, m]), len(self.nodes))
            k = self.nodes[at]
            if not sweep:
                pending.extend(range(i + 1, k + 1))
            # Run in this order: the reads after k, k itself (unless dropped), the reads before k.
            if drop:
                stack.append(("solve", 0, i, self.last_before[k] + 1, m))
            else:
                stack.append(("solve", 0, i, self.last_before[k], m))
                if k in chain.need:
                    stack.append(("serve", k))
            stack.append(("solve", sweep, k, b, m - self.size[k]))
        return Schedule.from_lists(chain.problem.n, per_stage)


def chain_costs(problem: Problem, chain: Chain | None) -> ChainCosts | None:
    """The DP's view of a chain, or None (no chain, or too long for the DP)."""
    if chain is None or (chain.last + 2) ** 2 * len(chain.need) // 6 > 4 * MAX_TRIPLES:
        return None  # far too long: not even measured
    costs = ChainCosts(problem, chain)
    return costs if costs.triples() <= MAX_TRIPLES else None


def chain_dp(problem: Problem, budget: int, found: Chain | None = None) -> Schedule | None:
    """The DP's plan whose simulated peak fits `budget` (None when none of the tries fits, or not a chain
    the DP takes)."""
    chain = chain_costs(problem, found or detect(problem))
    if chain is None:
        return None
    table = Table(chain, budget - problem.pinned_bytes)
    M = table.M
    for _ in range(RETRIES):
        found = table.plan(M)
        if found is None:
            return None
        schedule = found[1]
        peak = simulate(problem, schedule, check=False).peak_bytes
        if peak <= budget:
            return schedule
        M -= max(1, -(-(peak - budget) // table.unit))
    return None
