"""Checkpoint pass time against adjoint size, on adjoints of many shapes: does it stay (near) linear?

Run by hand:  python benchmarks/bench_checkpoint_scale.py [--bindings 12500 25000 50000 100000]
              [--shapes chain residual ...] [--budgets 50% 90% tight infeasible] [--profile SHAPE]

Each shape is a forward function `main` (small tensors: time is the planner's, not the kernels'),
differentiated by Gradient; the checkpoint pass then plans `main_adjoint` (and, for shape `forward`,
`main` itself), timed alone. The forward is sized so that the adjoint has about the asked number of
bindings. Budgets: percentages of the unplanned peak; `tight` is the least feasible budget
(found at the smallest size by asking for 1 byte, scaled with the unplanned peak for the larger sizes,
so it may turn infeasible); `infeasible` asks for 1 byte (the pass fails, stating the least budget).
Prints one row per (shape, budget, size): adjoint bindings, seconds, and `ratio`, the time per
binding over the previous size's (about 1 when linear, 2 when quadratic at doubling sizes).
Seconds are the process's CPU time (the machine is shared).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrograd  # noqa: E402
from retrograd.gc_pause import collector_paused  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from retrograd.passes.checkpoint import InfeasibleBudgetError, plan_checkpoint  # noqa: E402
from models import _module  # noqa: E402

T = 'R.Tensor((4, 8), dtype="float32")'
S = 'R.Tensor((), dtype="float32")'


def _c(v: float) -> str:
    return f'R.const({v!r}, "float32")'


def _loss(body: list[str], h: str) -> None:
    body.append(f"gv: {S} = R.sum({h}, axis=None, keepdims=False)")


# -- shapes: forward functions of about `k` layers -------------------------------------------------


def chain(k: int) -> str:
    """h_i = sin(h_{i-1}): a plain chain."""
    body, h = [], "x"
    for i in range(k):
        body.append(f"h{i}: {T} = R.sin({h})")
        h = f"h{i}"
    _loss(body, h)
    return _module([f"x: {T}"], body)


def residual(k: int, skip: int = 4) -> str:
    """h_i = sin(h_{i-1}) + h_{i-skip}: a chain with skip connections (values live across `skip` layers)."""
    body, hs = [], ["x"]
    for i in range(k):
        body.append(f"s{i}: {T} = R.sin({hs[-1]})")
        body.append(f"h{i}: {T} = R.add(s{i}, {hs[max(0, len(hs) - skip)]})")
        hs.append(f"h{i}")
    _loss(body, hs[-1])
    return _module([f"x: {T}"], body)


def _branch(body: list[str], j: int, k: int) -> None:
    """Branch j of k: b_j = sin(x * c_j) (distinct constants: no two branches are the same expression)."""
    body.append(f"a{j}: {T} = R.multiply(x, {_c(1.0 + j / k)})")
    body.append(f"b{j}: {T} = R.sin(a{j})")


def fanin(k: int) -> str:
    """A sum of k terms, each a short chain of the input: many parallel branches joined at the end."""
    body = []
    for j in range(k):
        _branch(body, j, k)
        body.append(f"c{j}: {T} = R.exp(b{j})")
        body.append(f"s{j}: {T} = R.add({'s' + str(j - 1) if j else 'x'}, c{j})")
    _loss(body, f"s{k - 1}")
    return _module([f"x: {T}"], body)


def fanin_tree(k: int) -> str:
    """The same k branches, summed as a balanced tree (every branch live until its pair is added)."""
    body, terms = [], []
    for j in range(k):
        _branch(body, j, k)
        terms.append(f"b{j}")
    level = 0
    while len(terms) > 1:
        nxt = []
        for i in range(0, len(terms) - 1, 2):
            name = f"t{level}_{i}"
            body.append(f"{name}: {T} = R.add({terms[i]}, {terms[i + 1]})")
            nxt.append(name)
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms, level = nxt, level + 1
    _loss(body, terms[0])
    return _module([f"x: {T}"], body)


def fanout(k: int) -> str:
    """y = sin(x) read by every layer: h_i = cos(h_{i-1} * y) (one value, thousands of consumers)."""
    body, h = [f"y: {T} = R.sin(x)"], "x"
    for i in range(k):
        body.append(f"m{i}: {T} = R.multiply({h}, y)")
        body.append(f"h{i}: {T} = R.cos(m{i})")
        h = f"h{i}"
    _loss(body, h)
    return _module([f"x: {T}"], body)


def params(k: int) -> str:
    """h_i = sin(h_{i-1} * p_i) with a parameter per layer (thousands of parameters and gradients)."""
    body, h = [], "x"
    for i in range(k):
        body.append(f"m{i}: {T} = R.multiply({h}, p{i})")
        body.append(f"h{i}: {T} = R.sin(m{i})")
        h = f"h{i}"
    _loss(body, h)
    return _module([f"x: {T}"] + [f"p{i}: {T}" for i in range(k)], body)


def mlp(k: int) -> str:
    """Dense layers: matmul, bias add, relu, a weight and a bias per layer (a batch of 64, so that
    activations, not weights, make the peak)."""
    w, b = 'R.Tensor((8, 8), dtype="float32")', 'R.Tensor((8,), dtype="float32")'
    t = 'R.Tensor((64, 8), dtype="float32")'
    body, h, ps = [], "x", [f"x: {t}"]
    for i in range(k):
        ps += [f"w{i}: {w}", f"b{i}: {b}"]
        body.append(f"m{i}: {t} = R.matmul({h}, w{i}, out_dtype=None)")
        body.append(f"z{i}: {t} = R.add(m{i}, b{i})")
        body.append(f"h{i}: {t} = R.nn.relu(z{i})")
        h = f"h{i}"
    _loss(body, h)
    return _module(ps, body)


def tuples(k: int) -> str:
    """Split into halves, one half transformed, concatenated back: tuples and their projections."""
    half = 'R.Tensor((4, 4), dtype="float32")'
    body, h = [], "x"
    for i in range(k):
        body.append(f"p{i}: R.Tuple({half}, {half}) = R.split({h}, indices_or_sections=2, axis=1)")
        body.append(f"l{i}: {half} = p{i}[0]")
        body.append(f"r{i}: {half} = p{i}[1]")
        body.append(f"e{i}: {half} = R.tanh(r{i})")
        body.append(f"h{i}: {T} = R.concat((e{i}, l{i}), axis=1)")
        h = f"h{i}"
    _loss(body, h)
    return _module([f"x: {T}"], body)


def norm(k: int) -> str:
    """Softmax and a layer norm written out (mean, centre, variance, rsqrt, scale) per layer: adjoints of
    many small bindings."""
    r = 'R.Tensor((4, 1), dtype="float32")'
    body, h = [], "x"
    for i in range(k):
        body += [
            f"sm{i}: {T} = R.nn.softmax({h}, axis=-1)",
            f"mu{i}: {r} = R.mean(sm{i}, axis=[-1], keepdims=True)",
            f"d{i}: {T} = R.subtract(sm{i}, mu{i})",
            f"q{i}: {T} = R.multiply(d{i}, d{i})",
            f"v{i}: {r} = R.mean(q{i}, axis=[-1], keepdims=True)",
            f"ve{i}: {r} = R.add(v{i}, {_c(1e-5)})",
            f"rs{i}: {r} = R.rsqrt(ve{i})",
            f"h{i}: {T} = R.multiply(d{i}, rs{i})",
        ]
        h = f"h{i}"
    _loss(body, h)
    return _module([f"x: {T}"], body)


SHAPES = {
    "chain": chain,
    "residual": residual,
    "fanin": fanin,
    "fanin_tree": fanin_tree,
    "fanout": fanout,
    "params": params,
    "mlp": mlp,
    "tuples": tuples,
    "norm": norm,
}
# The forward shape: `main` checkpointed itself (no adjoint): the tree-summed branches, all live at
# once before the first sum (a residual chain's forward holds only its skip window: nothing to plan).
FORWARD = "forward"


def build(shape: str, k: int):
    """(module, function to plan): the adjoint of shape's forward of k layers, or the forward itself."""
    if shape == FORWARD:
        return retrograd.parse(fanin_tree(k)), "main"
    mod = retrograd.parse(SHAPES[shape](k))
    with collector_paused():
        mod = Gradient("main")(mod)
    return mod, "main_adjoint"


def bindings(mod, name: str) -> int:
    return sum(len(b.bindings) for b in mod[name].body.blocks)


def layers_for(shape: str, target: int) -> int:
    """Layers giving about `target` adjoint bindings (measured at a small size, linear in k)."""
    k0 = 64
    mod, name = build(shape, k0)
    return max(2, round(target * k0 / bindings(mod, name)))


def time_pass(mod, name: str, budget):
    """(CPU seconds of the pass, its summary): CPU time, since the machine is shared."""
    t0 = time.process_time()
    try:
        _, report = plan_checkpoint(mod, name, budget)
        out = report.summary()
    except InfeasibleBudgetError as err:
        out = f"infeasible: least {err.least_feasible}"
    return time.process_time() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bindings", type=int, nargs="+", default=[12500, 25000, 50000, 100000])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES) + [FORWARD])
    ap.add_argument("--budgets", nargs="+", default=["50%", "90%", "tight", "infeasible"])
    ap.add_argument("--profile", action="store_true", help="cProfile each run; print the top functions")
    ap.add_argument("--max-seconds", type=float, default=400.0, help="skip a shape's larger sizes past this")
    args = ap.parse_args()
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} cores={os.cpu_count()}", flush=True)
    print(f"{'shape':<11} {'budget':<10} {'bindings':>8} {'seconds':>8} {'ratio':>6}  result", flush=True)
    for shape in args.shapes:
        for budget in args.budgets:
            prev = None
            for target in args.bindings:
                mod, name = build(shape, layers_for(shape, target))
                n = bindings(mod, name)
                b = {"infeasible": 1, "tight": 1}.get(budget, budget)
                if budget == "tight":
                    # the least feasible budget, asked for exactly (its plan is checked to meet it)
                    _, out = time_pass(mod, name, 1)
                    b = int(out.split()[-1]) if out.startswith("infeasible") else 1
                prof = cProfile.Profile() if args.profile else None
                if prof:
                    prof.enable()
                secs, out = time_pass(mod, name, b)
                if prof:
                    prof.disable()
                ratio = f"{secs / prev[1] * prev[0] / n:6.2f}" if prev else "      "
                print(f"{shape:<11} {budget:<10} {n:>8} {secs:8.2f} {ratio}  {out[:110]}", flush=True)
                if prof:
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
                prev = (n, secs)
                if secs > args.max_seconds:
                    break


if __name__ == "__main__":
    main()
