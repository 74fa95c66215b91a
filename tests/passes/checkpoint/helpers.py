"""Shared by the checkpoint tests. Planner problems: random Problems and schedules, a naive simulator, chains
and the Revolve DP. The pass on modules: the benchmarks' model scripts, adjoints, inputs, measurement."""

from __future__ import annotations

import random
from functools import lru_cache

import models  # benchmarks/models.py (pyproject's pytest pythonpath)
import numpy as np

import retrograd
from retrograd.passes import Gradient
from retrograd.passes.checkpoint import Problem, Schedule


class Builder:
    """Builds a Problem node by node: `add` returns the new node's index."""

    def __init__(self):
        self.fields: dict[str, list] = {k: [] for k in ("sizes", "costs", "deps", "recomputable", "alias_of", "inplace", "kinds", "names")}
        self.outputs: list[int] = []

    def add(self, size, cost, deps=(), kind="other", recomputable=True, output=False, alias_of=None, inplace=(), name=None):
        f = self.fields
        i = len(f["sizes"])
        for key, value in zip(f, (size, cost, tuple(deps), recomputable, alias_of, tuple(inplace), kind, name or f"%{i}")):
            f[key].append(value)
        if output:
            self.outputs.append(i)
        return i

    def build(self, pinned_bytes: int = 0) -> Problem:
        return Problem(**self.fields, outputs=tuple(self.outputs), pinned_bytes=pinned_bytes)


def hetero_chain(rng: random.Random, n: int) -> Problem:
    """A chain adjoint with uneven stages: forward y_0..y_{n-1} (sizes 4..32, costs 1..50), backward
    steps reading y_k and the previous step, some emitting an output (a weight gradient) that lives to
    the end, so the backward's own memory grows as it goes (as the matmul chain's gradients do)."""
    sizes, costs, deps, rec, outs = [], [], [], [], []
    for k in range(n):
        sizes.append(4 * rng.randint(1, 8))
        costs.append(float(rng.choice([1, 2, 5, 10, 50])))
        deps.append((k - 1,) if k else ())
        rec.append(True)
    prev = None
    for k in range(n - 1, -1, -1):
        sizes.append(4 * rng.randint(1, 4))
        costs.append(1.0)
        deps.append((k,) if prev is None else (prev, k))
        rec.append(False)
        prev = len(sizes) - 1
        if rng.random() < 0.6:
            sizes.append(4 * rng.randint(1, 3))
            costs.append(1.0)
            deps.append((prev,))
            rec.append(False)
            outs.append(len(sizes) - 1)
    outs.append(prev)
    return Problem(sizes=sizes, costs=costs, deps=deps, recomputable=rec, outputs=tuple(sorted(set(outs))), pinned_bytes=16)


def random_problem(rng: random.Random, n: int, *, adjoint: bool | None = None, extras: bool = False) -> Problem:
    """A random DAG of n nodes: mixed costs (cheap pointwise, expensive matmul-like) and sizes.

    adjoint=True builds a forward half and a backward half reading forward values in reverse order;
    extras adds aliases, in-place candidates and non-recomputable nodes.
    """
    if adjoint is None:
        adjoint = rng.random() < 0.5
    kinds, costs, sizes, deps = [], [], [], []
    nf = max(1, n // 2) if adjoint else n
    for i in range(n):
        heavy = rng.random() < 0.3
        kinds.append("matmul" if heavy else rng.choice(["elementwise", "reduce", "view", "other"]))
        costs.append(float(rng.choice([50, 80, 100, 200])) if heavy else float(rng.choice([1, 2, 3, 5])))
        sizes.append(rng.choice([1, 2, 3, 4, 6, 8]) * 4)
        if i == 0:
            ds = []
        elif adjoint and i >= nf:
            # backward: the previous gradient and one or two forward values, later steps reading earlier ones
            mirror = max(0, nf - 1 - (i - nf))
            ds = [i - 1] if i > nf else []
            ds.append(mirror)
            if rng.random() < 0.4:
                ds.append(rng.randrange(0, nf))
        else:
            k = rng.choice([1, 1, 2, 2, 3])
            lo = 0 if rng.random() < 0.3 else max(0, i - 3)
            ds = sorted({rng.randrange(lo, i) for _ in range(k)})
        deps.append(tuple(ds))
    outputs = (n - 1,) if rng.random() < 0.7 else (n - 1, rng.randrange(n))
    kw = {}
    if extras:
        alias, inplace, rec = [], [], []
        for i in range(n):
            a = None
            if deps[i] and rng.random() < 0.15:
                a = rng.choice(deps[i])
                sizes[i] = 0
                kinds[i] = "view"
            alias.append(a)
            inplace.append(tuple(p for p in range(len(deps[i])) if a is None and rng.random() < 0.4))
            rec.append(rng.random() > 0.08)
        kw = {"alias_of": tuple(alias), "inplace": tuple(inplace)}
        recomputable = tuple(rec)
    else:
        recomputable = (True,) * n
    return Problem(
        sizes=tuple(sizes),
        costs=tuple(costs),
        deps=tuple(deps),
        recomputable=recomputable,
        outputs=tuple(sorted(set(outputs))),
        pinned_bytes=rng.choice([0, 16, 64]),
        kinds=tuple(kinds),
        **kw,
    )


def random_schedule(rng: random.Random, problem: Problem, density: float = 0.15) -> Schedule:
    """Random valid recomputations (nodes before each stage, recomputable, in topological order)."""
    rec = []
    for t in range(problem.n):
        chosen = sorted(v for v in range(t) if problem.recomputable[v] and rng.random() < density / max(1, t) * 3)
        rec.append(tuple(chosen))
    return Schedule(tuple(rec))


def naive_peak(problem: Problem, schedule: Schedule) -> tuple[int, float]:
    """(peak bytes, extra cost) by brute force: at each computation, list the live instances and their buffers."""
    p = problem
    comp = []  # (node, stage) in order
    for t in range(p.n):
        for v in schedule.recompute[t] if t < len(schedule.recompute) else ():
            comp.append((v, t))
        comp.append((t, t))
    m = len(comp)
    # which instance each read sees: the latest computation of that node before the reader
    src = []
    for e, (v, _) in enumerate(comp):
        src.append([max(j for j in range(e) if comp[j][0] == d) for d in p.deps[v]])
    final = {}
    for e, (v, _) in enumerate(comp):
        final[v] = e
    outs = {final[o] for o in p.outputs}

    def last(e):
        if e in outs:
            return m
        readers = [k for k in range(m) if e in src[k]]
        return max(readers) if readers else e

    lasts = [last(e) for e in range(m)]

    def register_dies(e, i):
        """A recomputation reads a value from outside its group through the group's own marker register,
        which dies at the group's last read of it."""
        v, t = comp[e]
        if t != v and (comp[i][1] != t or comp[i][0] == t):
            return max(k for k in range(m) if comp[k][1] == t and comp[k][0] != t and i in src[k]) == e
        return lasts[i] == e

    owner = {}  # instance -> instance owning its buffer
    part = {}  # instance -> the field of a tuple buffer it holds (None: all of it)
    peak = p.pinned_bytes
    extra = 0.0
    for e, (v, t) in enumerate(comp):
        if t != v:
            extra += p.costs[v]
        a = p.alias_of[v]
        part[e] = None
        if a is not None:
            owner[e] = owner[src[e][p.deps[v].index(a)]]
            part[e] = p.field[v]
        else:
            owner[e] = e
            for pos in p.inplace[v]:
                i = src[e][pos]
                if register_dies(e, i):
                    holders = [j for j in range(e) if lasts[j] >= e and owner[j] == owner[i]]
                    if p.fields[comp[owner[i]][0]]:  # a tuple's field, held by nothing else
                        holders = [j for j in holders if part[j] is None or part[j] == part[i]]
                        if lasts[i] == e and part[i] is not None and holders == [i] and p.sizes[v] > 0:
                            owner[e], part[e] = owner[i], part[i]
                    else:
                        fits = p.alias_of[comp[i][0]] is not None or p.sizes[comp[owner[i]][0]] == p.sizes[v]
                        if lasts[i] == e and holders == [i] and p.sizes[v] > 0 and fits:
                            owner[e] = owner[i]
                    break
        total = p.pinned_bytes
        for b in {owner[j] for j in range(e + 1) if lasts[j] >= e}:
            fields = p.fields[comp[b][0]]
            if not fields:
                total += p.sizes[comp[b][0]]
                continue
            held = [part[j] for j in range(e + 1) if lasts[j] >= e and owner[j] == b]
            total += sum(size for f, size in enumerate(fields) if None in held or f in held)
        peak = max(peak, total)
    return peak, extra


def chain_problem(steps: int, size: int = 8, pinned: int = 16, inplace: bool = True) -> Problem:
    """The adjoint of a `steps`-step chain y_k = f(y_{k-1}) (like a `sin` chain), as a Problem.

    Nodes: forward values y_1..y_{L-1} (y_0 = x is a parameter; y_L is not needed by the backward),
    then backward steps g_L..g_1 where g_k = step_adjoint(y_{k-1}, g_{k+1}) (g_{L+1}, the seed, is a
    parameter; g_1 reads y_0 = x, a parameter). Every value is `size` bytes, every step costs 1. With
    `inplace`, a forward step may overwrite its dying input and a backward step its incoming gradient
    (the executor does both for sin/multiply).
    """
    L = steps
    sizes, costs, deps, inpl, names = [], [], [], [], []
    for k in range(1, L):
        deps.append((k - 2,) if k >= 2 else ())
        inpl.append((0,) if inplace and k >= 2 else ())
        names.append(f"y{k}")
    nf = L - 1
    for k in range(L, 0, -1):
        ds = []
        if k - 1 >= 1:
            ds.append(k - 2)  # y_{k-1}
        if k < L:
            ds.append(len(deps) - 1)  # g_{k+1}, the previous node
        deps.append(tuple(ds))
        inpl.append((len(ds) - 1,) if inplace and k < L else ())
        names.append(f"g{k}")
    n = len(deps)
    assert n == nf + L
    return Problem(
        sizes=(size,) * n,
        costs=(1.0,) * n,
        deps=tuple(deps),
        recomputable=(True,) * nf + (False,) * L,
        outputs=(n - 1,),
        pinned_bytes=pinned,
        inplace=tuple(inpl),
        kinds=("elementwise",) * n,
        names=tuple(names),
    )


@lru_cache(maxsize=None)
def revolve_table(steps: int, slots: int) -> tuple[tuple[int, ...], ...]:
    """Griewank & Walther's DP, bottom-up: table[s][l] = F(l, s), the least forward steps reversing l steps with
    s free slots (l <= steps, s <= slots). F(l, s) = min_{1<=j<l} [ j + F(l-j, s-1) + F(j, s) ], F(1, s) = 0,
    F(l, 0) = l(l-1)/2."""
    table = [[0, 0] + [l * (l - 1) // 2 for l in range(2, steps + 1)]]
    for s in range(1, slots + 1):
        row = [0, 0]
        for l in range(2, steps + 1):
            row.append(min(j + table[s - 1][l - j] + row[j] for j in range(1, l)))
        table.append(row)
    return tuple(map(tuple, table))


def revolve_extra(L: int, c: int) -> int:
    """Least extra forward steps to reverse L steps with c slots (the input counted): F(L, c-1) - (L-1)."""
    return revolve_table(L, c - 1)[c - 1][L] - (L - 1)

SMALL_MODELS = {
    "sin_chain": lambda: models.chain_text(6, width=8, batch=4),
    "matmul_relu_chain": lambda: models.matmul_relu_chain_text(5, width=8, batch=4),
    "mlp": lambda: models.mlp_text(3, width=8, batch=4, scalar_loss=True),
    "transformer": lambda: models.transformer_text(2, seq=8, d=8),
    "resnet": lambda: models.resnet_text(stages=2, blocks=1, channels=4, size=8, batch=1),
}


# Planned by the tests: adjoints of more than 48 bindings, where the planner uses its chain and greedy
# solvers (its exact MILP, for smaller problems, can take minutes on a chain; see the planner's tests).
PLAN_MODELS = {
    "sin_chain": lambda: models.chain_text(16, width=8, batch=4),
    "matmul_relu_chain": lambda: models.matmul_relu_chain_text(8, width=8, batch=4),
    "mlp": lambda: models.mlp_text(6, width=8, batch=4, scalar_loss=True),
    "transformer": lambda: models.transformer_text(2, seq=8, d=8),
    "resnet": lambda: models.resnet_text(stages=2, blocks=2, channels=4, size=8, batch=1),
}


def adjoint_module(text: str):
    """The module with main and main_adjoint (Gradient with its default clean-up)."""
    return Gradient("main")(retrograd.parse(text))


def inputs_for(func, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal([int(d) for d in p.struct_info.shape]) * 0.5).astype(p.struct_info.dtype)
        for p in func.params
    ]


def run(mod, name: str, args):
    """(result, measured peak live bytes) of one call."""
    ex = retrograd.build(mod)
    out = ex[name](*args)
    return out, ex.stats.peak_live_bytes


def flat(value) -> list:
    if isinstance(value, tuple):
        return [x for v in value for x in flat(v)]
    return [np.asarray(value)]


def bitwise_equal(a, b) -> bool:
    fa, fb = flat(a), flat(b)
    return len(fa) == len(fb) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(fa, fb))


def random_extracted_schedule(ex, rng: random.Random, p_stage: float = 0.3, p_node: float = 0.15) -> Schedule:
    """Any sorted subset of earlier recomputable nodes is a valid recomputation group."""
    problem = ex.problem
    rec = []
    for t in range(problem.n):
        if rng.random() >= p_stage:
            rec.append(())
            continue
        cand = [v for v in range(t) if problem.recomputable[v] and v not in ex.transparent]
        rec.append(tuple(v for v in cand if rng.random() < p_node))
    return Schedule(tuple(rec))


def corpus_functions(path) -> list:
    """(module, name) of each function of the corpus file at `path` and of its adjoint where Gradient
    applies; the test is skipped when the file is not a module the executor runs."""
    import pytest

    from retrograd.errors import DiagnosticError
    from retrograd.ir.expr import Function
    from retrograd.parser.parse import parse_path

    try:
        mod = parse_path(path)
    except DiagnosticError:
        pytest.skip("not a module the executor runs")
    out = [(mod, name) for name, f in mod.items() if isinstance(f, Function)]
    for name, f in list(mod.items()):
        if isinstance(f, Function) and f.params:
            try:
                adj = Gradient(name)(mod)
            except DiagnosticError:
                continue
            out.append((adj, f"{name}_adjoint"))
    return out


# An If returning a value it reads (a or b): the Problem counts its result as a buffer of its own, and
# neither a nor b may then be written over in place.
ALIASING_IF = """
@R.function
def main(x: R.Tensor((8,), "float32"), cond: R.Tensor((), "bool")):
    a = R.sin(x)
    b = R.exp(a)
    c = R.cos(b)
    if cond:
        r = a
    else:
        r = b
    d = R.multiply(c, c)
    e = R.add(d, b)
    f = R.multiply(e, a)
    g = R.add(f, r)
    return g
"""
