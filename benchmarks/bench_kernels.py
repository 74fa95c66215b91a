"""Kernel benchmark: retrograd's NumPy kernels against PyTorch CPU, as medians of interleaved per-pair ratios.

Run by hand: ``python benchmarks/bench_kernels.py [--repeats 7] [--threads 2] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import os
import sys

# Thread counts are fixed before NumPy and PyTorch load their pools, the same for both.
_THREADS = "2"
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _THREADS = sys.argv[_i + 1]
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = _THREADS
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from retrograd.ops.kernels import activation, attention, conv, conv_nd, index, loss, norm, pool, resample  # noqa: E402

aten = torch.ops.aten


# --clock cpu: CPU time of this process (with --threads 1, what the kernels cost on a loaded machine,
# where wall time mostly measures the scheduler).
CLOCK = time.perf_counter


def measure(ours, theirs, repeats: int, pause: float = 0.2):
    """Median times and the median of per-pair ratios; the order inside a pair alternates, with pauses
    so one library's spinning threads do not slow the other."""
    ours(), theirs()
    t_ours, t_theirs, ratios = [], [], []
    for r in range(repeats):
        pair = {}
        for name, fn in (("ours", ours), ("theirs", theirs)) if r % 2 == 0 else (("theirs", theirs), ("ours", ours)):
            time.sleep(pause)
            t0 = CLOCK()
            fn()
            pair[name] = CLOCK() - t0
        t_ours.append(pair["ours"])
        t_theirs.append(pair["theirs"])
        ratios.append(pair["ours"] / pair["theirs"])
    return statistics.median(t_ours), statistics.median(t_theirs), statistics.median(ratios)


def pool_cases(rng):
    x = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    xt = torch.from_numpy(x)
    for k, s, p in ((3, 2, 1), (2, 2, 0)):
        attrs = dict(pool_size=(k, k), strides=(s, s), padding=(p, p, p, p), dilation=(1, 1))
        oh = (56 + 2 * p - k) // s + 1
        g = rng.standard_normal((32, 64, oh, oh), dtype=np.float32)
        gt = torch.from_numpy(g)
        tag = f"k{k} s{s} p{p}"

        def torch_max_bwd(k=k, s=s, p=p, gt=gt):
            _, idx = aten.max_pool2d_with_indices(xt, [k, k], [s, s], [p, p])
            return aten.max_pool2d_with_indices_backward(gt, xt, [k, k], [s, s], [p, p], [1, 1], False, idx)

        yield (
            f"max_pool2d fwd {tag}",
            lambda a=attrs: pool.max_pool2d(x, **a),
            lambda k=k, s=s, p=p: torch.nn.functional.max_pool2d(xt, k, s, p),
            1.0,
        )
        yield (
            f"max_pool2d bwd {tag}",
            lambda a=attrs, g=g: pool.max_pool2d_backward(g, x, **a),
            torch_max_bwd,
            1.5,
        )
        yield (
            f"avg_pool2d fwd {tag}",
            lambda a=attrs: pool.avg_pool2d(x, **a, count_include_pad=True),
            lambda k=k, s=s, p=p: torch.nn.functional.avg_pool2d(xt, k, s, p),
            1.0,
        )
        yield (
            f"avg_pool2d bwd {tag}",
            lambda a=attrs, g=g: pool.avg_pool2d_backward(g, x, **a, count_include_pad=True),
            lambda k=k, s=s, p=p, gt=gt: aten.avg_pool2d_backward(gt, xt, [k, k], [s, s], [p, p], False, True, None),
            1.0,
        )


def loss_cases(rng):
    n, c = 4096, 1000
    logits = rng.standard_normal((n, c), dtype=np.float32)
    pred = activation.log_softmax(logits, axis=-1)
    tgt = rng.integers(0, c, n)
    g = np.float32(1.0)
    pt, tt, gt = torch.from_numpy(pred), torch.from_numpy(tgt), torch.tensor(1.0)
    total = torch.tensor(float(n))
    yield (
        "nll_loss_backward 4096x1000",
        lambda: loss.nll_loss_backward(g, pred, tgt, reduction="mean"),
        lambda: aten.nll_loss_backward(gt, pt, tt, None, 1, -100, total),
        1.5,
    )
    lt = torch.from_numpy(logits)
    yield (
        "softmax 4096x1000",
        lambda: activation.softmax(logits, axis=-1),
        lambda: torch.softmax(lt, dim=-1),
        None,
    )


def index_cases(rng):
    table = rng.standard_normal((50_000, 256), dtype=np.float32)
    idx = rng.integers(0, 50_000, 65_536)
    g = rng.standard_normal((65_536, 256), dtype=np.float32)
    tt, it, gt = torch.from_numpy(table), torch.from_numpy(idx), torch.from_numpy(g)
    yield ("take 50000x256 [65536]", lambda: index.take(table, idx, axis=0), lambda: tt.index_select(0, it), None)
    yield (
        "take_backward 50000x256 [65536]",
        lambda: index.take_backward(g, table, idx, axis=0),
        lambda: aten.embedding_dense_backward(gt, it, 50_000, -1, False),
        2.0,
    )


def conv_cases(rng):
    n, c, o, h = 32, 64, 64, 56
    x = rng.standard_normal((n, c, h, h), dtype=np.float32)
    w = rng.standard_normal((o, c, 3, 3), dtype=np.float32) * np.float32(0.05)
    g = rng.standard_normal((n, o, h, h), dtype=np.float32)
    xt, wt, gt = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(g)
    attrs = dict(strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)

    def torch_bwd(mask):
        return aten.convolution_backward(gt, xt, wt, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, mask)

    yield (
        "conv2d fwd 32x64x56x56 k3",
        lambda: conv.conv2d(x, w, **attrs),
        lambda: torch.nn.functional.conv2d(xt, wt, padding=1),
        1.5,
    )
    yield (
        "conv2d bwd data (conv2d_transpose)",
        lambda: conv.conv2d_transpose(g, w, **attrs, output_padding=(0, 0)),
        lambda: torch_bwd([True, False, False]),
        1.5,
    )
    # The weight gradient as TVM's conv2d gradient spells it: a conv2d in CNHW/IOHW layouts.
    yield (
        "conv2d bwd weight (conv2d CNHW)",
        lambda: conv.conv2d(
            x, g, strides=(1, 1), padding=(1, 1, 1, 1), dilation=(1, 1), groups=1,
            data_layout="CNHW", kernel_layout="IOHW", out_layout="CNHW",
        ),
        lambda: torch_bwd([False, True, False]),
        1.5,
    )


def norm_cases(rng):
    x = rng.standard_normal((8192, 1024), dtype=np.float32)
    g = rng.standard_normal(x.shape, dtype=np.float32)
    gamma, beta = rng.standard_normal(1024, dtype=np.float32), rng.standard_normal(1024, dtype=np.float32)
    xt, gt, gat, bet = (torch.from_numpy(a) for a in (x, g, gamma, beta))
    _, mean, rstd = aten.native_layer_norm(xt, [1024], gat, bet, 1e-5)
    yield (
        "layer_norm fwd 8192x1024",
        lambda: norm.layer_norm(x, gamma, beta, axes=[-1]),
        lambda: torch.nn.functional.layer_norm(xt, (1024,), gat, bet),
        2.0,
    )
    yield (
        "layer_norm bwd (dx, dgamma, dbeta)",
        lambda: norm.layer_norm_backward(g, x, gamma, axes=[-1]),
        lambda: aten.native_layer_norm_backward(gt, xt, [1024], mean, rstd, gat, bet, [True, True, True]),
        2.0,
    )
    xb = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    gb = rng.standard_normal(xb.shape, dtype=np.float32)
    c1, c0 = np.ones(64, np.float32), np.zeros(64, np.float32)
    xbt, gbt, c1t, c0t = (torch.from_numpy(a) for a in (xb, gb, c1, c0))
    _, smean, sinv = aten.native_batch_norm(xbt, c1t, c0t, None, None, True, 0.1, 1e-5)[:3]
    yield (
        "batch_norm train fwd 32x64x56x56",
        lambda: norm.batch_norm(xb, c1, c0, c0, c1, axis=1, training=True),
        lambda: aten.native_batch_norm(xbt, c1t, c0t, c0t.clone(), c1t.clone(), True, 0.1, 1e-5),
        2.0,
    )
    yield (
        "batch_norm train bwd",
        lambda: norm.batch_norm_backward(gb, c0, c0, xb, c1, c0, c1, axis=1, training=True),
        lambda: aten.native_batch_norm_backward(gbt, xbt, c1t, None, None, smean, sinv, True, 1e-5, [True, True, True]),
        2.0,
    )


def attention_cases(rng):
    b, s, n, h = 4, 512, 8, 64
    q, k, v = (rng.standard_normal((b, s, n, h), dtype=np.float32) for _ in range(3))
    g = rng.standard_normal((b, s, n, h), dtype=np.float32)
    # PyTorch's CPU kernel takes (B, N, S, H); the transposes are not timed.
    qt, kt, vt, gt = (torch.from_numpy(a).transpose(1, 2).contiguous() for a in (q, k, v, g))
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(qt, kt, vt, 0.0, True)
    yield (
        "attention fwd causal 4x512x8x64",
        lambda: attention.attention(q, k, v, causal_mask="TopLeft"),
        lambda: aten._scaled_dot_product_flash_attention_for_cpu(qt, kt, vt, 0.0, True),
        2.0,
    )
    yield (
        "attention bwd causal (dq, dk, dv)",
        lambda: attention.attention_backward(g, q, k, v, causal_mask="TopLeft"),
        lambda: aten._scaled_dot_product_flash_attention_for_cpu_backward(gt, qt, kt, vt, out, lse, 0.0, True),
        2.0,
    )


def conv1d_cases(rng):
    n, c, o, w = 32, 128, 128, 1024
    x = rng.standard_normal((n, c, w), dtype=np.float32)
    wt_ = rng.standard_normal((o, c, 3), dtype=np.float32) * np.float32(0.05)
    g = rng.standard_normal((n, o, w), dtype=np.float32)
    xt, wt, gt = torch.from_numpy(x), torch.from_numpy(wt_), torch.from_numpy(g)

    def torch_bwd(mask):
        return aten.convolution_backward(gt, xt, wt, None, [1], [1], [1], False, [0], 1, mask)

    yield (
        "conv1d fwd 32x128x1024 k3",
        lambda: conv_nd.conv1d(x, wt_, padding=1),
        lambda: torch.nn.functional.conv1d(xt, wt, padding=1),
        2.0,
    )
    yield (
        "conv1d bwd data (conv1d_transpose)",
        lambda: conv_nd.conv1d_transpose(g, wt_, padding=1),
        lambda: torch_bwd([True, False, False]),
        2.0,
    )
    yield (
        "conv1d bwd weight (conv1d CNW)",
        lambda: conv_nd.conv1d(x, g, padding=1, data_layout="CNW", kernel_layout="IOW", out_layout="CNW"),
        lambda: torch_bwd([False, True, False]),
        2.0,
    )


def resize_cases(rng):
    x = rng.standard_normal((32, 64, 56, 56), dtype=np.float32)
    g = rng.standard_normal((32, 64, 112, 112), dtype=np.float32)
    xt, gt = torch.from_numpy(x), torch.from_numpy(g)
    yield (
        "resize2d bilinear fwd 56->112",
        lambda: resample.resize(x, (112, 112), layout="NCHW"),
        lambda: torch.nn.functional.interpolate(xt, size=(112, 112), mode="bilinear"),
        2.0,
    )
    yield (
        "resize2d bilinear bwd",
        lambda: resample.resize_backward(g, x, layout="NCHW"),
        lambda: aten.upsample_bilinear2d_backward(gt, [112, 112], [32, 64, 56, 56], False),
        2.0,
    )


def matmul_cases(rng):
    a = rng.standard_normal((2048, 1024), dtype=np.float32)
    b = rng.standard_normal((1024, 1024), dtype=np.float32)
    at, bt = torch.from_numpy(a), torch.from_numpy(b)
    yield ("matmul 2048x1024 @ 1024x1024", lambda: np.matmul(a, b), lambda: torch.matmul(at, bt), None)


def math_cases(rng):
    from retrograd.ops.registry import get

    x = rng.standard_normal((1024, 1024), dtype=np.float32)
    idx = rng.integers(0, 1024, (1024, 256))
    upd = rng.standard_normal((1024, 256), dtype=np.float32)
    a = rng.standard_normal((64, 128, 64), dtype=np.float32)
    b = rng.standard_normal((64, 64, 128), dtype=np.float32)
    xt, it, ut, at_, bt = (torch.from_numpy(v) for v in (x, idx, upd, a, b))
    yield ("sort 1024x1024 axis=-1", lambda: get("relax.sort").kernel(x), lambda: torch.sort(xt, dim=-1, stable=True), None)
    yield ("topk 1024x1024 k=8", lambda: get("relax.topk").kernel(x, k=8), lambda: torch.topk(xt, 8), None)
    yield ("gather_elements 1024x1024 [1024x256]", lambda: get("relax.gather_elements").kernel(x, idx, axis=1),
           lambda: torch.gather(xt, 1, it), None)
    yield ("scatter_elements add [1024x256]", lambda: get("relax.scatter_elements").kernel(x, idx, upd, axis=1, reduction="add"),
           lambda: xt.scatter_add(1, it, ut), None)
    yield ("cumprod 1024x1024 axis=1", lambda: get("relax.cumprod").kernel(x, axis=1), lambda: torch.cumprod(xt, 1), None)
    yield ("einsum bij,bjk->bik 64x128x64", lambda: get("relax.einsum").kernel((a, b), "bij,bjk->bik"),
           lambda: torch.einsum("bij,bjk->bik", at_, bt), None)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=int(_THREADS))
    ap.add_argument("--only", default=None, help="run only the cases whose name contains this text")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    load = os.getloadavg()[0]
    print(f"threads={args.threads} repeats={args.repeats} clock={args.clock} numpy={np.__version__} torch={torch.__version__} load={load:.1f}")
    if load > 0.5 and args.threads > 1:
        # OpenBLAS threads spin-wait at every sync point; a busy machine deschedules them (seen: 5-10x
        # slower matmul-bound kernels), while PyTorch's pool degrades less. Ratios then mislead.
        print("note: the machine is busy; matmul-bound rows are unreliable with >1 thread (try --threads 1)")
    print(f"{'op':<36} {'ours ms':>9} {'torch ms':>9} {'ratio':>7} {'target':>8}")
    met = True
    with torch.no_grad():
        for group in (pool_cases, loss_cases, index_cases, conv_cases, norm_cases, attention_cases, conv1d_cases,
                      resize_cases, matmul_cases, math_cases):
            for name, ours, theirs, target in group(rng):
                if args.only and args.only not in name:
                    continue
                t_ours, t_theirs, ratio = measure(ours, theirs, args.repeats)
                verdict = "-" if target is None else (f"<{target:g} ok" if ratio < target else f"<{target:g} MISS")
                met &= target is None or ratio < target
                print(f"{name:<36} {t_ours * 1e3:9.2f} {t_theirs * 1e3:9.2f} {ratio:7.2f} {verdict:>8}", flush=True)
    print("all targets met" if met else "some targets missed")


if __name__ == "__main__":
    main()
