"""Training-step benchmark: retrograd's fused train_step vs PyTorch eager, same weights and data.

Run by hand: ``python benchmarks/bench_training.py [--rounds 5] [--steps 30] [--threads 2] [--models mlp,mnist,digits]``.

Each system runs in its own process (fresh interpreter, BLAS limited to --threads), the systems
alternate over --rounds rounds, and each round reports the median step time of --steps steps after a
warm-up; the table gives the median over rounds and the ratio retrograd / torch. A separate check
runs 100 SGD steps in each system from the same weights and compares the final losses.
Models: (a) a 4-layer 256-wide MLP at batch 64; (b) PyTorch's MNIST example network (conv 1->32 k3,
relu, conv 32->64 k3, relu, max_pool 2, dense 9216->10, log_softmax, nll) at batch 64 on 28x28;
(c) the digits CNN of retrograd.examples.digits at batch 32. TVM is not measured here yet.
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


def worker(system, name, data_path, steps, check):
    import numpy as np

    with np.load(data_path) as d:
        arrays = {k: d[k] for k in d.files}
    x, y = arrays.pop("__x"), arrays.pop("__y")
    lr = 0.01
    if system == "retrograd":
        from retrograd.parser import parse
        from retrograd.training import SGD, NLLLoss, Trainer, setup_trainer

        t = Trainer(setup_trainer(parse(_model(name)[0]), NLLLoss(), SGD(lr)))
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
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"median_s": statistics.median(times)}


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


def _spawn(system, name, data, steps, threads, check=False):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads), PYTHONPATH=ROOT)
    cmd = [sys.executable, __file__, "--worker", system, "--models", name, "--data", data, "--steps", str(steps)]
    if check:
        cmd.append("--check")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="mlp,mnist,digits")
    ap.add_argument("--worker")
    ap.add_argument("--data")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.models, args.data, args.steps, args.check)))
        return
    print("| model | retrograd ms | torch ms | ratio | final loss (100 SGD steps) retrograd / torch |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            data = os.path.join(tmp, f"{name}.npz")
            _data(name, data)
            times = {"retrograd": [], "torch": []}
            for r in range(args.rounds):
                order = ("retrograd", "torch") if r % 2 == 0 else ("torch", "retrograd")
                for system in order:
                    times[system].append(_spawn(system, name, data, args.steps, args.threads)["median_s"])
            ours, theirs = (statistics.median(times[s]) * 1e3 for s in ("retrograd", "torch"))
            fl = [_spawn(s, name, data, 0, args.threads, check=True)["final_loss"] for s in ("retrograd", "torch")]
            print(f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x | {fl[0]:.6f} / {fl[1]:.6f} "
                  f"(rel {abs(fl[0] - fl[1]) / abs(fl[1]):.1e}) |", flush=True)


if __name__ == "__main__":
    main()
