"""Exact plans for small problems: the Checkmate MILP (Jain et al. 2020), stage order fixed, via scipy
(optional: without it `available()` is False). Stage t computes node t after recomputations R[t,k] (k < t);
S[t,k]: k is live entering stage t; FREE[t,i,k] releases i after event (t,k) when no later event of stage
t reads it and it is not kept into t+1; IP: event k reuses its dying in-place dep's buffer. The memory
after each event is the simulator's; aliases are charged their root's size (exact without aliases)."""

from __future__ import annotations

from importlib.util import find_spec
from math import gcd, inf

from retrograd.passes.checkpoint.problem import Problem, Schedule

# Counts, never time (the same plan on any machine): past NODE_LIMIT branch-and-bound nodes or MAX_VARIABLES
# variables (a 32-node residual block's 2,559 reach the node limit unsolved in 13-44 s) the heuristics plan.
NODE_LIMIT = 200
MAX_VARIABLES = 2000


def available() -> bool:
    return find_spec("scipy") is not None and find_spec("scipy.optimize") is not None  # scipy is optional


class Model:
    """The MILP's variables and rows, built once per problem; budgets and objectives vary per solve."""

    def __init__(self, problem: Problem):
        p = self.p = problem
        n, self.nvar, self.mem_rows, root = p.n, 0, [], p.roots()
        # Rows in groups, in a fixed order (HiGHS's path, and so which optimum it returns, depends on it).
        dep, tight, free = [], [], []
        self.unit = gcd(*(p.sizes[r] for r in root), *p.inner) or 1
        size = self.size = [p.sizes[r] // self.unit for r in root]
        latest, users = list(range(n)), p.users()  # the last stage that may read each value (a recomputed reader, then)
        for o in p.outputs:
            latest[o] = n - 1
        for j in range(n - 1, -1, -1):
            for d in p.deps[j]:
                latest[d] = max(latest[d], latest[j] if p.recomputable[j] else j)
        R = self.R = {(t, k): self.new() for t in range(n) for k in range(t) if p.recomputable[k] and latest[k] >= t}
        S = {(t, k): self.new() for t in range(1, n + 1) for k in range(t) if latest[k] >= t or (t == n and k in p.outputs)}
        out = [({S[n, o]: 1.0}, 1.0, 1.0) for o in set(p.outputs)]
        for t in range(n):
            ev = {**{k: R[t, k] for k in range(t) if (t, k) in R}, t: None}  # node t itself is always computed
            reads: dict[int, list[int]] = {}
            for k, var in ev.items():  # k's inputs are live in stage t: recomputed before it or kept into t
                for d in set(p.deps[k]):
                    self.le(dep, 0 if var is not None else -1, (1, var), (-1, R.get((t, d))), (-1, S.get((t, d))))
                    reads.setdefault(d, []).append(k)
            for k in range(t):  # kept into t + 1: kept into t or recomputed in t
                if (t + 1, k) in S:
                    self.le(dep, 0, (1, S[t + 1, k]), (-1, S.get((t, k))), (-1, R.get((t, k))))
                # Tightening (no optimal plan is excluded): a value is recomputed or kept only to be read.
                if t not in reads.get(k, ()):
                    for var in (R.get((t, k)), S.get((t, k))):
                        if var is not None:
                            self.le(tight, 0, (1, var), *((-1, R[t, j]) for j in reads.get(k, ())), (-1, S.get((t + 1, k))))
            frees: dict[int, list[tuple[int, int]]] = {k: [] for k in ev}  # FREE[t,i,k] after event k
            for i in range(t + 1):
                if size[i] == 0 or (i != t and (t, i) not in R and (t, i) not in S):
                    continue
                readers = [j for j in users[i] if j in ev]
                # After its own event or a reader's; when node t (always computed) reads it, after node t's only.
                for k in [t] if t in readers else ([i] if i in ev else []) + readers:
                    later = [j for j in readers if j > k]
                    f = self.new()
                    if ev[k] is not None:
                        self.le(free, 0, (1, f), (-1, ev[k]))
                    for var in ([S[t + 1, i]] if (t + 1, i) in S else []) + [ev[j] for j in later]:
                        self.le(free, 1, (1, f), (1, var))  # not freed while kept into t + 1 or read later
                    frees[k].append((f, i))
            acc = {S[t, i]: float(size[i]) for i in range(t) if (t, i) in S and size[i]}
            for k, var in ev.items():
                inner = p.inner[k] // self.unit
                row = dict(acc)
                if var is not None:  # a recomputation: its result and what it holds inside, while it runs
                    acc[var] = float(size[k])
                    row[var] = float(size[k] + inner)
                for ip in self.inplace(k, frees[k], free):
                    row[ip] = -float(size[k])
                self.mem_rows.append((row, size[k] + inner if var is None else 0))
                for f, i in frees[k]:
                    acc[f] = -float(size[i])
        self.rows = dep + out + tight + free

    def new(self) -> int:
        self.nvar += 1
        return self.nvar - 1

    def le(self, rows: list, hi: float, *terms) -> None:
        """A row sum(coef * var) <= hi over the terms whose var exists."""
        row: dict[int, float] = {}
        for coef, var in terms:
            if var is not None:
                row[var] = row.get(var, 0.0) + coef
        rows.append((row, -inf, float(hi)))

    def inplace(self, k: int, frees: list, rows: list) -> list[int]:
        """IP variables: event k writes into the buffer of its first in-place dep dying there (Problem.inplace)."""
        p, free_of, out = self.p, {i: f for f, i in frees}, []
        cands = list(dict.fromkeys(p.deps[k][pos] for pos in p.inplace[k])) if p.alias_of[k] is None else []
        for pos, d in enumerate(cands):
            if d in free_of and p.alias_of[d] is None and self.size[d] == self.size[k]:
                out.append(self.new())
                self.le(rows, 0, (1, out[-1]), (-1, free_of[d]))
                for e in (e for e in cands[:pos] if e in free_of):
                    self.le(rows, 1, (1, out[-1]), (1, free_of[e]))
        return out

    def solve(self, budget: int | None, peak_weight: float = 0.0):
        """(schedule, objective) of the best plan, or None (infeasible or past the limits). The objective: the
        extra cost plus peak_weight times the peak in units; without a budget, the peak alone (the least)."""
        if self.nvar > MAX_VARIABLES:
            return None
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix

        peak, nv = self.nvar, self.nvar + 1  # the last variable: the peak in units, above the pinned bytes
        cap = sum(self.size) + 1 if budget is None else (budget - self.p.pinned_bytes) // self.unit
        if cap < 0:
            return None
        rows = self.rows + [({**row, peak: -1.0}, -inf, -const) for row, const in self.mem_rows]
        entries = [(r, v, c) for r, (row, _, _) in enumerate(rows) for v, c in row.items() if c]
        ri, ci, data = np.array(entries, dtype=float).reshape(-1, 3).T
        c, ub = np.zeros(nv), np.ones(nv)
        c[list(self.R.values())] = 0.0 if budget is None else [self.p.costs[k] for _, k in self.R]
        c[peak] = 1.0 if budget is None else peak_weight
        ub[peak] = cap
        matrix = coo_matrix((data, (ri.astype(int), ci.astype(int))), shape=(len(rows), nv)).tocsr()
        constraints = LinearConstraint(matrix, *zip(*((a, b) for _, a, b in rows)))
        options = {"node_limit": NODE_LIMIT, "mip_rel_gap": 1e-9, "presolve": True}
        bounds, integrality = Bounds(np.zeros(nv), ub), (np.arange(nv) != peak).astype(int)
        res = milp(c, constraints=constraints, integrality=integrality, bounds=bounds, options=options)
        if res.status != 0 or res.x is None:
            return None
        per_stage: dict[int, list[int]] = {}
        for (t, k), v in self.R.items():
            if res.x[v] > 0.5:
                per_stage.setdefault(t, []).append(k)
        return Schedule.from_lists(per_stage), float(res.fun)


def solve(problem: Problem, budget: int) -> Schedule | None:
    """The least-cost plan within `budget` (None past the limits). With costs multiples of one unit (FLOPs
    are), cost / unit + peak / (peak bound + 1) breaks cost ties towards the lower peak."""
    m = Model(problem)
    costs = [c for c, r in zip(problem.costs, problem.recomputable) if r]
    whole = all(c == int(c) and c <= 2**52 for c in costs)
    g, bound = (gcd(*map(int, costs)) if whole else 0) or 1, (budget - problem.pinned_bytes) // m.unit + 1
    res = m.solve(budget, peak_weight=g / bound if whole and bound * sum(costs) / g < 1e9 else 0.0)
    return None if res is None else res[0]
