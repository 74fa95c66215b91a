"""Does every stage stay linear? parse, Gradient, checkpoint (50%), print, build and one run at growing sizes.

Run by hand:  python benchmarks/bench_scale.py [--bindings 10000 100000 1000000] [--shapes chain mlp]

Two forward shapes (small tensors, so that time is the framework's, not the kernels'):
- `chain`: h_i = sin(h_{i-1}) on a (4, 8) tensor, then a sum (one binding a layer);
- `mlp`: benchmarks/models.mlp_text layers (permute_dims, matmul, bias add, relu: four bindings a
  layer, each layer with its own (16, 16) weight and bias).
Each size runs in a process of its own. Stages: `parse` (text -> module), `gradient` (Gradient of
main, clean-up included), `checkpoint` (the planner on main_adjoint at 50% of its unplanned peak, or at the least feasible
budget where that is above 50%: the MLP's),
`print` (the planned module's script), `build` (retrograd.build of the planned module), `run` (one
call of main_adjoint; the first call lowers it, see runtime/program.py). For each: wall and CPU seconds
(the machine may be shared: CPU time is the figure to compare), CPU microseconds per forward binding, and the peak resident
memory above the stage's start (sampled every 2 ms from /proc/self/statm), per forward binding.
The summary's CPU time per binding over that of the smallest size: within 1.5 is the linear-scaling
target of issue 25; its last column, the process's peak resident memory so far (ru_maxrss) per binding.
On a shared machine, cap a big run's memory (children inherit the limit), e.g.
`prlimit --as=$((16*1024**3)) python benchmarks/bench_scale.py --bindings 1000000 --shapes chain`:
a run stopped by the limit still prints the stages it finished, and names the one it failed in.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

STAGES = ("parse", "gradient", "checkpoint", "print", "build", "run")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


class _PeakRss:
    """Peak resident bytes above the start while the block runs (a sampling thread)."""

    def __enter__(self):
        self.start = self.peak = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, _rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss())
        self.above = self.peak - self.start


def chain_text(n: int) -> str:
    from models import _module

    t = 'R.Tensor((4, 8), dtype="float32")'
    body, h = [], "x"
    for i in range(n - 1):
        body.append(f"h{i}: {t} = R.sin({h})")
        h = f"h{i}"
    body.append(f'gv: R.Tensor((), dtype="float32") = R.sum({h}, axis=None, keepdims=False)')
    return _module([f"x: {t}"], body)


def mlp_module_text(n: int) -> str:
    from models import mlp_text

    return mlp_text(max(1, (n - 1) // 4), transposed_weights=True, scalar_loss=True)


def _plan_half(adj, plan_checkpoint):
    """The adjoint planned at 50% of its unplanned peak, or, where parameters and gradients make that
    infeasible (the MLP: its activations are a small part), at the least feasible budget the refusal names."""
    from retrograd.passes.checkpoint import InfeasibleBudgetError

    try:
        return plan_checkpoint(adj, "main_adjoint", "50%")[0]
    except InfeasibleBudgetError as err:
        return plan_checkpoint(adj, "main_adjoint", err.least_feasible)[0]


def measure(shape: str, n: int, emit=None) -> dict:
    """Every stage of one size, in this process; returns {stage: (wall seconds, peak bytes above start,
    CPU seconds, the process's peak resident bytes so far)}. `emit(name, figures)` is called as each
    stage ends (a child prints it at once: a run stopped by a memory limit still reports the stages done)."""
    import resource

    import numpy as np

    import retrograd
    from retrograd.passes import Gradient
    from retrograd.passes.checkpoint import plan_checkpoint

    text = chain_text(n) if shape == "chain" else mlp_module_text(n)
    out: dict = {}

    def stage(name, fn):
        gc.collect()
        with _PeakRss() as mem:
            t, c = time.perf_counter(), time.process_time()
            value = fn()
            secs, cpu = time.perf_counter() - t, time.process_time() - c
        out[name] = (secs, mem.above, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        if emit is not None:
            emit(name, out[name])
        return value

    mod = stage("parse", lambda: retrograd.parse(text))
    del text
    forward = sum(len(b.bindings) for b in mod["main"].body.blocks)
    if emit is not None:
        emit("forward", forward)
    adj = stage("gradient", lambda: Gradient("main")(mod))
    planned = stage("checkpoint", lambda: _plan_half(adj, plan_checkpoint))
    stage("print", planned.script)
    ex = stage("build", lambda: retrograd.build(planned))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.struct_info.shape).astype("float32") for p in planned["main_adjoint"].params]
    stage("run", lambda: ex["main_adjoint"](*args))
    return {"forward": forward, **{k: v for k, v in out.items()}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bindings", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--shapes", nargs="+", default=["chain", "mlp"], choices=["chain", "mlp"])
    ap.add_argument("--one", nargs=2, metavar=("SHAPE", "N"), help=argparse.SUPPRESS)  # a child process
    args = ap.parse_args(argv)
    if args.one:
        from retrograd.gc_pause import collector_paused

        with collector_paused():
            measure(args.one[0], int(args.one[1]), lambda name, v: print(json.dumps([name, v]), flush=True))
        return
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}; {os.cpu_count()} CPUs")
    for shape in args.shapes:
        first: dict = {}
        print(
            f"\n{shape}: forward bindings, then per stage: wall seconds, CPU seconds, CPU us per forward binding, "
            "peak MB above the stage's start, bytes per binding, CPU time per binding / smallest size's, the "
            "process's peak resident bytes so far per binding"
        )
        for n in args.bindings:
            proc = subprocess.run([sys.executable, __file__, "--one", shape, str(n)], capture_output=True, text=True)
            rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("[")]
            fwd = dict(rows).get("forward", n)
            for name, (secs, above, cpu, maxrss) in (r for r in rows if r[0] != "forward"):
                per = cpu / fwd * 1e6
                first.setdefault(name, per)
                print(
                    f"{shape:>6} {fwd:>9} {name:>10} {secs:9.3f} s {cpu:9.3f} cpu {per:8.1f} us/b {above / 2**20:9.1f} MB "
                    f"{above / fwd:8.0f} B/b {per / first[name]:6.2f}x {maxrss / fwd:8.0f} B/b peak",
                    flush=True,
                )
            if proc.returncode != 0:
                done = [r[0] for r in rows if r[0] in STAGES]
                after = STAGES[len(done)] if len(done) < len(STAGES) else "the end"
                print(f"{shape} {n}: failed in {after} (exit status {proc.returncode})\n{proc.stderr[-2000:]}")
                break


if __name__ == "__main__":
    main()
