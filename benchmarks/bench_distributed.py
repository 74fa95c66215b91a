"""Data-parallel training over torch.distributed (gloo on localhost): step time, scaling, bytes, buckets.

Run by hand: ``python benchmarks/bench_distributed.py [--steps 20] [--models digits,mnist] [--workers 1,2]``;
the closing note and its table are kept in benchmarks/RESULTS.md.

Each configuration starts its worker processes afresh (RANK/WORLD_SIZE/MASTER_* as torchrun sets them,
one kernel and BLAS thread each); every worker warms up, then times --steps steps between barriers, and
the figure is worker 0's median time per global step. Weak scaling keeps the per-process batch (digits
CNN 32, MNIST net 64): efficiency = t(1 worker) / t(N workers), 1.0 meaning N times the examples in the
same time. Bytes communicated are counted at run time (every torch.distributed.all_reduce the step
issues, by wrapping it) and compared with the gradient bytes (the parameters' bytes): the IR step's
allreduces carry exactly those; the trainer adds one 8-byte allreduce of the loss for printing.
The bucket sweep reruns the MNIST net at 2 workers with buckets of 0 (one allreduce per gradient), 64 KiB
and 25 MiB. Last, allreduce alone is timed at 2 workers over message sizes, t = a + b * bytes is fitted,
and a ring allreduce model (t = 2(p-1) alpha + 2 (p-1)/p * bytes * beta, alpha = a/2, beta = b) projects
the communication per step for GPT-2-small's fp32 gradients (124,439,808 parameters) at 8, 64 and 512
workers: a projection from loopback TCP on one machine, not a measurement of any cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

GPT2_SMALL_PARAMS = 124_439_808
SIZES = [2**k for k in range(4, 25, 2)]  # 16 B .. 16 MiB


def _model(name: str):
    """(module text, per-process batch, input shape after the batch dim, classes)."""
    if name == "mnist":
        from bench_training import MNIST

        return MNIST, 64, (1, 28, 28), 10
    from retrograd.examples.digits import MODEL

    return MODEL, 32, (1, 8, 8), 10


# -- the worker ----------------------------------------------------------------------------------
def _count_bytes():
    import torch.distributed as dist

    counter = {"bytes": 0, "calls": 0}
    inner = dist.all_reduce

    def counting(tensor, *args, **kwargs):
        counter["bytes"] += tensor.numel() * tensor.element_size()
        counter["calls"] += 1
        return inner(tensor, *args, **kwargs)

    dist.all_reduce = counting
    return counter


def worker(task: dict) -> dict:
    import numpy as np

    from retrograd import distributed
    from retrograd.ops.kernels import parallel

    distributed.init(timeout=120)
    parallel.set_num_threads(1)
    if task["kind"] == "allreduce":
        return _allreduce_times(task)
    import retrograd
    from retrograd.training import Adam, NLLLoss, setup_trainer

    text, batch, shape, classes = _model(task["model"])
    workers = distributed.world_size()
    mod = setup_trainer(retrograd.parse(text), NLLLoss(), Adam(1e-3))
    trainer = distributed.DataParallelTrainer(mod, bucket=task["bucket"])
    trainer.init_params(seed=0)
    rng = np.random.default_rng(0)
    glob = batch * workers
    x = rng.normal(size=(glob, *shape)).astype("float32")
    y = rng.integers(0, classes, glob)
    counter = _count_bytes()
    for _ in range(3):
        trainer.step(x, y)
    times, before = [], counter["bytes"]
    calls = counter["calls"]
    for _ in range(task["steps"]):
        distributed.barrier()
        t0 = time.perf_counter()
        trainer.step(x, y)
        times.append(time.perf_counter() - t0)
    grad_bytes = sum(v.nbytes for v in trainer.params.values())
    step = trainer.mod["train_step"]
    return {"step_s": statistics.median(times), "bytes_per_step": (counter["bytes"] - before) / task["steps"],
            "calls_per_step": (counter["calls"] - calls) / task["steps"], "grad_bytes": grad_bytes,
            "ir_allreduces": step.script().count("R.ccl.allreduce(") if hasattr(step, "script") else
            retrograd.IRModule({"s": step}).script().count("R.ccl.allreduce(")}


def _allreduce_times(task: dict) -> dict:
    import numpy as np

    from retrograd import distributed
    from retrograd.ops.ccl import allreduce_kernel

    out = {}
    for n in SIZES:
        x = np.ones(n // 4, np.float32)
        for _ in range(3):
            allreduce_kernel(x, op_type="avg")
        reps = max(5, min(200, 2**22 // n))
        samples = []
        for _ in range(reps):
            distributed.barrier()
            t0 = time.perf_counter()
            allreduce_kernel(x, op_type="avg")
            samples.append(time.perf_counter() - t0)
        out[str(n)] = statistics.median(samples)
    return out


# -- the driver ----------------------------------------------------------------------------------
def launch(task: dict, workers: int) -> dict:
    from retrograd.distributed.launch import free_port

    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for r in range(workers):
            env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(workers),
                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONPATH": ROOT,
                   "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "RETROGRAD_NUM_THREADS": "1",
                   "BENCH_TASK": json.dumps(task), "BENCH_OUT": os.path.join(tmp, f"{r}.json")}
            procs.append(subprocess.Popen([sys.executable, __file__], env=env))
        for p in procs:
            if p.wait(timeout=900) != 0:
                raise SystemExit(f"a worker failed on {task}")
        with open(os.path.join(tmp, "0.json")) as f:
            return json.load(f)


def fit_alpha_beta(times: dict) -> tuple[float, float]:
    """t = a + b * bytes at 2 workers, least squares of the relative error (each size counts alike, so
    the small messages fix the latency and the large ones the bandwidth); ring allreduce at p = 2:
    t = 2 alpha + bytes * beta."""
    import numpy as np

    xs = np.array([float(k) for k in times])
    ys = np.array(list(times.values()))
    design = np.stack([np.ones_like(xs), xs], 1) / ys[:, None]
    (a, b), *_ = np.linalg.lstsq(design, np.ones_like(ys), rcond=None)
    return float(a) / 2, float(b)


def ring_allreduce(p: int, nbytes: float, alpha: float, beta: float) -> float:
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", default="digits,mnist")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--rounds", type=int, default=2, help="configurations alternate over rounds; medians are shown")
    args = ap.parse_args()
    cores = os.cpu_count()
    print(f"machine: {cores} cores; OPENBLAS_CORETYPE={'set to ' + os.environ['OPENBLAS_CORETYPE'] if 'OPENBLAS_CORETYPE' in os.environ else 'not set'}; "
          "gloo on localhost; one thread per process")
    counts = [int(w) for w in args.workers.split(",")]
    print("\n| model | workers | per-process batch | global batch | step (ms) | weak-scaling efficiency | "
          "allreduce bytes / step | gradient bytes | allreduces / step |")
    print("|---|---|---|---|---|---|---|---|---|")
    configs = [(m, w, "25MiB") for m in args.models.split(",") for w in counts]
    if 2 in counts and "mnist" in args.models:
        configs += [("mnist", 2, b) for b in (0, "64KiB")]
    runs: dict = {c: [] for c in configs}
    for _ in range(args.rounds):  # alternate: a drifting machine load touches every configuration alike
        for c in configs:
            runs[c].append(launch({"kind": "train", "model": c[0], "steps": args.steps, "bucket": c[2]}, c[1]))

    def med(c, key):
        return statistics.median(r[key] for r in runs[c])

    for model in args.models.split(","):
        base = med((model, counts[0], "25MiB"), "step_s")
        for w in counts:
            c = (model, w, "25MiB")
            batch = _model(model)[1]
            print(f"| {model} | {w} | {batch} | {batch * w} | {med(c, 'step_s') * 1e3:.2f} | "
                  f"{base / med(c, 'step_s'):.2f} | {med(c, 'bytes_per_step'):.0f} | "
                  f"{runs[c][0]['grad_bytes']} | {med(c, 'calls_per_step'):.0f} |", flush=True)
    if 2 in counts and "mnist" in args.models:
        print("\nBucket size (MNIST net, 2 workers):\n")
        print("| bucket | allreduces in the step | step (ms) |")
        print("|---|---|---|")
        for bucket in (0, "64KiB", "25MiB"):
            c = ("mnist", 2, bucket)
            print(f"| {bucket} | {runs[c][0]['ir_allreduces']} | {med(c, 'step_s') * 1e3:.2f} |", flush=True)
    times = launch({"kind": "allreduce"}, 2)
    alpha, beta = fit_alpha_beta(times)
    print("\nallreduce alone, 2 workers (median):\n")
    print("| bytes | time (us) | fitted (us) |")
    print("|---|---|---|")
    for k, t in times.items():
        print(f"| {k} | {t * 1e6:.1f} | {ring_allreduce(2, float(k), alpha, beta) * 1e6:.1f} |")
    nbytes = GPT2_SMALL_PARAMS * 4
    print(f"\nfit: alpha = {alpha * 1e6:.1f} us per message, beta = {beta * 1e9:.3f} ns per byte "
          f"({1 / beta / 1e9:.2f} GB/s)\n")
    print(f"PROJECTION (ring allreduce model, loopback-fitted) of the gradient allreduce per step, "
          f"GPT-2-small fp32 gradients ({nbytes / 2**20:.0f} MiB):\n")
    print("| workers | allreduce per step (s) |")
    print("|---|---|")
    for p in (8, 64, 512):
        print(f"| {p} | {ring_allreduce(p, nbytes, alpha, beta):.3f} |")
    return 0


if __name__ == "__main__":
    if "BENCH_TASK" in os.environ:
        result = worker(json.loads(os.environ["BENCH_TASK"]))
        from retrograd import distributed

        if distributed.rank() == 0:
            with open(os.environ["BENCH_OUT"], "w") as f:
                json.dump(result, f)
        distributed.shutdown()
        sys.exit(0)
    sys.exit(main())
