"""Step benchmark: a 4-layer MLP forward + backward step run by the executor vs the same step in NumPy.

Run by hand: ``python benchmarks/bench_step.py [--pairs 200] [--inner 5] [--threads 2]``.

Ways to compute the same step, timed interleaved in one process (the order rotates; each round keeps
every system's fastest of --inner runs; the figure is the median of per-round ratios, as shared
machines drift by 2x within seconds):
  numpy     the step written by hand in NumPy (the reference);
  kernels   retrograd's kernels called in straight-line Python (what the executor dispatches to);
  executor  the step as an IR module (backward written by hand with R.grad.nll_loss_backward,
            permute_dims/matmul, sum, where/greater), built with retrograd.build;
  adjoint   (when retrograd.passes.Gradient exists) the adjoint the Gradient pass generates.
executor / numpy is the overhead the target bounds (<= 1.15); executor / kernels isolates the
executor's own dispatch from the kernels' cost.
"""

from __future__ import annotations

import argparse
import os
import sys

_THREADS = "2"
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _THREADS = sys.argv[_i + 1]
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _THREADS
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import re  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import retrograd  # noqa: E402
from retrograd.ir import IRModule  # noqa: E402
from retrograd.ops import get  # noqa: E402

BATCH, IN, WIDTH, CLASSES, LAYERS = 64, 256, 256, 10, 4


def dims():
    return [IN] + [WIDTH] * (LAYERS - 1) + [CLASSES]


_PARAMS = """x: R.Tensor((B, I), "float32"), y: R.Tensor((B,), "int64"),
             w0: R.Tensor((I, W), "float32"), b0: R.Tensor((W,), "float32"),
             w1: R.Tensor((W, W), "float32"), b1: R.Tensor((W,), "float32"),
             w2: R.Tensor((W, W), "float32"), b2: R.Tensor((W,), "float32"),
             w3: R.Tensor((W, C), "float32"), b3: R.Tensor((C,), "float32")"""

_FORWARD = """
        z0 = R.add(R.matmul(x, w0), b0)
        h0 = R.nn.relu(z0)
        z1 = R.add(R.matmul(h0, w1), b1)
        h1 = R.nn.relu(z1)
        z2 = R.add(R.matmul(h1, w2), b2)
        h2 = R.nn.relu(z2)
        z3 = R.add(R.matmul(h2, w3), b3)
        logp = R.nn.log_softmax(z3)
        loss = R.nn.nll_loss(logp, y)"""

FORWARD = f"""
@R.function
def main({_PARAMS}):
    with R.dataflow():{_FORWARD}
        R.output(loss)
    return loss
"""

# The backward written by hand, as the Gradient pass would: log_softmax' is g - exp(logp) * sum(g),
# relu' is where(z > 0, g, 0), a matmul's gradients are matmuls with transposes.
STEP = f"""
@R.function
def step({_PARAMS}):
    with R.dataflow():{_FORWARD}
        dlogp = R.grad.nll_loss_backward(R.const(1.0, "float32"), logp, y)
        gsum = R.sum(dlogp, axis=[1], keepdims=True)
        dz3 = R.subtract(dlogp, R.multiply(R.exp(logp), gsum))
        dw3 = R.matmul(R.permute_dims(h2, axes=[1, 0]), dz3)
        db3 = R.collapse_sum_to(dz3, R.shape([C]))
        dz2 = R.where(R.greater(z2, R.const(0.0, "float32")), R.matmul(dz3, R.permute_dims(w3, axes=[1, 0])), R.const(0.0, "float32"))
        dw2 = R.matmul(R.permute_dims(h1, axes=[1, 0]), dz2)
        db2 = R.collapse_sum_to(dz2, R.shape([W]))
        dz1 = R.where(R.greater(z1, R.const(0.0, "float32")), R.matmul(dz2, R.permute_dims(w2, axes=[1, 0])), R.const(0.0, "float32"))
        dw1 = R.matmul(R.permute_dims(h0, axes=[1, 0]), dz1)
        db1 = R.collapse_sum_to(dz1, R.shape([W]))
        dz0 = R.where(R.greater(z0, R.const(0.0, "float32")), R.matmul(dz1, R.permute_dims(w1, axes=[1, 0])), R.const(0.0, "float32"))
        dw0 = R.matmul(R.permute_dims(x, axes=[1, 0]), dz0)
        db0 = R.collapse_sum_to(dz0, R.shape([W]))
        out = (loss, (dw0, db0, dw1, db1, dw2, db2, dw3, db3))
        R.output(out)
    return out
"""


def _script(text: str) -> IRModule:
    for name, value in (("B", BATCH), ("I", IN), ("W", WIDTH), ("C", CLASSES)):
        text = re.sub(rf"\b{name}\b", str(value), text)
    return retrograd.parse(text, "bench_step.py")


def forward_module() -> IRModule:
    """main(x, y, w0, b0, ..., w3, b3) -> loss: the forward pass alone (input of the Gradient pass)."""
    return _script(FORWARD)


def step_module() -> IRModule:
    """step(x, y, w0, b0, ...) -> (loss, (dw0, db0, ...)): forward and a hand-written backward."""
    return _script(STEP)


def numpy_step(x, y, *wb):
    """The reference: the step as one would write it in NumPy."""
    n = x.shape[0]
    hs, zs = [x], []
    h = x
    for i in range(LAYERS):
        z = h @ wb[2 * i] + wb[2 * i + 1]
        zs.append(z)
        h = np.maximum(z, 0) if i < LAYERS - 1 else z
        hs.append(h)
    shifted = h - h.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(n)
    loss = -logp[rows, y].mean()
    dlogp = np.zeros_like(logp)
    dlogp[rows, y] = -1.0 / n
    dz = dlogp - np.exp(logp) * dlogp.sum(axis=1, keepdims=True)
    grads = []
    for i in reversed(range(LAYERS)):
        grads = [hs[i].T @ dz, dz.sum(axis=0)] + grads
        if i > 0:
            dz = np.where(zs[i - 1] > 0, dz @ wb[2 * i].T, 0)
    return loss, tuple(grads)


_KERNELS: dict = {}


def kernels_step(x, y, *wb):
    """The executor's kernels called directly, in the module's order (no executor)."""
    if not _KERNELS:
        _KERNELS.update((name, get(name).kernel) for name in (
            "relax.matmul", "relax.add", "relax.nn.relu", "relax.nn.log_softmax", "relax.nn.nll_loss",
            "relax.grad.nll_loss_backward", "relax.sum", "relax.exp", "relax.multiply", "relax.subtract",
            "relax.permute_dims", "relax.collapse_sum_to", "relax.greater", "relax.where"))
    return _kernels_step(_KERNELS, x, y, wb)


def _kernels_step(k, x, y, wb):
    d = dims()
    one = np.asarray(1.0, np.float32)
    zero = np.asarray(0.0, np.float32)
    hs, zs = [x], []
    h = x
    for i in range(LAYERS):
        z = k["relax.add"](k["relax.matmul"](h, wb[2 * i], out_dtype=None), wb[2 * i + 1])
        zs.append(z)
        h = k["relax.nn.relu"](z) if i < LAYERS - 1 else z
        hs.append(h)
    logp = k["relax.nn.log_softmax"](h, axis=-1)
    loss = k["relax.nn.nll_loss"](logp, y, reduction="mean", ignore_index=-100)
    dlogp = k["relax.grad.nll_loss_backward"](one, logp, y, reduction="mean", ignore_index=-100)
    gsum = k["relax.sum"](dlogp, axis=(1,), keepdims=True)
    dz = k["relax.subtract"](dlogp, k["relax.multiply"](k["relax.exp"](logp), gsum))
    grads = []
    for i in reversed(range(LAYERS)):
        dw = k["relax.matmul"](k["relax.permute_dims"](hs[i], axes=(1, 0)), dz, out_dtype=None)
        db = k["relax.collapse_sum_to"](dz, (d[i + 1],))
        grads = [dw, db] + grads
        if i > 0:
            dh = k["relax.matmul"](dz, k["relax.permute_dims"](wb[2 * i], axes=(1, 0)), out_dtype=None)
            dz = k["relax.where"](k["relax.greater"](zs[i - 1], zero), dh, zero)
    return loss, tuple(grads)


def inputs(seed=0):
    rng = np.random.default_rng(seed)
    d = dims()
    x = rng.standard_normal((BATCH, IN), dtype=np.float32)
    y = rng.integers(0, CLASSES, BATCH)
    wb = []
    for i in range(LAYERS):
        wb += [
            (rng.standard_normal((d[i], d[i + 1]), dtype=np.float32) / np.float32(np.sqrt(d[i]))),
            rng.standard_normal(d[i + 1], dtype=np.float32) * np.float32(0.1),
        ]
    return x, y, wb


def _same(a, b, what):
    (la, ga), (lb, gb) = a, b
    np.testing.assert_allclose(la, lb, rtol=1e-4, err_msg=what)
    for u, v in zip(ga, gb):
        np.testing.assert_allclose(u, v, rtol=1e-3, atol=1e-5, err_msg=what)


def adjoint_module():
    """The Gradient pass's adjoint of the forward module, or None when the pass is not there yet."""
    try:
        from retrograd.passes import Gradient
    except ImportError:
        return None
    wanted = [f"{kind}{i}" for i in range(LAYERS) for kind in ("w", "b")]  # as the hand-written step
    return Gradient("main", require_grads=wanted)(forward_module())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200, help="rounds (default 200)")
    ap.add_argument("--inner", type=int, default=5, help="interleaved runs of each system per round (default 5)")
    ap.add_argument("--threads", default=_THREADS, help="BLAS threads (set before NumPy loads)")
    args = ap.parse_args(argv)

    x, y, wb = inputs()
    ex = retrograd.build(step_module())
    step = ex["step"]
    ref = numpy_step(x, y, *wb)
    _same(step(x, y, *wb), ref, "executor vs numpy")
    _same(kernels_step(x, y, *wb), ref, "kernels vs numpy")

    systems = {
        "numpy": lambda: numpy_step(x, y, *wb),
        "kernels": lambda: kernels_step(x, y, *wb),
        "executor": lambda: step(x, y, *wb),
    }
    note = ""
    try:
        adj = adjoint_module()
    except Exception as err:  # the pass is being written concurrently: report, don't fail the bench
        adj, note = None, f"Gradient pass failed on the forward module: {type(err).__name__}: {err}"
    if adj is not None:
        ex_adj = retrograd.build(adj)
        f_adj = ex_adj["main_adjoint"]
        _same(f_adj(x, y, *wb), ref, "adjoint vs numpy")
        systems["adjoint"] = lambda: f_adj(x, y, *wb)

    names = list(systems)
    for fn in systems.values():  # warm up caches and BLAS
        for _ in range(20):
            fn()
    # A round runs every system `inner` times, interleaved, and keeps each one's fastest run: bursts
    # of load from other processes hit one run, rarely all of them; the ratio is taken per round.
    times = {n: [] for n in names}
    for r in range(args.pairs):
        best = dict.fromkeys(names, float("inf"))
        for i in range(args.inner):
            k = (r + i) % len(names)
            for n in names[k:] + names[:k]:
                t0 = time.perf_counter()
                systems[n]()
                best[n] = min(best[n], time.perf_counter() - t0)
        for n in names:
            times[n].append(best[n])

    def ratio(a, b):
        return statistics.median(u / v for u, v in zip(times[a], times[b]))

    def bindings(mod, name):
        return sum(len(b.bindings) for b in mod[name].body.blocks)

    binds = f"{bindings(ex.mod, 'step')} bindings"
    if adj is not None:
        binds += f" (adjoint: {bindings(adj, 'main_adjoint')})"
    print(f"MLP step: batch {BATCH}, {LAYERS} layers {IN}->{WIDTH}x{LAYERS - 1}->{CLASSES}, float32; "
          f"{binds}; {args.pairs} rounds of {args.inner} interleaved runs (fastest kept), "
          f"BLAS threads {args.threads}")
    print(f"{'system':<10} {'median ms':>10} {'vs numpy':>9} {'vs kernels':>11}")
    for n in names:
        vs_k = f"{ratio(n, 'kernels'):>11.3f}" if n != "numpy" else f"{'':>11}"
        print(f"{n:<10} {statistics.median(times[n]) * 1e3:>10.3f} {ratio(n, 'numpy'):>9.3f} {vs_k}")
    print(f"executor overhead vs numpy: {ratio('executor', 'numpy'):.3f} (target <= 1.15)")
    print(f"peak live bytes of the step: {ex.stats.peak_live_bytes} (params {ex.stats.param_bytes})")
    if note:
        print(note)


if __name__ == "__main__":
    main()
