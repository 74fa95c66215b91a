"""benchmarks/pytorch_partitioner.py, which S5 of bench_checkpoint.py uses to compare plans with PyTorch's
min-cut partitioner: its count of PyTorch's step peak (without the executor's in-place reuse) equals the
live bytes measured by running the two FX graphs in PyTorch, each value dropped after its last use; its
recomputed FLOPs are the matmul/conv work of the backward that reads no tangent."""

from __future__ import annotations

from math import prod

import pytest

from optional import need, need_torchvision, need_transformers

BUDGETS = (1.0, 0.5, 0.1)


def _measured_step(fw, bw) -> int:
    """Run forward then backward on real tensors under a dispatch mode that meters every op result's
    storage: the most bytes of storages alive at once (parameters, inputs and tangents included)."""
    torch = need("torch")
    Interpreter = need("torch.fx").Interpreter
    StorageWeakRef = need("torch.multiprocessing.reductions").StorageWeakRef
    TorchDispatchMode = need("torch.utils._python_dispatch").TorchDispatchMode
    tree_leaves = need("torch.utils._pytree").tree_leaves

    live: dict = {}  # storage cdata -> (weak reference, bytes)
    peak = [0]

    def note(t) -> None:
        for cdata in [c for c, (ref, _) in live.items() if ref.expired()]:
            del live[cdata]
        ref = StorageWeakRef(t.untyped_storage())
        live.setdefault(ref.cdata, (ref, t.untyped_storage().nbytes()))
        peak[0] = max(peak[0], sum(n for _, n in live.values()))

    class Meter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    note(t)
            return out

    def value(node):
        val = node.meta["val"]
        if not isinstance(val, torch.Tensor):
            return val
        if val.dtype.is_floating_point:
            return torch.rand(tuple(val.shape), dtype=val.dtype) + 0.5
        return torch.zeros(tuple(val.shape), dtype=val.dtype)

    pinned = {n: value(n) for n in fw.graph.nodes if n.op == "placeholder"}
    bw_places = [n for n in bw.graph.nodes if n.op == "placeholder"]
    tangents = {n: value(n) for n in bw_places if n.name.startswith("tangents")}
    saved_places = [n for n in bw_places if not n.name.startswith("tangents")]
    with torch.no_grad(), Meter():
        for t in [*pinned.values(), *tangents.values()]:
            note(t)
        outs = list(Interpreter(fw, garbage_collect_values=True).run(initial_env=dict(pinned)))
        saved = outs[len(outs) - len(saved_places):]
        kept = outs[: len(outs) - len(saved_places)]  # the step's outputs
        env = dict(zip(saved_places, saved))
        env.update(tangents)
        del outs, saved
        grads = Interpreter(bw, garbage_collect_values=True).run(initial_env=env)
        del env
    assert kept is not None and grads is not None
    return peak[0]


def _models():
    torch = need("torch")
    tv = need_torchvision()
    tr = need_transformers()
    torch.manual_seed(0)
    cfg = tr.GPT2Config(n_layer=2, n_embd=16, n_head=2, vocab_size=50, n_positions=16, use_cache=False,
                        bos_token_id=0, eos_token_id=0)
    mlp = torch.nn.Sequential(torch.nn.Linear(12, 40), torch.nn.ReLU(), torch.nn.Linear(40, 40), torch.nn.Tanh(),
                              torch.nn.Linear(40, 3))
    return [
        ("mlp", mlp, (torch.randn(16, 12),)),
        ("resnet18", tv.models.resnet18(num_classes=10).train(), (torch.randn(2, 3, 32, 32),)),
        ("gpt2", tr.GPT2LMHeadModel(cfg).eval(), (torch.randint(0, 50, (2, 8)),)),
    ]


@pytest.mark.parametrize("budget", BUDGETS)
def test_step_peak_count_equals_pytorch_run(budget):
    torch = need("torch")
    from pytorch_partitioner import partition, step_peak

    for name, module, args in _models():
        ep = torch.export.export(module, args, strict=False)
        fw, bw = partition(ep.module(), args, budget)
        counted = step_peak(fw, bw, inplace=False)
        assert counted == _measured_step(fw, bw), (name, budget)
        # The executor's in-place reuse only lowers it.
        assert step_peak(fw, bw) <= counted


def test_recomputed_flops_are_the_tangent_free_convolutions():
    """ResNet-18 at budget 0.1, where PyTorch recomputes convolutions in the backward: the count equals
    2 · output elements · (in-channels · window) summed over the backward's convolution nodes with no
    tangent among their ancestors, found here by a walk of our own."""
    torch = need("torch")
    tv = need_torchvision()
    from pytorch_partitioner import partition, recomputed_flops

    torch.manual_seed(0)
    x = torch.randn(2, 3, 32, 32)
    ep = torch.export.export(tv.models.resnet18(num_classes=10).train(), (x,), strict=False)
    fw, bw = partition(ep.module(), (x,), 0.1)
    tangent_ancestors = set()
    for node in bw.graph.nodes:
        if node.name.startswith("tangents") or any(a in tangent_ancestors for a in node.all_input_nodes):
            tangent_ancestors.add(node)
    want, convs = 0.0, 0
    for node in bw.graph.nodes:
        if node.op == "call_function" and node not in tangent_ancestors and str(node.target).startswith("aten.convolution."):
            out = node.meta["val"].shape
            weight = node.args[1].meta["val"].shape  # (out-channels, in-channels, kh, kw)
            want += 2.0 * prod(out) * weight[1] * weight[2] * weight[3]
            convs += 1
    assert convs > 0  # the budget does make PyTorch recompute convolutions
    assert recomputed_flops(bw) == want
    fw_full, bw_full = partition(ep.module(), (x,), 1.0)
    assert recomputed_flops(bw_full) == 0.0
