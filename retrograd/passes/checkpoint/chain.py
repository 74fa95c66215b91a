"""Optimal plans for adjoints of uniform chains: Revolve (Griewank & Walther), binomial closed form.

A chain adjoint is a forward prefix y_1..y_m (each node reads only its predecessor; y_1 reads only
parameters), followed by a backward part that reads the forward values one at a time, in reverse
order, each value's backward reads before the next smaller one's. Revolve's state x_k is node k-1
(x_0 is a parameter); reversing step k reads x_{k-1}. With c slots (x_0 counted), the least number of
forward steps is F(L, c-1), F(l, s) = r*l - C(s+r+1, s+2) for the least r with C(s+1+r, s+1) >= l
(F(l, 0) = l(l-1)/2), of which L-1 are the original forward sweep. The slot count meeting a byte
budget is found by simulating the plans (the backward's own working set is whatever it is).
"""

from __future__ import annotations

from functools import lru_cache
from math import comb

import attrs

from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.simulate import simulate


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


def revolve_actions(L: int, c: int) -> list[tuple[int, int]]:
    """Revolve's plan for L steps and c slots: (0, k) advance to state k; (1, k) reverse step k."""
    out: list[tuple[int, int]] = []
    stack = [(0, L, c - 1)]
    while stack:
        i, l, s = stack.pop()
        if l == 1:
            out.append((1, i + 1))
        elif s + 2 >= l:
            # Slots for every state: one sweep, then reverse.
            out.extend((0, k) for k in range(i + 1, i + l))
            out.extend((1, k) for k in range(i + l, i, -1))
        elif s == 0:
            for k in range(l, 0, -1):
                out.extend((0, x) for x in range(i + 1, i + k))
                out.append((1, i + k))
        else:
            j = _split(l, s)
            out.extend((0, x) for x in range(i + 1, i + j + 1))
            stack.append((i, j, s))
            stack.append((i + j, l - j, s - 1))
    return out


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
    """Revolve's plan with c slots as recomputations before the backward reads (a uniform chain)."""
    per_stage: dict[int, list[int]] = {}
    pending: list[int] = []
    started = False
    for kind, k in revolve_actions(chain.last + 2, c):
        if kind == 0:
            if started:
                pending.append(k - 1)  # state x_k is node k-1
        else:
            started = True
            if k >= 2 and pending:
                per_stage.setdefault(chain.need[k - 2], []).extend(pending)
            pending = []
    return Schedule.from_lists(problem.n, per_stage)


def revolve(problem: Problem, budget: int) -> Schedule | None:
    """The solver for uniform chain adjoints: the Revolve plan with the fewest extra steps whose simulated
    peak fits `budget` (None if none fits, or not a uniform chain)."""
    chain = detect(problem)
    if chain is None or not chain.uniform(problem):
        return None
    L = chain.last + 2
    peak, plans = {}, {}

    def fits(c):
        if c not in peak:
            plans[c] = chain_schedule(problem, chain, c)
            peak[c] = simulate(problem, plans[c], check=False).peak_bytes
        return peak[c] <= budget

    # The largest c that fits (peaks grow with c); small c are the long plans, so search from above.
    lo, hi = 0, L + 1  # fits(lo) unless lo == 0; not fits(hi) unless hi == L + 1
    # A slot holds one value, so one probe usually places the answer: check around the estimate first.
    size = problem.sizes[0]
    probe = min(L, 4)
    if size > 0:
        if fits(probe):
            lo = probe
            guess = min(L, probe + (budget - peak[probe]) // size)
            if guess > lo:
                if fits(guess):
                    lo = guess
                    if guess < L and not fits(guess + 1):
                        hi = guess + 1
                else:
                    hi = guess
        else:
            hi = probe
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    if lo == 0:
        return None
    # The same number of steps with fewer slots has the lower peak.
    steps = revolve_steps(L, lo - 1)
    c = lo
    while c > 1 and revolve_steps(L, c - 2) == steps:
        c -= 1
    return plans[c] if c in plans else chain_schedule(problem, chain, c)
