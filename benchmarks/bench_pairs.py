"""Kernel pairing (runtime/pairs.py) on vs off in one process: two builds of the same train_step, calls alternated (order
rotating), the median of per-round ratios on/off (machine drift cancels).

Run by hand: ``python benchmarks/bench_pairs.py [digits|mnist] [rounds]`` (BLAS and kernels at two
threads). Models as benchmarks/bench_training.py builds them (digits CNN at batch 32, MNIST net at 64).
Pairing stays only while it pays on both (retrograd/tuning.py records the figures).
"""
import os
import statistics
import sys
import time

for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = "2"
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
model = sys.argv[1] if len(sys.argv) > 1 else "digits"
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 20
sys.path.insert(0, root); sys.path.insert(0, os.path.join(root, "benchmarks"))
import bench_training as bt  # noqa: E402
import numpy as np  # noqa: E402

import retrograd  # noqa: E402
from retrograd.runtime import pairs  # noqa: E402

mod = bt._retrograd_step_module(model)
on = retrograd.build(mod)["train_step"]
real = pairs.partners
pairs.partners = lambda ins: {}
off = retrograd.build(mod)["train_step"]
pairs.partners = real
rng = np.random.default_rng(0)
batch = 32 if model == "digits" else 64
args = []
for p in mod["train_step"].params:
    s = p.struct_info
    shape = tuple(batch if isinstance(d, str) else d for d in s.shape)
    if p.name_hint == "targets":
        args.append(rng.integers(0, 10, size=shape).astype(s.dtype))
    elif p.name_hint == "step":
        args.append(np.array(0.0, dtype=s.dtype))
    else:
        args.append((rng.standard_normal(shape) * 0.1).astype(s.dtype))
for f in (on, off, on, off):
    f(*args)
ratios, t_on, t_off = [], [], []
for r in range(rounds):
    order = [(on, t_on), (off, t_off)] if r % 2 == 0 else [(off, t_off), (on, t_on)]
    got = {}
    for f, acc in order:
        best = 1e9
        for _ in range(3):
            t = time.perf_counter(); f(*args); best = min(best, time.perf_counter() - t)
        acc.append(best); got[f is on] = best
    ratios.append(got[True] / got[False])
print(f"{model}: pairs on {statistics.median(t_on)*1e3:.2f} ms, off {statistics.median(t_off)*1e3:.2f} ms "
      f"(median of round minima); on/off median ratio {statistics.median(ratios):.3f} over {rounds} rounds")
