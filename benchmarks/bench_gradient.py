"""Gradient pass time on generated N-layer MLPs against TVM 0.27's Gradient, and adjoint binding counts.

Run by hand:  python benchmarks/bench_gradient.py [--bindings 101 1001 2001 10001 50001] [--tvm-max 10001]

Each layer is permute_dims(w), matmul, bias add, relu (4 bindings) with its own weight and bias, and a
final sum makes the scalar target: 4 * layers + 1 bindings. Both systems parse the same text (not
timed); only the pass is timed, our clean-up included (it is part of our Gradient). TVM 0.27's
Gradient grows quadratically (about 0.7 s at 2,001 bindings, 37 s at 10,001), so it only runs up to
--tvm-max bindings. Times are medians of repeated runs; ratios compare the two in the same run.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrograd  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from models import mlp_text  # noqa: E402


CPU = False  # --cpu: best process CPU time (a loaded machine's wall clock says little)


def timed(fn, repeat: int):
    times, result = [], None
    clock = time.process_time if CPU else time.perf_counter
    for _ in range(repeat):
        gc.collect()
        t = clock()
        result = fn()
        times.append(clock() - t)
    return (min(times) if CPU else statistics.median(times)), result


def bindings(func) -> int:
    return sum(len(block.bindings) for block in func.body.blocks)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bindings", type=int, nargs="+", default=[101, 1001, 2001, 10001, 50001])
    ap.add_argument("--tvm-max", type=int, default=10001, help="largest size TVM is run on")
    ap.add_argument("--cpu", action="store_true", help="time process CPU time, best of the runs, instead of wall-clock medians")
    args = ap.parse_args(argv)
    global CPU
    CPU = args.cpu
    try:
        import tvm
        from tvm import relax
    except ImportError:
        tvm = None
        print("TVM is not installed: timing ours only")

    print(f"{'bindings':>9} {'ours ms':>10} {'us/binding':>10} {'TVM ms':>10} {'TVM/ours':>9} {'adjoint ours':>13} {'adjoint TVM':>12}")
    for n in args.bindings:
        layers = max(1, (n - 1) // 4)
        text = mlp_text(layers, transposed_weights=True, scalar_loss=True)
        size = 4 * layers + 1
        repeat = 5 if size <= 2001 else 3 if size <= 10001 else 1
        mod = retrograd.parse(text)
        ours_t, ours = timed(lambda: Gradient("main")(mod), repeat)
        ours_n = bindings(ours["main_adjoint"])
        tvm_t = tvm_n = None
        if tvm is not None and size <= args.tvm_max:
            tmod = tvm.script.from_source(text)
            tvm_t, theirs = timed(lambda: relax.transform.Gradient("main")(tmod), 3 if size <= 2001 else 1)
            tvm_n = bindings(theirs["main_adjoint"])
        ratio = f"{tvm_t / ours_t:9.2f}" if tvm_t else f"{'-':>9}"
        tvm_ms = f"{tvm_t * 1e3:10.1f}" if tvm_t else f"{'-':>10}"
        print(
            f"{size:>9} {ours_t * 1e3:10.1f} {ours_t / size * 1e6:10.1f} {tvm_ms} {ratio} {ours_n:>13} {tvm_n if tvm_n else '-':>12}",
            flush=True,
        )


if __name__ == "__main__":
    main()
