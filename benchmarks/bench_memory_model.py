"""Speed of the static memory model: peak_memory on large adjoints and long chains, against the measured peak.

Run by hand: ``python benchmarks/bench_memory_model.py [--layers 250 1000] [--chain 100000]``.

Prints, per MLP depth, the adjoint's binding count, the time of `retrograd.analysis.peak_memory` and of
one executor call (build excluded), and whether the prediction equals the measured `peak_live_bytes`;
then the time for a chain of `--chain` exp bindings. A checkpoint planner calls the model on every plan
it tries, so its cost per binding is what matters.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import retrograd  # noqa: E402
from models import mlp_text  # noqa: E402
from retrograd.analysis import peak_memory  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402


def adjoint_row(layers: int) -> str:
    mod = Gradient("main")(retrograd.parse(mlp_text(layers, 16, 4, scalar_loss=True)))
    n = sum(len(b.bindings) for b in mod["main_adjoint"].body.blocks)
    t0 = time.perf_counter()
    predicted = peak_memory(mod, "main_adjoint")
    model = time.perf_counter() - t0
    ex = retrograd.build(mod)
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(p.struct_info.shape) / 4).astype("float32") for p in mod["main"].params]
    t0 = time.perf_counter()
    ex["main_adjoint"](*args)
    run = time.perf_counter() - t0
    same = predicted == ex.stats.peak_live_bytes
    return f"{layers:>6}  {n:>8}  {model * 1e3:>9.1f}  {run * 1e3:>9.1f}  {model / n * 1e6:>11.1f}  {same!s:>5}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[250, 1000])
    ap.add_argument("--chain", type=int, default=100000)
    a = ap.parse_args()
    print(f"{'layers':>6}  {'bindings':>8}  {'model ms':>9}  {'run ms':>9}  {'us/binding':>11}  {'exact':>5}")
    for n in a.layers:
        print(adjoint_row(n))
    body = "\n".join(f"    v{i} = R.exp({'x' if i == 0 else f'v{i - 1}'})" for i in range(a.chain))
    mod = retrograd.parse(f'@R.function\ndef main(x: R.Tensor((4,), "float32")):\n{body}\n    return v{a.chain - 1}\n')
    t0 = time.perf_counter()
    peak_memory(mod, "main")
    print(f"chain of {a.chain} exp bindings: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
