"""Exact plans for small problems: the Checkmate MILP (Jain et al. 2020) with the stage order fixed, via scipy.

Stage t computes node t, preceded by recomputations R[t,k] (k < t, in node order); S[t,k] says that
node k's value is live entering stage t; FREE[t,i,k] releases i right after event (t,k) when no later
event of stage t reads it and it is not kept into stage t+1; IP[t,k,d] says event k reuses the
buffer of its dying in-place dep d. The memory after each event, before its frees (with what the
node holds inside, Problem.inner), is the simulator's; aliases are charged their root's size, so the model's memory is an upper bound of the
simulated one (exact on problems without aliases). scipy is optional: without it `available()` is
False and the planner uses its heuristics.
"""

from __future__ import annotations

from math import gcd

from retrograd.passes.checkpoint.problem import Problem, Schedule

# Past this many branch-and-bound nodes the heuristics plan. A count, never wall-clock time: the same
# problem gets the same plan on any machine, however loaded.
NODE_LIMIT = 200


def available() -> bool:
    try:
        import scipy.optimize  # noqa: F401
        import scipy.sparse  # noqa: F401
    except ImportError:  # pragma: no cover - scipy is in the test extra
        return False
    return True


def latest_use(problem: Problem) -> list[int]:
    """The last stage at which each node's value can be needed (a recomputed reader reads it then at the latest)."""
    n = problem.n
    latest = list(range(n))
    for o in problem.outputs:
        latest[o] = n - 1
    for j in range(n - 1, -1, -1):
        lj = latest[j] if problem.recomputable[j] else j
        for d in problem.deps[j]:
            if latest[d] < lj:
                latest[d] = lj
    return latest


class _Model:
    """The MILP's variables and rows, built once per problem; budgets and objectives vary per solve."""

    def __init__(self, problem: Problem):
        p = self.p = problem
        n = p.n
        sizes = [p.sizes[i] if p.alias_of[i] is None else p.sizes[self._root(i)] for i in range(n)]
        g = 0
        for s in sizes + list(p.inner):
            g = gcd(g, s)
        self.unit = g or 1
        self.size = [s // self.unit for s in sizes]
        self.inner = [s // self.unit for s in p.inner]
        latest = latest_use(p)
        users = p.users()
        self.nvar = 0
        self.R: dict[tuple[int, int], int] = {}
        self.S: dict[tuple[int, int], int] = {}
        for t in range(n):
            for k in range(t):
                if p.recomputable[k] and latest[k] >= t:
                    self.R[t, k] = self._new()
        for t in range(1, n + 1):
            for k in range(t):
                if latest[k] >= t or (t == n and k in p.outputs):
                    self.S[t, k] = self._new()
        rows: list[tuple[dict, float, float]] = []  # ({var: coef}, lo, hi)
        inf = float("inf")
        for t in range(n):
            computed = [k for k in range(t) if (t, k) in self.R] + [t]
            for k in computed:
                for d in set(p.deps[k]):
                    row = {}
                    if k != t:
                        row[self.R[t, k]] = 1.0
                    if (t, d) in self.R:
                        row[self.R[t, d]] = row.get(self.R[t, d], 0.0) - 1.0
                    if (t, d) in self.S:
                        row[self.S[t, d]] = -1.0
                    rows.append((row, -inf, 0.0 if k != t else -1.0))
            for k in range(t + 1):
                if (t + 1, k) in self.S:
                    row = {self.S[t + 1, k]: 1.0}
                    if k < t:
                        if (t, k) in self.S:
                            row[self.S[t, k]] = -1.0
                        if (t, k) in self.R:
                            row[self.R[t, k]] = -1.0
                        rows.append((row, -inf, 0.0))
        for o in set(p.outputs):
            rows.append(({self.S[n, o]: 1.0}, 1.0, 1.0))
        # Tightening (no optimal plan is excluded): a value is recomputed or kept only to be read.
        for t in range(n):
            reads_t = {}
            for k in [k for k in range(t) if (t, k) in self.R] + [t]:
                for d in set(p.deps[k]):
                    reads_t.setdefault(d, []).append(k)
            for k in range(t):
                readers = reads_t.get(k, [])
                if t in readers:
                    continue
                for var in ((self.R.get((t, k)), self.S.get((t, k)))):
                    if var is None:
                        continue
                    row = {var: 1.0}
                    for j in readers:
                        row[self.R[t, j]] = row.get(self.R[t, j], 0.0) - 1.0
                    if (t + 1, k) in self.S:
                        row[self.S[t + 1, k]] = -1.0
                    rows.append((row, -inf, 0.0))
        # FREE[t,i,k]: i released after event (t,k); memory rows U[t,k] <= budget use them.
        self.mem_rows: list[dict] = []
        for t in range(n):
            events = [k for k in range(t) if (t, k) in self.R] + [t]
            ev = {k: (self.R[t, k] if k != t else None) for k in events}
            frees_after: dict[int, list[tuple[int, int]]] = {k: [] for k in events}
            for i in range(t + 1):
                if self.size[i] == 0 or (i != t and (t, i) not in self.R and (t, i) not in self.S):
                    continue
                readers = [j for j in users[i] if j in ev]
                cands = ([i] if i in ev else []) + readers
                for k in cands:
                    later = [j for j in readers if j > k]
                    if any(j == t for j in later):
                        continue  # node t (always computed) reads i after k
                    f = self._new()
                    row = {f: 1.0}
                    if ev[k] is not None:
                        row[ev[k]] = -1.0
                        rows.append((row, -inf, 0.0))
                    if (t + 1, i) in self.S:
                        rows.append(({f: 1.0, self.S[t + 1, i]: 1.0}, -inf, 1.0))
                    for j in later:
                        rows.append(({f: 1.0, ev[j]: 1.0}, -inf, 1.0))
                    frees_after[k].append((f, i))
            base = {}
            for i in range(t):
                if (t, i) in self.S and self.size[i]:
                    base[self.S[t, i]] = float(self.size[i])
            acc = dict(base)
            for k in events:
                if ev[k] is not None:
                    acc[ev[k]] = acc.get(ev[k], 0.0) + self.size[k]
                row, const = dict(acc), (self.size[k] + self.inner[k] if ev[k] is None else 0)
                if ev[k] is not None:  # what a recomputation holds inside, while it runs
                    row[ev[k]] += self.inner[k]
                for ip in self._inplace(k, frees_after[k], rows):
                    row[ip] = -float(self.size[k])
                self.mem_rows.append((row, const))
                for f, i in frees_after[k]:
                    acc[f] = acc.get(f, 0.0) - self.size[i]
        self.rows = rows

    def _inplace(self, k: int, frees: list, rows: list) -> list[int]:
        """IP variables: event k writes into the buffer of the in-place dep that dies there (the executor
        tries the first dying candidate only), so it allocates nothing."""
        p = self.p
        if not p.inplace[k] or p.alias_of[k] is not None:
            return []
        free_of = {i: f for f, i in frees}
        cands = []
        for pos in p.inplace[k]:
            d = p.deps[k][pos]
            if d not in cands:
                cands.append(d)
        out = []
        for n, d in enumerate(cands):
            f = free_of.get(d)
            if f is None or p.alias_of[d] is not None or self.size[d] != self.size[k]:
                continue
            ip = self._new()
            rows.append(({ip: 1.0, f: -1.0}, -float("inf"), 0.0))
            for e in cands[:n]:
                if e in free_of:
                    rows.append(({ip: 1.0, free_of[e]: 1.0}, -float("inf"), 1.0))
            out.append(ip)
        return out

    def _root(self, i: int) -> int:
        while self.p.alias_of[i] is not None:
            i = self.p.alias_of[i]
        return i

    def _new(self) -> int:
        self.nvar += 1
        return self.nvar - 1

    def solve(self, budget: int | None, minimize_peak: bool = False, peak_weight: float = 0.0):
        """(schedule, objective) of the best plan, or None when infeasible / not solved within the node limit.

        The objective is the extra cost (plus peak_weight times the peak in units), or the peak in
        units when minimize_peak.
        """
        import numpy as np
        from scipy.optimize import Bounds, LinearConstraint, milp
        from scipy.sparse import coo_matrix

        p = self.p
        nv = self.nvar + 1  # the last variable is the peak (in units, above the pinned bytes)
        peak = nv - 1
        data, ri, ci, lo, hi = [], [], [], [], []

        def add(row, a, b):
            r = len(lo)
            for v, c in row.items():
                if c:
                    data.append(c)
                    ri.append(r)
                    ci.append(v)
            lo.append(a)
            hi.append(b)

        for row, a, b in self.rows:
            add(row, a, b)
        cap = float("inf")
        if budget is not None:
            cap = (budget - p.pinned_bytes) // self.unit
            if cap < 0:
                return None
        for row, const in self.mem_rows:
            r = dict(row)
            r[peak] = -1.0
            add(r, -float("inf"), -const)
        cost = np.zeros(nv)
        for (t, k), v in self.R.items():
            cost[v] = p.costs[k]
        c = np.zeros(nv)
        if minimize_peak:
            c[peak] = 1.0
        else:
            c[:] = cost
            c[peak] = peak_weight
        ub = np.ones(nv)
        ub[peak] = cap if cap != float("inf") else sum(self.size) + 1
        integrality = np.ones(nv)
        integrality[peak] = 0
        a = coo_matrix((data, (ri, ci)), shape=(len(lo), nv)).tocsr()
        res = milp(
            c,
            constraints=LinearConstraint(a, lo, hi),
            integrality=integrality,
            bounds=Bounds(np.zeros(nv), ub),
            options={"node_limit": NODE_LIMIT, "mip_rel_gap": 1e-9, "presolve": True},
        )
        if res.status != 0 or res.x is None:
            return None
        x = res.x
        per_stage: dict[int, list[int]] = {}
        for (t, k), v in self.R.items():
            if x[v] > 0.5:
                per_stage.setdefault(t, []).append(k)
        return Schedule.from_lists(p.n, per_stage), float(res.fun)


def model(problem: Problem) -> _Model:
    return _Model(problem)


def exact_plan(problem: Problem, budget: int) -> Schedule | None:
    """The least-cost plan within `budget`, or None when the model has none. With costs that are
    multiples of one unit (FLOP counts are), cost / unit + peak / (peak bound + 1) orders the plans by
    cost, then by peak: one MILP breaks ties towards the lower peak."""
    m = model(problem)
    costs = [c for c, r in zip(problem.costs, problem.recomputable) if r]
    g = 0
    for c in costs:
        g = gcd(g, int(c)) if c == int(c) and c <= 2**52 and g >= 0 else -1
    bound = (budget - problem.pinned_bytes) // m.unit + 1
    weight = (g or 1) / bound if g >= 0 and bound * sum(costs) / (g or 1) < 1e9 else 0.0
    res = m.solve(budget, peak_weight=weight)
    return None if res is None else res[0]


def exact_least_peak(problem: Problem) -> tuple[int, Schedule] | None:
    """(least peak of the model in bytes, a plan reaching it), or None when not solved within the limits."""
    m = model(problem)
    res = m.solve(None, minimize_peak=True)
    return None if res is None else (problem.pinned_bytes + round(res[1]) * m.unit, res[0])


def solve(problem: Problem, budget: int) -> Schedule | None:
    """The exact solver: the least-cost plan within `budget`, or else the least-peak plan when it fits."""
    plan = exact_plan(problem, budget)
    if plan is None:
        least = exact_least_peak(problem)
        plan = least[1] if least is not None and least[0] <= budget else None
    return plan
