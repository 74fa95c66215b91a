"""Checkpoint planner time on 10,000-node adjoint Problems (no IR: the solver core alone).

Run by hand:  python benchmarks/bench_planner.py [--nodes 10000] [--fractions 0.5 0.2]

Problems: (chain) the adjoint of a uniform chain (y_k = sin(y_{k-1}); backward step k reads y_{k-1}
and the incoming gradient, both in place), solved by Revolve; (mlp) the adjoint of a matmul+relu MLP
(forward: matmul, relu; backward: relu', the weight gradient, the input gradient), solved by the
greedy descent. Budgets are fractions of the activation part (above the parameters) of the unplanned
peak. Target: under 2 s per plan at 10,000 nodes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrograd.passes.checkpoint import Problem, simulate, solve  # noqa: E402

D = 4 * 1024 * 256  # one activation: a 1024x256 float32 (a batch of 1024)
W = 4 * 256 * 256  # a weight or its gradient


def chain_adjoint(nodes: int) -> Problem:
    L = nodes // 2 + 1
    deps, inplace = [], []
    for k in range(1, L):
        deps.append((k - 2,) if k >= 2 else ())
        inplace.append((0,) if k >= 2 else ())
    for k in range(L, 0, -1):
        ds = ([k - 2] if k >= 2 else []) + ([len(deps) - 1] if k < L else [])
        deps.append(tuple(ds))
        inplace.append((len(ds) - 1,) if k < L else ())
    n = len(deps)
    return Problem(sizes=(D,) * n, costs=(1.0,) * n, deps=deps, recomputable=(True,) * (L - 1) + (False,) * L,
                   outputs=(n - 1,), pinned_bytes=2 * D, inplace=inplace, kinds=("elementwise",) * n)


def mlp_adjoint(nodes: int) -> Problem:
    layers = nodes // 5
    flops = 2 * 1024 * 256 * 256
    nodes_: list[tuple] = []  # (size, cost, deps, kind, recomputable)
    outputs = []

    def add(size, cost, deps, kind, recomputable=True, output=False):
        nodes_.append((size, cost, tuple(deps), kind, recomputable))
        if output:
            outputs.append(len(nodes_) - 1)
        return len(nodes_) - 1

    prev, acts = None, []
    for _ in range(layers):
        z = add(D, flops, () if prev is None else (prev,), "matmul")
        prev = add(D, 1024 * 256, (z,), "elementwise")
        acts.append(prev)
    g = None
    for i in range(layers - 1, -1, -1):
        gz = add(D, 1024 * 256, (acts[i],) + (() if g is None else (g,)), "elementwise", False)
        add(W, flops, ((acts[i - 1],) if i else ()) + (gz,), "matmul", False, True)
        g = add(D, flops, (gz,), "matmul", False)
    sizes, costs, deps, kinds, rec = zip(*nodes_)
    return Problem(sizes=sizes, costs=costs, deps=deps, recomputable=rec, outputs=tuple(outputs),
                   pinned_bytes=layers * W, kinds=kinds)


def run(name: str, p: Problem, fractions) -> None:
    t0 = time.perf_counter()
    store = simulate(p)
    t_sim = time.perf_counter() - t0
    act = store.peak_bytes - p.pinned_bytes
    print(f"{name}: {p.n} nodes, unplanned activation peak {act / D:.0f} activations, simulate {t_sim * 1e3:.0f} ms")
    for policy, fraction in [("sqrt", None), ("cheap", None)] + [("budget", f) for f in fractions]:
        budget = None if fraction is None else p.pinned_bytes + int(act * fraction)
        t0 = time.perf_counter()
        try:
            s = solve(p, budget, policy)
        except ValueError as err:
            print(f"  {policy:6} {fraction!s:>5}: {err}")
            continue
        dt = time.perf_counter() - t0
        sim = simulate(p, s)
        print(
            f"  {policy:6} {fraction!s:>5}: plan {dt:6.2f} s, peak {(sim.peak_bytes - p.pinned_bytes) / D:7.0f} "
            f"activations, recomputed {sim.recomputed_count}, extra cost {sim.extra_cost:.3g}"
        )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.2])
    args = ap.parse_args(argv)
    run("chain", chain_adjoint(args.nodes), args.fractions)
    run("mlp", mlp_adjoint(args.nodes), args.fractions)


if __name__ == "__main__":
    main()
