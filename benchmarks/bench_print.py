"""Printing an adjoint against TVM 0.27's `script()` on the same module, CPU time.

Run by hand:  python benchmarks/bench_print.py [--bindings 2001 10001] [--repeat 3] [--tvm-max 10001]

The forward module is benchmarks/models.mlp_text (permute_dims, matmul, bias add, relu a layer, a
scalar loss: 4 * layers + 1 bindings); its adjoint comes from our Gradient (not timed). We time
`print_module` on it; TVM reads the text we print (`tvm.script.from_source`, not timed) and we time
its `IRModule.script()`. Times are process CPU seconds (time.process_time), best of --repeat, the
collector paused; the ratio compares the two measured in the same process.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrograd  # noqa: E402
from retrograd.parser import print_module  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from models import mlp_text  # noqa: E402


def best_cpu(fn, repeat: int):
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            t = time.process_time()
            result = fn()
            best = min(best, time.process_time() - t)
        finally:
            gc.enable()
    return best, result


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bindings", type=int, nargs="+", default=[2001, 10001])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tvm-max", type=int, default=10001, help="largest forward size TVM runs on (its parser takes minutes on the 35,003-binding adjoint)")
    args = ap.parse_args(argv)
    try:
        from tvm.script import from_source
    except ImportError:
        from_source = None
        print("TVM is not installed: timing ours only")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; CPU seconds, best of {args.repeat}")
    print(f"{'forward':>8} {'adjoint':>8} {'ours ms':>9} {'us/b':>6} {'TVM ms':>9} {'TVM/ours':>9}")
    for n in args.bindings:
        layers = max(1, (n - 1) // 4)
        adj = Gradient("main")(retrograd.parse(mlp_text(layers, transposed_weights=True, scalar_loss=True)))
        size = sum(len(b.bindings) for f in adj.functions().values() for b in f.body.blocks)
        ours, text = best_cpu(lambda: print_module(adj), args.repeat)
        theirs = None
        if from_source is not None and 4 * layers + 1 <= args.tvm_max:
            tmod = from_source(text)
            theirs, _ = best_cpu(tmod.script, args.repeat)
        tvm_ms = f"{theirs * 1e3:9.1f}" if theirs else f"{'-':>9}"
        ratio = f"{theirs / ours:9.2f}" if theirs else f"{'-':>9}"
        print(f"{4 * layers + 1:>8} {size:>8} {ours * 1e3:9.1f} {ours / size * 1e6:6.2f} {tvm_ms} {ratio}", flush=True)


if __name__ == "__main__":
    main()
