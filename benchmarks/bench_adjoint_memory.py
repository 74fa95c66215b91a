"""Memory of store-all adjoints: the executor's measured peak for N-layer MLPs (matmul, bias add, relu).

Run by hand: ``python benchmarks/bench_adjoint_memory.py [--layers 4 8 16 32] [--width 64] [--batch 512]``.

Prints, per depth, the measured `peak_live_bytes` of `main_adjoint` (Gradient of main) minus the
parameters, in units of one (batch, width) float32 activation, and the increase per layer. A store-all
adjoint must keep one activation per layer (each relu output: the weight gradient and the relu mask
read it); reading the mask from the relu's input would keep two.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import retrograd  # noqa: E402
from models import mlp_text  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402


def measure(layers: int, width: int, batch: int) -> float:
    """Peak intermediate bytes of the adjoint, in activations."""
    mod = Gradient("main")(retrograd.parse(mlp_text(layers, width, batch, scalar_loss=True)))
    ex = retrograd.build(mod)
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(p.struct_info.shape) / np.sqrt(width)).astype("float32") for p in mod["main"].params]
    ex["main_adjoint"](*args)
    return ex.stats.peak_intermediate_bytes / (batch * width * 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=512)
    a = ap.parse_args()
    print(f"{'layers':>6}  {'peak (activations)':>18}  {'per layer':>9}")
    prev = None
    for n in a.layers:
        peak = measure(n, a.width, a.batch)
        slope = "" if prev is None else f"{(peak - prev[1]) / (n - prev[0]):.3f}"
        print(f"{n:>6}  {peak:>18.2f}  {slope:>9}")
        prev = (n, peak)


if __name__ == "__main__":
    main()
