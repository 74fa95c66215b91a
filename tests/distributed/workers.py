"""Worker processes of the multi-process tests: `python workers.py TASK OUTDIR` under RANK/WORLD_SIZE/MASTER_*.

Each task writes `OUTDIR/rank{r}.npz` (what the parent test checks against its own reference) or exits
with the error it met. Started by `spawn` below (the tests), never imported by pytest as a test module.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SHAPE = (6, 6)  # divisible by 2 and 3 workers along both axes

# (op, attrs, input range): every collective, and the own ops their gradients use.
OPS = [
    ("allreduce", {"op_type": "sum"}, (-1, 1)),
    ("allreduce", {"op_type": "avg"}, (-1, 1)),
    ("allreduce", {"op_type": "prod"}, (0.5, 1.5)),
    ("allreduce", {"op_type": "min"}, (-1, 1)),
    ("allreduce", {"op_type": "max"}, (-1, 1)),
    ("allreduce", {"op_type": "sum", "in_group": False}, (-1, 1)),
    ("allgather", {"num_workers": "W"}, (-1, 1)),
    ("broadcast_from_worker0", {}, (-1, 1)),
    ("scatter_from_worker0", {"num_workers": "W", "axis": 0}, (-1, 1)),
    ("scatter_from_worker0", {"num_workers": "W", "axis": 1}, (-1, 1)),
    ("reduce_to_worker0", {}, (-1, 1)),
    ("gather_to_worker0", {"num_workers": "W", "axis": 1}, (-1, 1)),
    ("local_slice", {"num_workers": "W", "axis": 0}, (-1, 1)),
    ("local_embed", {"num_workers": "W", "axis": 1}, (-1, 1)),
]


def inputs(k: int, workers: int):
    """Every worker's input x for op k (each process can draw every worker's)."""
    lo, hi = OPS[k][2]
    return [np.random.default_rng(1000 * k + r).uniform(lo, hi, SHAPE) for r in range(workers)]


def attrs_for(k: int, workers: int) -> dict:
    return {a: (workers if v == "W" else v) for a, v in OPS[k][1].items()}


def attrs_text(k: int, workers: int) -> str:
    return "".join(f", {a}={v!r}" if not isinstance(v, str) else f', {a}="{v}"' for a, v in attrs_for(k, workers).items())


def op_module(k: int, workers: int):
    """forward(x) -> y and main(x, w) -> sum(y * w), with main's gradient (main_adjoint)."""
    import retrograd
    from retrograd.passes.gradient import Gradient

    call = f"R.ccl.{OPS[k][0]}(x{attrs_text(k, workers)})"
    x = f"x: R.Tensor({SHAPE}, dtype=\"float64\")"
    fwd = retrograd.parse(f"@R.function(pure=False)\ndef forward({x}):\n    y = {call}\n    return y\n")
    yshape = tuple(fwd["forward"].ret_struct_info.shape)
    text = (f"@I.ir_module\nclass Module:\n    @R.function(pure=False)\n    def forward({x}):\n        y = {call}\n        return y\n\n"
            f"    @R.function(pure=False)\n    def main({x}, w: R.Tensor({yshape}, dtype=\"float64\")):\n"
            f"        y = {call}\n        loss = R.sum(R.multiply(y, w))\n        return loss\n")
    return Gradient("main", require_grads=[0])(retrograd.parse(text)), yshape


def _collectives(out: Path, rank: int, workers: int) -> None:
    from retrograd.runtime import build

    results = {}
    for k in range(len(OPS)):
        mod, yshape = op_module(k, workers)
        exe = build(mod)
        xs = inputs(k, workers)
        w = weights(k, workers, yshape)[rank]
        results[f"y{k}"] = np.asarray(exe["forward"](xs[rank]))
        _, (gx,) = exe["main_adjoint"](xs[rank], w)
        results[f"g{k}"] = np.asarray(gx)
    np.savez(out / f"rank{rank}.npz", **results)


def weights(k: int, workers: int, yshape) -> list:
    return [np.random.default_rng(7000 + 31 * k + r).uniform(-1, 1, yshape) for r in range(workers)]


def _die(out: Path, rank: int, workers: int) -> None:
    """Worker 1 leaves after one collective (task "die": its process ends; "hang": it never comes back)."""
    from retrograd.ops.ccl import allreduce_kernel

    allreduce_kernel(np.ones(3))
    if rank == 1:
        if os.environ["TASK"] == "die":
            os._exit(3)
        time.sleep(120)
    time.sleep(0.5)
    allreduce_kernel(np.ones(3))  # fails: worker 1 is gone or never comes


# -- training --------------------------------------------------------------------------------
MLP = """
@R.function
def main(x: R.Tensor(("n", 6), dtype="float32"), w1: R.Tensor((6, 16), dtype="float32"), b1: R.Tensor((16,), dtype="float32"), w2: R.Tensor((16, 4), dtype="float32"), b2: R.Tensor((4,), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
    with R.dataflow():
        h = R.nn.relu(R.add(R.matmul(x, w1), b1))
        y = R.add(R.matmul(h, w2), b2)
        R.output(y)
    return y
"""
CONFIGS = [("mlp", "float64"), ("mlp", "float32"), ("cnn", "float64"), ("cnn", "float32")]
STEPS, BATCH, BUCKET = 20, 12, 2000


def train_setup(model: str, dtype: str):
    """(module from setup_trainer, 20 global batches): the same in every process and in the test."""
    import retrograd
    from retrograd.examples import digits
    from retrograd.training import Adam, CrossEntropyLoss, NLLLoss, setup_trainer

    if model == "mlp":
        text, loss = MLP, CrossEntropyLoss()
        rng = np.random.default_rng(5)
        x, y = rng.normal(size=(STEPS * BATCH, 6)), rng.integers(0, 4, STEPS * BATCH)
    else:
        text, loss = digits.MODEL, NLLLoss()
        x, y = digits.load_digits()
        x, y = x[:STEPS * BATCH], y[:STEPS * BATCH]
    mod = setup_trainer(retrograd.parse(text.replace("float32", dtype)), loss, Adam(1e-2))
    batches = [(x[i * BATCH:(i + 1) * BATCH].astype(dtype), y[i * BATCH:(i + 1) * BATCH].astype("int64"))
               for i in range(STEPS)]
    return mod, batches


def _train(out: Path, rank: int, workers: int) -> None:
    from retrograd.distributed import DataParallelTrainer

    results = {}
    for model, dtype in CONFIGS:
        mod, batches = train_setup(model, dtype)
        t = DataParallelTrainer(mod, bucket=BUCKET)
        t.init_params(seed=0)
        losses = [t.step(*b) for b in batches]
        results[f"{model}_{dtype}_losses"] = np.array(losses)
        for name, v in t.params.items():
            results[f"{model}_{dtype}_{name}"] = v
    np.savez(out / f"rank{rank}.npz", **results)


# -- training with buffers (BatchNorm's running statistics) against PyTorch DDP --------------------
BN_STEPS, BN_BATCH = 4, 12


def bn_net(torch):
    """Linear, BatchNorm1d, ReLU, Linear, BatchNorm1d, Linear in float64 with running statistics away
    from their start, the same in every process."""
    torch.manual_seed(0)
    nn = torch.nn
    net = nn.Sequential(nn.Linear(7, 8, bias=False), nn.BatchNorm1d(8, momentum=0.3), nn.ReLU(),
                        nn.Linear(8, 6, bias=False), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 5)).double()
    with torch.no_grad():
        for m in (net[1], net[4]):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.num_batches_tracked.fill_(3)
    return net


def bn_batches():
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((BN_BATCH, 7)), rng.integers(0, 5, BN_BATCH)) for _ in range(BN_STEPS)]


def _train_buffers(out: Path, rank: int, workers: int) -> None:
    """Write, by state_dict key, the DataParallelTrainer's parameters and buffers (`ours/KEY`) and those of
    PyTorch's DistributedDataParallel (`ddp/KEY`) after the same steps; each one's losses."""
    from optional import need
    from retrograd.distributed import DataParallelTrainer
    from retrograd.distributed.trainer import shard
    from retrograd.frontend import from_torch
    from retrograd.training import SGD, CrossEntropyLoss, setup_trainer

    torch = need("torch")  # the parent test skipped without it
    net = bn_net(torch)
    saved = {k: v.clone() for k, v in net.state_dict().items()}
    mod, params = from_torch(net, (torch.zeros((BN_BATCH // workers, 7), dtype=torch.float64),))
    net.load_state_dict(saved)  # export ran a forward in train mode: undo its update
    ir = dict(zip(params, (p.name_hint for p in mod["main"].params[1:])))
    t = DataParallelTrainer(setup_trainer(mod, CrossEntropyLoss(), SGD(0.05, momentum=0.9, weight_decay=0.01)))
    t.set_params({ir[k]: np.array(v) for k, v in params.items()})
    results = {"ours_losses": np.array([t.step(x, y) for x, y in bn_batches()])}
    for key, name in ir.items():
        results[f"ours/{key}"] = np.asarray(t.buffers[name] if name in t.buffer_names else t.params[name])

    ddp = torch.nn.parallel.DistributedDataParallel(net)  # broadcast_buffers=True, its default
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    losses = []
    for x, y in bn_batches():
        part = shard(len(x), rank, workers)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(torch.from_numpy(x[part])), torch.from_numpy(y[part]))
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    results["ddp_losses"] = np.array(losses)  # this worker's shard's loss
    for key, value in net.state_dict().items():
        results[f"ddp/{key}"] = value.numpy()
    np.savez(out / f"rank{rank}.npz", **results)


def spawn(task: str, workers: int, out: Path, timeout: float = 120.0, collective_timeout: float = 20.0,
          wait_for: int | None = None):
    """Start `workers` processes of `task` on localhost; return (returncodes, stderrs, seconds). Each is
    killed after `timeout` s (the test fails then). `wait_for`: wait for this rank only, kill the others."""
    from retrograd.distributed.launch import free_port

    port = free_port()
    procs = []
    start = time.monotonic()
    for r in range(workers):
        env = {**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(workers), "TASK": task,
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TEST_TIMEOUT": str(collective_timeout),
               "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tests"))), "OMP_NUM_THREADS": "1", "RETROGRAD_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, __file__, task, str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    codes, errs = [None] * workers, [""] * workers
    waited = range(workers) if wait_for is None else [wait_for]
    try:
        for r in waited:
            left = max(0.1, timeout - (time.monotonic() - start))
            _, errs[r] = procs[r].communicate(timeout=left)
            codes[r] = procs[r].returncode
    except subprocess.TimeoutExpired:
        pass
    finally:
        seconds = time.monotonic() - start
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    return codes, errs, seconds


def main() -> int:
    task, out = sys.argv[1], Path(sys.argv[2])
    from retrograd import distributed
    from retrograd.errors import DiagnosticError

    try:
        distributed.init(timeout=float(os.environ.get("TEST_TIMEOUT", "20")))
        rank, workers = distributed.rank(), distributed.world_size()
        {"collectives": _collectives, "die": _die, "hang": _die, "train": _train,
         "train_buffers": _train_buffers}[task](out, rank, workers)
        distributed.shutdown()
    except DiagnosticError as err:
        sys.stderr.write(f"error: {err}\n")
        distributed.exit_now(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
