"""Import speed and memory of `from_exported_program`: a 1,000-layer MLP and GPT-2-small (124M parameters).

Run by hand: ``python benchmarks/bench_import.py [--mlp-layers 1000] [--width 64] [--no-gpt2] [--seq 64]``.

torch.export's own time is reported apart and excluded: the figure is `from_exported_program(ep)`
alone (fx graph to IRModule, parameters as NumPy views). Memory: the process's peak RSS
(`ru_maxrss`) before and after the import, against the parameters' bytes; every params entry must
share memory with its torch tensor (no copy). Target: under 2 s for GPT-2-small's graph.
Needs torch (and transformers for GPT-2); random initialization, nothing downloaded.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from retrograd.frontend import from_exported_program  # noqa: E402


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(name: str, model, inputs, repeat: int) -> None:
    import torch

    t0 = time.perf_counter()
    ep = torch.export.export(model, inputs, strict=False)
    export_s = time.perf_counter() - t0
    nodes = sum(1 for n in ep.graph.nodes if n.op == "call_function")
    rss0, peak0 = _rss_mb(), _peak_mb()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        mod, params = from_exported_program(ep)
        times.append(time.perf_counter() - t0)
    rss1, peak1 = _rss_mb(), _peak_mb()
    state = {**ep.state_dict, **getattr(ep, "constants", {})}
    shared = all(np.shares_memory(v, state[k].detach().numpy()) for k, v in params.items())
    param_mb = sum(v.nbytes for v in params.values()) / 2**20
    bindings = sum(len(b.bindings) for b in mod["main"].body.blocks)
    print(f"{name}: {nodes} fx nodes -> {bindings} bindings, {len(params)} params ({param_mb:.1f} MiB)")
    print(f"  torch.export {export_s:.2f} s (excluded); import median {sorted(times)[len(times) // 2]:.3f} s, "
          f"min {min(times):.3f} s over {repeat}")
    print(f"  RSS {rss0:.0f} -> {rss1:.0f} MiB (+{rss1 - rss0:.1f}); peak RSS {peak0:.0f} -> {peak1:.0f} MiB "
          f"(+{peak1 - peak0:.1f}); every param a view of its tensor: {shared}")


def mlp(layers: int, width: int):
    import torch

    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods).eval(), (torch.randn(8, width),)


def gpt2_small(seq: int):
    import types

    import torch

    # transformers imports torchvision when installed; a torchvision wheel built against another torch
    # fails registering its C ops' fake kernels, which GPT-2 does not use (as tests/optional.py does).
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import transformers

    cfg = transformers.GPT2Config(use_cache=False)  # n_layer 12, n_embd 768, vocab 50257: 124M parameters
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    return model, (torch.randint(0, cfg.vocab_size, (1, seq)),)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlp-layers", type=int, default=1000)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-gpt2", action="store_true")
    ap.add_argument("--no-mlp", action="store_true")
    args = ap.parse_args()
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    if not args.no_mlp:
        measure(f"MLP {args.mlp_layers} layers x {args.width}", *mlp(args.mlp_layers, args.width), args.repeat)
    if not args.no_gpt2:
        measure("GPT-2-small (124M)", *gpt2_small(args.seq), args.repeat)


if __name__ == "__main__":
    main()
