"""An exact MILP of the simulator's model, written independently of the planner (Checkmate, Jain et al.
2020, stage order fixed); the reference of test_ckpt_milp.py and test_ckpt_rotor.py.

Instead of release variables it has liveness variables A[t,i,k] (value i occupies memory at event k of
stage t), bounded below by what the simulator's rule makes live at that moment: a value is live from its
computation (or the stage's start, when kept) to its last read in the stage, and through the stage when
it is kept into the next. Optimal plans never hold two instances of a value, so on problems without
aliases or in-place candidates its memory is the simulator's (checked: its optimal plan, simulated, fits
the budget).
"""

from __future__ import annotations

import numpy as np

from retrograd.passes.checkpoint import Schedule
from optional import need  # noqa: E402

scipy_optimize = need("scipy.optimize")
scipy_sparse = need("scipy.sparse")


def milp_plan(p, budget=None):
    """(least extra cost, schedule) within budget; with budget None, (least peak, schedule)."""
    n = p.n
    var = {}

    def v(*key):
        if key not in var:
            var[key] = len(var)
        return var[key]

    users = [[j for j in range(n) if i in p.deps[j]] for i in range(n)]
    rows = []  # (coefs, lo, hi)
    big = float(sum(p.sizes) * 2 + 1)
    for t in range(n):
        ev = list(range(t + 1))  # candidate events of stage t: R[t,k] for k < t, and t itself

        def R(k):
            return None if k == t else v("R", t, k)

        for k in ev:
            for d in set(p.deps[k]):
                row = {v("S", t, d): -1.0, v("R", t, d): -1.0} if d < t else {}
                if k == t:
                    rows.append((row, -np.inf, -1.0))
                else:
                    row[R(k)] = 1.0
                    rows.append((row, -np.inf, 0.0))
            if k < t:
                if not p.recomputable[k]:
                    rows.append(({R(k): 1.0}, 0.0, 0.0))
                if t + 1 <= n:
                    rows.append(({v("S", t + 1, k): 1.0, v("S", t, k): -1.0, R(k): -1.0}, -np.inf, 0.0))
        # memory at event k: sum of sizes of live values, each A >= what the rule makes live:
        # A >= present + needed - 1 for every way of being present and every reason to be needed
        for k in ev:
            mem = {}
            for i in range(t + 1):
                if p.sizes[i] == 0:
                    continue
                a = v("A", t, i, k)
                mem[a] = float(p.sizes[i])
                present = []  # None stands for the constant 1
                if i < t:
                    present.append(v("S", t, i))
                if i <= k:
                    present.append(None if i == t else R(i))
                needed = [None if j == t else R(j) for j in users[i] if k <= j <= t]
                needed.append(v("S", t + 1, i))
                if i == k:
                    needed.append(None if i == t else R(i))
                for pr in present:
                    for nd in needed:
                        row, const = {a: 1.0}, -1.0
                        for term in (pr, nd):
                            if term is None:
                                const += 1.0
                            else:
                                row[term] = row.get(term, 0.0) - 1.0
                        rows.append((row, const, np.inf))
            mem[v("peak")] = -1.0
            rows.append((mem, -np.inf, 0.0))
    for o in p.outputs:
        rows.append(({v("S", n, o): 1.0}, 1.0, 1.0))
    nv = len(var)
    c = np.zeros(nv)
    lb, ub = np.zeros(nv), np.ones(nv)
    integrality = np.ones(nv)
    ub[var[("peak",)]] = big
    integrality[var[("peak",)]] = 0
    for key, idx in var.items():
        if key[0] == "R":
            c[idx] = p.costs[key[2]]
        if key[0] == "S" and key[2] >= key[1]:
            ub[idx] = 0.0
    if budget is None:
        c[:] = 0.0
        c[var[("peak",)]] = 1.0
    else:
        ub[var[("peak",)]] = budget - p.pinned_bytes
    data, ri, ci, lo, hi = [], [], [], [], []
    for r, (coefs, a, b) in enumerate(rows):
        for col, val in coefs.items():
            data.append(val)
            ri.append(r)
            ci.append(col)
        lo.append(a)
        hi.append(b)
    A = scipy_sparse.coo_matrix((data, (ri, ci)), shape=(len(rows), nv))
    res = scipy_optimize.milp(
        c, constraints=scipy_optimize.LinearConstraint(A, lo, hi), integrality=integrality,
        bounds=scipy_optimize.Bounds(lb, ub), options={"mip_rel_gap": 1e-9},
    )
    if res.status != 0:
        return None
    rec = [[] for _ in range(n)]
    for key, idx in var.items():
        if key[0] == "R" and res.x[idx] > 0.5:
            rec[key[1]].append(key[2])
    sched = Schedule(tuple(tuple(sorted(r)) for r in rec))
    if budget is None:
        return p.pinned_bytes + round(res.fun), sched
    return res.fun, sched
