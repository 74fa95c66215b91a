"""Training-step benchmark: retrograd's fused train_step vs PyTorch eager and TVM, same weights and data.

Run by hand: ``python benchmarks/bench_training.py [--rounds 5] [--steps 30] [--threads 1,2]
[--models mlp,mnist,digits] [--no-coretype] [--no-tvm]``; results are kept in benchmarks/RESULTS.md.

Each system runs in its own process (fresh interpreter, BLAS limited to --threads), retrograd and
torch alternate over --rounds rounds, and each round reports the median step time of --steps steps
after a warm-up; the table gives the median over rounds, the ratio retrograd / torch of those medians,
and the median (and range) of each round's own ratio, which a drifting machine load affects less. Models: (a) a
4-layer 256-wide MLP at batch 64; (b) PyTorch's MNIST example network (conv 1->32 k3, relu, conv
32->64 k3, relu, max_pool 2, dense 9216->10, log_softmax, nll) at batch 64 on 28x28; (c) the digits
CNN of retrograd.examples.digits (its dropout left out) at batch 32.

Also measured: the matmuls of one retrograd step (every np.matmul call the kernels make, recorded with
its shapes and operand layouts) timed alone in NumPy and with torch.matmul on the same arrays, so the
step ratio can be given with the BLAS difference factored out (our step - our matmuls + torch's
matmuls, over torch's step); 100 SGD steps from the same start in each system, compared by final
loss; TVM (when installed): our train_step printed as TVMScript, parsed by TVM, relax.build for llvm
(untuned) and run on its VirtualMachine (build time excluded; one round of a few steps). --clock cpu
times CPU time instead of wall time (for --threads 1 on a shared machine). --no-coretype
drops OPENBLAS_CORETYPE from the workers' environment (it pins NumPy's OpenBLAS to a kernel set;
`--coretype-only` measures what that costs on a float32 matmul).
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

MLP = """
@I.ir_module
class MLP:
    @R.function
    def main(x: R.Tensor((64, 256), dtype="float32"), w0: R.Tensor((256, 256), dtype="float32"), b0: R.Tensor((256,), dtype="float32"), w1: R.Tensor((256, 256), dtype="float32"), b1: R.Tensor((256,), dtype="float32"), w2: R.Tensor((256, 256), dtype="float32"), b2: R.Tensor((256,), dtype="float32"), w3: R.Tensor((256, 10), dtype="float32"), b3: R.Tensor((10,), dtype="float32")) -> R.Tensor((64, 10), dtype="float32"):
        with R.dataflow():
            h0 = R.nn.relu(R.add(R.matmul(x, w0), b0))
            h1 = R.nn.relu(R.add(R.matmul(h0, w1), b1))
            h2 = R.nn.relu(R.add(R.matmul(h1, w2), b2))
            out = R.nn.log_softmax(R.add(R.matmul(h2, w3), b3), axis=1)
            R.output(out)
        return out
"""


MNIST = """
@I.ir_module
class MnistNet:
    @R.function
    def main(x: R.Tensor((64, 1, 28, 28), dtype="float32"), c1_w: R.Tensor((32, 1, 3, 3), dtype="float32"), c1_b: R.Tensor((1, 32, 1, 1), dtype="float32"), c2_w: R.Tensor((64, 32, 3, 3), dtype="float32"), c2_b: R.Tensor((1, 64, 1, 1), dtype="float32"), fc_w: R.Tensor((9216, 10), dtype="float32"), fc_b: R.Tensor((10,), dtype="float32")) -> R.Tensor((64, 10), dtype="float32"):
        with R.dataflow():
            a = R.nn.relu(R.add(R.nn.conv2d(x, c1_w), c1_b))
            b = R.nn.relu(R.add(R.nn.conv2d(a, c2_w), c2_b))
            p = R.nn.max_pool2d(b, pool_size=[2, 2], strides=[2, 2])
            f = R.reshape(p, R.shape([64, 9216]))
            out = R.nn.log_softmax(R.add(R.matmul(f, fc_w), fc_b), axis=1)
            R.output(out)
        return out
"""


def _model(name):
    if name == "mlp":
        return MLP, (64, 256), 10
    if name == "mnist":
        return MNIST, (64, 1, 28, 28), 10
    # The example's model without dropout (PyTorch draws other masks: final losses could not be compared).
    from retrograd.examples.digits import MODEL

    return MODEL, (32, 1, 8, 8), 10


def _torch_forward(name, p, x):
    import torch.nn.functional as F

    if name == "mlp":
        h = x
        for i in range(3):
            h = F.relu(h @ p[f"w{i}"] + p[f"b{i}"])
        return F.log_softmax(h @ p["w3"] + p["b3"], dim=1)
    pad = 1 if name == "digits" else 0
    c1, c2 = ("c1", "c2") if name == "mnist" else ("conv1", "conv2")
    h = F.relu(F.conv2d(x, p[f"{c1}_w"], padding=pad) + p[f"{c1}_b"])
    h = F.relu(F.conv2d(h, p[f"{c2}_w"], padding=pad) + p[f"{c2}_b"])
    h = F.max_pool2d(h, 2).reshape(x.shape[0], -1)
    return F.log_softmax(h @ p["fc_w"] + p["fc_b"], dim=1)


def _retrograd_step_module(name):
    from retrograd.parser import parse
    from retrograd.training import SGD, NLLLoss, setup_trainer

    return setup_trainer(parse(_model(name)[0]), NLLLoss(), SGD(0.01))


def _tvm_step(name, arrays, x, y):
    """TVM's VirtualMachine running our train_step, parsed from its printed TVMScript."""
    import numpy as np
    import tvm
    from tvm import relax

    mod = _retrograd_step_module(name)
    tmod = tvm.script.from_source(mod.script())
    ex = relax.build(tvm.IRModule({"train_step": tmod["train_step"]}), target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    feed = {"x": x, "targets": y, "step": np.array(0.0)}
    args = [tvm.runtime.tensor(feed[p.name_hint] if p.name_hint in feed else arrays[p.name_hint])
            for p in mod["train_step"].params]
    return lambda: float(vm["train_step"](*args)[0].numpy())


def _layout(a):
    """'T' for a matrix (or stack) stored transposed (its last axis the outer one), else 'N'."""
    return "T" if a.ndim >= 2 and a.strides[-1] > a.strides[-2] else "N"


def _record_matmuls(step):
    """[(shape a, shape b, dtype, layout a, layout b)] of every np.matmul call one step makes."""
    import numpy as np

    calls, real = [], np.matmul

    def recording(a, b, *args, **kwargs):
        a, b = np.asarray(a), np.asarray(b)
        calls.append((a.shape, b.shape, str(np.result_type(a, b)), _layout(a), _layout(b)))
        return real(a, b, *args, **kwargs)

    np.matmul = recording
    try:
        step()
    finally:
        np.matmul = real
    return calls


def _matmul_times(calls, reps, lib):
    """Sum over the recorded calls of the median time of each, in NumPy or in torch.matmul. One library
    per process: torch's OpenMP threads and OpenBLAS's spin after each call, and alternating the two in
    one process at two threads made both 10-30x slower."""
    import numpy as np

    rng = np.random.default_rng(0)
    clock = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter
    if lib == "torch":
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    total = 0.0
    for sa, sb, dtype, la, lb in calls:
        def operand(shape, layout):
            if layout == "N":
                return rng.standard_normal(shape).astype(dtype)
            return np.swapaxes(rng.standard_normal(shape[:-2] + shape[:-3:-1]).astype(dtype), -1, -2)
        a, b = operand(tuple(sa), la), operand(tuple(sb), lb)
        if lib == "torch":
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            f = lambda: torch.matmul(ta, tb)  # noqa: E731
        else:
            f = lambda: np.matmul(a, b)  # noqa: E731
        times = []
        for _ in range(reps):
            t0 = clock()
            f()
            times.append(clock() - t0)
        total += statistics.median(times)
    return total


def worker(system, name, data_path, steps, check):
    import numpy as np

    with np.load(data_path) as d:
        arrays = {k: d[k] for k in d.files}
    x, y = arrays.pop("__x"), arrays.pop("__y")
    lr = 0.01
    if system.startswith("matmul_"):
        with open(data_path + ".matmuls.json") as f:
            return _matmul_times(json.load(f), max(5, steps), system[len("matmul_"):])
    if system == "tvm":
        step = _tvm_step(name, arrays, x, y)
    elif system == "retrograd":
        import retrograd
        from retrograd.training import Trainer

        retrograd.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))  # as torch.set_num_threads below
        t = Trainer(_retrograd_step_module(name))
        t.set_params(arrays)
        step = lambda: t.step(x, y)  # noqa: E731
    else:
        import torch

        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        p = {k: torch.tensor(v, requires_grad=True) for k, v in arrays.items()}
        opt = torch.optim.SGD(list(p.values()), lr=lr)
        tx, ty = torch.tensor(x), torch.tensor(y)

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.nll_loss(_torch_forward(name, p, tx), ty)
            loss.backward()
            opt.step()
            return loss.item()

    if check:
        losses = [step() for _ in range(100)]
        return {"final_loss": losses[-1]}
    loss0 = step()  # at the initial weights (TVM's step is always fed them: a check that it computes the same)
    for _ in range(2):
        step()
    clock = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter
    times = []
    for _ in range(steps):
        t0 = clock()
        step()
        times.append(clock() - t0)
    out = {"median_s": statistics.median(times), "loss0": loss0}
    if system == "retrograd":
        with open(data_path + ".matmuls.json", "w") as f:
            json.dump(_record_matmuls(step), f)
    return out


def _data(name, path):
    import numpy as np

    sys.path.insert(0, ROOT)
    from retrograd.parser import parse
    from retrograd.training import NLLLoss, SGD, Trainer, setup_trainer

    text, xshape, classes = _model(name)
    t = Trainer(setup_trainer(parse(text), NLLLoss(), SGD(0.01)))
    t.init_params("he_uniform", seed=0)
    rng = np.random.default_rng(0)
    np.savez(path, __x=rng.standard_normal(xshape).astype("float32"),
             __y=rng.integers(0, classes, xshape[0]).astype("int64"), **t.params)


def _env(threads, coretype=True, clock="wall"):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), TVM_NUM_THREADS=str(threads), PYTHONPATH=ROOT, BENCH_CLOCK=clock)
    if not coretype:
        env.pop("OPENBLAS_CORETYPE", None)
    return env


def _spawn(system, name, data, steps, env, check=False):
    cmd = [sys.executable, __file__, "--worker", system, "--models", name, "--data", data, "--steps", str(steps)]
    if check:
        cmd.append("--check")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{system} worker for {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


GEMM = """
import json, statistics, time, numpy as np
a, b = np.ones((64, 256), np.float32), np.ones((256, 256), np.float32)
c, d = np.ones((36864, 288), np.float32), np.ones((288, 64), np.float32)
def med(f, n):
    ts = []
    for _ in range(n):
        t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)
med(lambda: a @ b, 200)
print(json.dumps([med(lambda: a @ b, 2000), med(lambda: c @ d, 20)]))
"""


def coretype_cost(rounds, threads):
    """Median times of two float32 matmuls with OPENBLAS_CORETYPE as set here and without it, alternating."""
    times = {True: [], False: []}
    for r in range(rounds):
        for keep in (True, False) if r % 2 == 0 else (False, True):
            out = subprocess.run([sys.executable, "-c", GEMM], env=_env(threads, keep), capture_output=True, text=True, check=True)
            times[keep].append(json.loads(out.stdout))
    med = {k: [statistics.median(t[i] for t in v) for i in range(2)] for k, v in times.items()}
    setting = os.environ.get("OPENBLAS_CORETYPE", "(unset)")
    print(f"OPENBLAS_CORETYPE={setting}: 64x256 @ 256x256 {med[True][0] * 1e6:.1f} us, 36864x288 @ 288x64 "
          f"{med[True][1] * 1e3:.2f} ms; without it: {med[False][0] * 1e6:.1f} us, {med[False][1] * 1e3:.2f} ms "
          f"(x{med[True][0] / med[False][0]:.2f}, x{med[True][1] / med[False][1]:.2f}); {threads} thread(s)")


TARGETS = {"mlp": 1.2, "mnist": 1.5}


def _tvm_available():
    try:
        import tvm  # noqa: F401
    except ImportError:
        return False
    return True


def run_model(name, tmp, args, threads):
    data = os.path.join(tmp, f"{name}.npz")
    _data(name, data)
    env = _env(threads, not args.no_coretype, args.clock)
    times, loss0 = {"retrograd": [], "torch": []}, {}
    for r in range(args.rounds):
        order = ("retrograd", "torch") if r % 2 == 0 else ("torch", "retrograd")
        for system in order:
            res = _spawn(system, name, data, args.steps, env)
            times[system].append(res["median_s"])
            loss0[system] = res["loss0"]
    ours, theirs = (statistics.median(times[s]) * 1e3 for s in ("retrograd", "torch"))
    # Each round runs both systems back to back: its ratio cancels the machine's slow drifts (on this
    # shared VM both systems' step times moved by 20-30% within minutes).
    paired = sorted(a / b for a, b in zip(times["retrograd"], times["torch"]))
    mm_np, mm_t = (_spawn(f"matmul_{lib}", name, data, 20, env) * 1e3 for lib in ("numpy", "torch"))
    factored = (ours - mm_np + mm_t) / theirs
    target = TARGETS.get(name)
    tvm = "skipped" if args.no_tvm else "not installed"
    if not args.no_tvm and _tvm_available():
        try:
            res = _spawn("tvm", name, data, args.tvm_steps, env)
            tvm = f"{res['median_s'] * 1e3:.1f} ({res['median_s'] * 1e3 / ours:.1f}x ours; loss0 {res['loss0']:.6f} vs {loss0['retrograd']:.6f})"
        except RuntimeError as e:
            tvm = "build failed: " + str(e).splitlines()[-1][:200]
    fl = [_spawn(s, name, data, 0, env, check=True)["final_loss"] for s in ("retrograd", "torch")]
    print(f"| {name} | {threads} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x"
          f"{f' (target <= {target}x)' if target else ''} | {statistics.median(paired):.2f}x ({paired[0]:.2f}-{paired[-1]:.2f})"
          f" | {mm_np:.2f} / {mm_t:.2f} | {factored:.2f}x | {tvm} | "
          f"{fl[0]:.6f} / {fl[1]:.6f} (rel {abs(fl[0] - fl[1]) / abs(fl[1]):.1e}) |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", default="2", help="comma-separated thread counts, e.g. 1,2")
    ap.add_argument("--models", default="mlp,mnist,digits")
    ap.add_argument("--tvm-steps", type=int, default=3)
    ap.add_argument("--no-tvm", action="store_true")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: each process's CPU time (meaningful with --threads 1 on a loaded machine, where "
                         "wall time mostly measures the scheduler)")
    ap.add_argument("--no-coretype", action="store_true", help="run the workers without OPENBLAS_CORETYPE")
    ap.add_argument("--coretype-only", action="store_true", help="only measure what OPENBLAS_CORETYPE costs")
    ap.add_argument("--worker")
    ap.add_argument("--data")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.models, args.data, args.steps, args.check)))
        return
    thread_counts = [int(t) for t in args.threads.split(",")]
    if args.coretype_only:
        for threads in thread_counts:
            coretype_cost(max(3, args.rounds), threads)
        return
    print("| model | threads | retrograd ms | torch ms | ratio | per-round ratio, median (range) | matmuls alone: NumPy / torch ms | ratio, BLAS factored out "
          "| TVM untuned ms | final loss (100 SGD steps) retrograd / torch |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for threads in thread_counts:
            for name in args.models.split(","):
                run_model(name, tmp, args, threads)


if __name__ == "__main__":
    main()
