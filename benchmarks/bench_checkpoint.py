"""The checkpoint pass on chains, transformer-like blocks and a ResNet-like CNN: peaks, recomputation, time.

Run by hand:  python benchmarks/bench_checkpoint.py [--quick] [--repeat 5]

(S1) 100-layer `sin` chain and 100-layer matmul+relu chain: store-all, sqrt, and budgets of c = 5, 10, 20
     slots (the input counted): measured peak in activations above the parameters, extra forward steps
     against the optimum computed here: Revolve's (Griewank & Walther's dynamic programme) for `sin`; for
     matmul+relu, whose weight gradients pile up as the backward goes, the same recursion with the slots
     left beside the backward's own memory at each layer (measured with the exact memory model), time ratio.
(S2) 24 transformer-like blocks: budgets of 0.1 .. 1.0 of the unplanned activation peak (peak minus
     parameters): measured peak, extra FLOPs (all / matmul), time ratio; target: >= 40% of the activation
     memory saved with zero extra matmul FLOPs.
(S3) a ResNet-like CNN (3 stages of 8 blocks) at 1/3 of the unplanned activation peak: least feasible
     share, extra FLOPs, time overhead (target <= 20%).
(S4) planning time of a 10,000-binding adjoint (target < 2 s).
(S5) torch, torchvision and transformers installed: the same torch.export graphs of a torchvision ResNet-18
     (train mode, 3x64x64 images) and a small Hugging Face GPT-2 (the tests' config: 2 layers, 16 wide,
     vocabulary 50, 16 tokens; eval mode, so no dropout) at batch 64, against PyTorch's own partitioner
     (min_cut_rematerialization_partition under activation_memory_budget 1.0 .. 0.1): PyTorch's step
     peak counted by our executor's rule and its recomputed matmul/conv FLOPs (pytorch_partitioner.py
     says how), then retrograd's Gradient + checkpoint planned to that peak: its peak (the memory
     model, exact for the executor; checked against the executor at batch 2) and recomputed matmul/conv
     FLOPs. Planned and counted statically: batch 64 is not executed.
Peaks are the executor's `peak_live_bytes`. Times alternate the compared functions run by run and report
the median ratio. OPENBLAS_CORETYPE is set on this machine (printed below): matmul speed depends on it.
On a machine busier than its cores, OpenBLAS threads spin at every call's sync points and a single run
varies tenfold; time there with OPENBLAS_NUM_THREADS=1 (printed below too).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrograd  # noqa: E402
from retrograd.analysis import memory_timeline, peak_memory  # noqa: E402
from retrograd.ir.vars import read_vars  # noqa: E402
from retrograd.ir.expr import Call  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from retrograd.passes.checkpoint import InfeasibleBudgetError, plan_checkpoint  # noqa: E402
from models import chain_text, matmul_relu_chain_text, resnet_text, transformer_text  # noqa: E402

FN = "main_adjoint"


def revolve_extra(steps: int, slots: int) -> int:
    """Least extra forward steps to reverse `steps` steps with `slots` checkpoints, the input counted.

    T(l, s): forward steps to reverse l steps holding s free slots besides the current start; the start
    of the segment is stored. T(1, s) = 0; T(l, 0) = l(l-1)/2; T(l, s) = min_j j + T(l-j, s-1) + T(j, s).
    The store-nothing sweep does l-1 forward steps anyway, so the extra is T(l, c-1) - (l-1).
    """
    T = [[0] * slots for _ in range(steps + 1)]
    for length in range(2, steps + 1):
        T[length][0] = length * (length - 1) // 2
        for s in range(1, slots):
            T[length][s] = min(j + T[length - j][s - 1] + T[j][s] for j in range(1, length))
    return T[steps][slots - 1] - (steps - 1)


def chain_slots(mod, layers: int, budget: int, act: int) -> list[int]:
    """slots[r]: how many layer outputs h_k (h_r among them) fit beside the backward's own memory while
    layer r's gradient is formed, measured on the store-all adjoint with the exact memory model: its
    live bytes, less the parameters and the h_k it still holds, give the backward's memory."""
    func = mod[FN]
    timeline = memory_timeline(mod, FN)
    bindings = [b for block in func.body.blocks for b in block.bindings]
    index = {b.var: t for t, b in enumerate(bindings)}
    layer_of = {b.var: int(b.var.name_hint[1:]) for b in bindings if re.fullmatch(r"h\d+", b.var.name_hint)}
    first, last = {}, {}  # layer -> binding of the first / last backward read of its output
    for t, b in enumerate(bindings):
        reads: list = []
        read_vars(b.value, reads)
        for v in reads:
            if v in layer_of and t > index[v] + 1:  # a backward read (not the next forward matmul)
                first.setdefault(layer_of[v], t)
                last[layer_of[v]] = t
    slots = []
    for r in range(layers):
        end = first[r - 1] if r > 0 else len(bindings)
        worst = 0
        for t in range(first[r], end):
            held = sum(1 for k in range(layers) if t <= last[k])  # store-all: h_k lives to its last read
            worst = max(worst, timeline.during[t] - timeline.param_bytes - held * act)
        slots.append((budget - timeline.param_bytes - worst) // act)
    return slots


def chain_optimum(slots: list[int]) -> int | None:
    """Least extra forward steps (a matmul and its relu each) to reverse the chain when at most slots[r]
    layer outputs may be held while layer r is reversed (its own among them): Revolve's recursion with a
    slot budget that varies along the chain. E(i, j, h): reverse layers j..i+1 from h_i, h outputs held;
    the first sweep stores its checkpoints for free. None when no plan fits."""
    L = len(slots)
    H = max(max(slots), 0) + 1
    inf = float("inf")
    # E[sweep][i + 1][j + 1][h]: i = -1 is the input x (a parameter, not held).
    E = [[[[0.0] * (H + 1) for _ in range(L + 1)] for _ in range(L + 1)] for _ in range(2)]
    for length in range(1, L + 1):
        for i in range(-1, L - length):
            j = i + length
            for sweep in (0, 1):
                for h in range(H + 1):
                    best = inf
                    for k in range(i + 1, j + 1):
                        if h + 1 > slots[k] or h + 1 > H:
                            continue
                        inner = E[sweep][k + 1][j + 1][h + 1]
                        rest = E[0][i + 1][k][h]
                        cost = (0 if sweep else k - i) + inner + rest
                        if cost < best:
                            best = cost
                    E[sweep][i + 1][j + 1][h] = best
    best = E[1][0][L][0]
    return None if best == inf else int(best)


def adjoint(text: str):
    return Gradient("main")(retrograd.parse(text))


def inputs(func, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        shape = [int(d) for d in p.struct_info.shape]
        scale = 1.0 / np.sqrt(shape[0]) if len(shape) == 2 and p.name_hint.startswith("w") else 0.5
        out.append((rng.standard_normal(shape) * scale).astype("float32"))
    return out


def measure(mod, args) -> int:
    ex = retrograd.build(mod)
    ex[FN](*args)
    return ex.stats.peak_live_bytes


def time_ratio(base, other, args, repeat: int) -> float:
    """time(other) / time(base): medians of per-call times over alternating samples of a few calls each."""
    fns = [retrograd.build(base)[FN], retrograd.build(other)[FN]]
    t = time.perf_counter()
    for f in fns:
        f(*args)  # warm-up, and the size of a sample
    calls = max(1, int(0.05 / max(time.perf_counter() - t, 1e-6)))
    samples: list[list[float]] = [[], []]
    for _ in range(repeat):
        for k, f in enumerate(fns):
            gc.collect()
            t = time.perf_counter()
            for _ in range(calls):
                f(*args)
            samples[k].append((time.perf_counter() - t) / calls)
    return statistics.median(samples[1]) / statistics.median(samples[0])


def recomputed_ops(mod) -> dict:
    """op name -> number of recomputed bindings (named <v>_cp) in the planned function."""
    counts: dict = {}
    for block in mod[FN].body.blocks:
        for b in block.bindings:
            if b.var.name_hint.endswith("_cp") and isinstance(b.value, Call):
                name = getattr(b.value.op, "name", "?").replace("relax.", "")
                counts[name] = counts.get(name, 0) + 1
    return counts


def least_feasible(mod) -> int:
    try:
        plan_checkpoint(mod, FN, 1)
    except InfeasibleBudgetError as err:
        return err.least_feasible
    raise AssertionError("a 1-byte budget was met")


def s1(layers: int, repeat: int) -> None:
    print(f"\n(S1) {layers}-layer chains: peak in activations above the parameters; extra forward steps vs Revolve")
    for label, text, step_op in (
        ("sin", chain_text(layers, width=64, batch=256), "sin"),
        ("matmul+relu", matmul_relu_chain_text(layers, width=64, batch=256), "matmul"),
    ):
        mod = adjoint(text)
        args = inputs(mod[FN])
        act = 256 * 64 * 4  # one activation; the matmul chain's weights (and gradients) are 1/4 of one
        pinned = sum(a.nbytes for a in args)
        full = measure(mod, args)
        base = least_feasible(mod)
        print(f"  {label}: store-all peak {(full - pinned) / act:.1f} act; least feasible {(base - pinned) / act:.1f} act")
        print(f"    {'plan':<14} {'peak (act)':>10} {'extra fwd':>10} {'optimum':>8} {'time x':>7}  recomputed ops")
        rows = [("store-all", None, None), ("sqrt", None, "sqrt")]
        rows += [(f"c={c}", base + (c - 1) * act, "budget") for c in (5, 10, 20)]
        for name, budget, policy in rows:
            if policy is None:
                planned = mod
            else:
                planned, _ = plan_checkpoint(mod, FN, budget, policy)
            peak = measure(planned, args)
            ops = recomputed_ops(planned)
            extra = ops.get(step_op, 0)
            opt = None
            if name.startswith("c=") and label == "sin":
                opt = revolve_extra(layers, int(name[2:]))
            elif name.startswith("c="):
                opt = chain_optimum(chain_slots(mod, layers, budget, act))
            ratio = time_ratio(mod, planned, args, repeat) if planned is not mod else 1.0
            print(
                f"    {name:<14} {(peak - pinned) / act:>10.1f} {extra:>10} {opt if opt is not None else '-':>8} "
                f"{ratio:>7.2f}  {ops or '-'}"
            )


def s2(blocks: int, repeat: int) -> None:
    print(f"\n(S2) {blocks} transformer-like blocks: budgets as fractions of the unplanned activation peak")
    mod = adjoint(transformer_text(blocks, seq=64, d=64))
    args = inputs(mod[FN])
    pinned = sum(a.nbytes for a in args)
    full = measure(mod, args)
    act_full = full - pinned
    print(f"  unplanned peak {full} B (activations {act_full} B)")
    print(f"    {'budget':<8} {'peak act':>9} {'saved':>6} {'extra FLOPs':>12} {'matmul':>10} {'time x':>7}")
    best = None
    rows = [(f"{f / 10:.1f}", pinned + act_full * f // 10, "budget") for f in range(1, 11)]
    rows += [("cheap", None, "cheap"), ("sqrt", None, "sqrt")]
    for name, budget, policy in rows:
        try:
            planned, report = plan_checkpoint(mod, FN, budget, policy)
        except InfeasibleBudgetError as err:
            print(f"    {name:<8} infeasible (least feasible {err.least_feasible} B)")
            continue
        peak = measure(planned, args)
        saved = 1 - (peak - pinned) / act_full
        ratio = time_ratio(mod, planned, args, repeat) if planned is not mod else 1.0
        print(
            f"    {name:<8} {peak - pinned:>9} {saved:>6.1%} {report.extra_cost:>12.3g} "
            f"{report.extra_matmul_cost:>10.3g} {ratio:>7.2f}"
        )
        if report.extra_matmul_cost == 0 and (best is None or saved > best[1]):
            best = (name, saved)
    if best is not None:
        print(f"  most activation memory saved with zero extra matmul FLOPs: {best[1]:.1%} ({best[0]}; target >= 40%)")


def s3(repeat: int) -> None:
    # 3 stages of 8 blocks (50 convolutions): with 2 blocks a stage the least feasible peak is 66% of the
    # activations (the backward's own working set), so 1/3 cannot be met at all.
    print("\n(S3) ResNet-like CNN (3 stages x 8 residual blocks) at 1/3 of the unplanned activation peak")
    mod = adjoint(resnet_text(stages=3, blocks=8, channels=16, size=32, batch=8))
    args = inputs(mod[FN])
    pinned = sum(a.nbytes for a in args)
    full = measure(mod, args)
    budget = pinned + (full - pinned) // 3
    try:
        plan_checkpoint(mod, FN, pinned)
    except InfeasibleBudgetError as err:
        least = err.least_feasible
    print(f"  least feasible budget found {least} B ({(least - pinned) / (full - pinned):.1%} of the activations)")
    try:
        planned, report = plan_checkpoint(mod, FN, budget)
    except InfeasibleBudgetError:
        print("  infeasible at 1/3; planning at the least feasible budget")
        planned, report = plan_checkpoint(mod, FN, least)
    peak = measure(planned, args)
    ratio = time_ratio(mod, planned, args, repeat)
    print(f"  activations {full - pinned} -> {peak - pinned} B ({(peak - pinned) / (full - pinned):.1%}); {report.summary()}")
    print(f"  time overhead {ratio - 1:+.1%} (target <= +20%)")


def s4(bindings: int) -> None:
    print(f"\n(S4) planning time of a {bindings:,}-binding adjoint")
    layers = 1
    while True:
        mod = adjoint(transformer_text(layers, seq=8, d=8))
        n = sum(len(b.bindings) for b in mod[FN].body.blocks)
        if n >= bindings:
            break
        layers = max(layers + 1, int(layers * bindings / n) + 1)
    for budget in ("80%", "60%"):
        gc.collect()
        t = time.perf_counter()
        try:
            _, report = plan_checkpoint(mod, FN, budget)
            what = report.summary()
        except InfeasibleBudgetError as err:
            what = f"infeasible (least feasible {err.least_feasible} B)"
        dt = time.perf_counter() - t
        print(f"  {layers} transformer-like blocks, {n} bindings, budget {budget}: {dt:.2f} s (target < 2 s); {what}")


def torch_models(batch: int):
    """[(label, torch module, example args)] or None when torch, torchvision or transformers is missing."""
    try:
        import torch

        # torchvision's wheel here is built against a CUDA torch: skip its C ops' fake registrations
        # (tests/optional.need_torchvision does the same).
        sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
        import torchvision
        import transformers
    except ImportError as err:
        print(f"\n(S5) skipped: {err} (pip install torch torchvision transformers)")
        return None
    torch.manual_seed(0)
    resnet = torchvision.models.resnet18(num_classes=10).train()
    cfg = transformers.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=16, use_cache=False,
                                  bos_token_id=0, eos_token_id=0)
    gpt2 = transformers.GPT2LMHeadModel(cfg).eval()
    return [
        ("ResNet-18 3x64x64", resnet, (torch.randn(batch, 3, 64, 64),)),
        ("GPT-2 2x16, 16 tokens", gpt2, (torch.randint(0, 50, (batch, 16)),)),
    ]


def torch_adjoint(ep, module):
    """retrograd's adjoint of an exported program: the first output's vjp over the float parameters."""
    from retrograd.frontend import from_exported_program

    mod, params = from_exported_program(ep)
    func = mod["main"]
    inputs = len(func.params) - len(params)
    by_name = dict(module.named_parameters())
    ir = {k: p.name_hint for k, p in zip(params, func.params[inputs:])}
    wrt = [ir[k] for k in params if k in by_name and by_name[k].requires_grad]
    return Gradient("main", wrt, 0, seeds="param")(mod), params


def confirm_model(module, args) -> str:
    """At batch 2: the executor's measured peak equals the memory model's, unplanned and planned."""
    import torch

    small = tuple(a[:2] for a in args)
    ep = torch.export.export(module, small, strict=False)
    adj, params = torch_adjoint(ep, module)
    func = adj[FN]
    rng = np.random.default_rng(0)
    values = [a.numpy() for a in small] + list(params.values())
    out = func.ret_struct_info.fields[0].fields[0]
    values.append(rng.standard_normal([int(d) for d in out.shape]).astype(out.dtype))
    full = peak_memory(adj, FN)
    least = least_feasible(adj)
    planned, _ = plan_checkpoint(adj, FN, (least + full) // 2)
    got = [measure(m, values) for m in (adj, planned)]
    want = [full, peak_memory(planned, FN)]
    return f"batch 2: executor {got} B, model {want} B ({'equal' if got == want else 'DIFFERENT'})"


def s5(batch: int) -> None:
    import torch

    from pytorch_partitioner import partition, recomputed_flops, step_peak

    models = torch_models(batch)
    if models is None:
        return
    mib = 2**20
    print(f"\n(S5) against PyTorch's min-cut partitioner at batch {batch} (MiB of the whole step; GFLOPs recomputed in matmul/conv)")
    for label, module, args in models:
        ep = torch.export.export(module, args, strict=False)
        adj, _ = torch_adjoint(ep, module)
        full = peak_memory(adj, FN)
        least = least_feasible(adj)
        pinned = memory_timeline(adj, FN).param_bytes
        print(f"  {label}: parameters, inputs and cotangent {pinned / mib:.2f}; retrograd unplanned {full / mib:.2f}, "
              f"least feasible {least / mib:.2f}; {confirm_model(module, args)}")
        print(f"    {'budget':<6} {'PyTorch peak':>12} {'recomp.':>8} {'retrograd peak':>14} {'recomp.':>8}  meets")
        for k in range(10, 0, -1):
            fw, bw = partition(ep.module(), args, k / 10)
            theirs, their_flops = step_peak(fw, bw), recomputed_flops(bw)
            try:
                planned, report = plan_checkpoint(adj, FN, theirs)
                ours, our_flops = peak_memory(planned, FN), report.extra_matmul_cost
            except InfeasibleBudgetError:
                ours, our_flops = None, None
            ok = ours is not None and ours <= theirs and our_flops <= their_flops
            shown = "infeasible" if ours is None else f"{ours / mib:.2f}"
            flops = "-" if our_flops is None else f"{our_flops / 1e9:.4f}"
            print(f"    {k / 10:<6} {theirs / mib:>12.2f} {their_flops / 1e9:>8.4f} {shown:>14} {flops:>8}  {'yes' if ok else 'NO'}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller models (a smoke run)")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", nargs="*", default=["S1", "S2", "S3", "S4", "S5"])
    ap.add_argument("--batch", type=int, default=64, help="S5's batch")
    args = ap.parse_args(argv)
    env = "  ".join(f"{k}={os.environ.get(k, '(unset)')}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS"))
    print(f"{env}  numpy {np.__version__}")
    if "S1" in args.only:
        s1(20 if args.quick else 100, args.repeat)
    if "S2" in args.only:
        s2(3 if args.quick else 24, args.repeat)
    if "S3" in args.only:
        s3(args.repeat)
    if "S4" in args.only:
        s4(1000 if args.quick else 10000)
    if "S5" in args.only:
        s5(args.batch)


if __name__ == "__main__":
    main()
