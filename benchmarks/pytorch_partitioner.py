"""PyTorch's memory-budget partitioner on a model, counted by retrograd's executor rule (bench_checkpoint S5).

`partition(module, args, budget)` runs AOTAutograd on `module` with `min_cut_rematerialization_partition`
under `torch._functorch.config.activation_memory_budget = budget` and captures the forward and backward
FX graphs it produces (nothing is executed: the capture stops tracing once the partition is made).

`step_peak(fw, bw)` counts the training step those two graphs make with the rule of retrograd's executor
(runtime/, replayed by retrograd.analysis.peak_memory) for `main_adjoint`:
- the forward's inputs (parameters, buffers, the batch) and the backward's tangents are live for the whole
  step, as the adjoint's parameters (its cotangent among them) are;
- a node's result is stored while it runs, with its inputs still live; a value is released after its
  last reader (a forward result saved for the backward: after its last backward reader); the step's
  outputs (the forward's outputs other than the saved tensors, the backward's gradients) stay to the end;
- a view (an op whose schema says its result aliases an argument) holds its base's buffer; each field
  of a multi-result op is a buffer of its own, released when its last reader is done;
- a pointwise op (torch.Tag.pointwise) computes into a dying argument of the same size and dtype that
  owns its buffer and that no other live value holds, as the executor does for ops with an inplace form.
`recomputed_flops(bw)`: the matmul and convolution FLOPs (2 per multiply-add, retrograd's ops/cost.py
count) of the backward's nodes that do not depend on a tangent: the forward work recomputed there.
"""

from __future__ import annotations

import operator
from math import prod


class _Captured(Exception):
    pass


def partition(module, args: tuple, budget: float):
    """(forward GraphModule, backward GraphModule) of PyTorch's min-cut partition at this budget."""
    import torch
    import torch._functorch.config as fconfig
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    got = {}

    def capture(joint, joint_inputs, **kwargs):
        got["graphs"] = min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)
        raise _Captured

    def call(params, buffers, *inputs):
        return torch.func.functional_call(module, {**params, **buffers}, inputs)

    # aot_module would pass tied weights (GPT-2's embedding and head) twice; each tensor goes once here.
    compiled = aot_function(call, fw_compiler=lambda g, _: g, bw_compiler=lambda g, _: g, partition_fn=capture)
    with fconfig.patch(activation_memory_budget=budget):
        try:
            compiled(dict(module.named_parameters()), dict(module.named_buffers()), *args)
        except _Captured:
            pass
    return got["graphs"]


def _nbytes(val) -> int:
    import torch

    if isinstance(val, torch.Tensor):
        return prod(val.shape) * val.element_size()
    return 0


def _tensors(val) -> list:
    """The result's fields: one entry per field (None for a non-tensor)."""
    import torch

    if isinstance(val, tuple | list):
        return [v if isinstance(v, torch.Tensor) else None for v in val]
    return [val if isinstance(val, torch.Tensor) else None]


def _alias_arg(node):
    """The argument node whose buffer the result is (a view), or None (a fresh result): the op's schema
    says so, or the traced value shares an argument's storage (`_unsafe_view` of a matmul result)."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef

    schema = getattr(node.target, "_schema", None)
    if schema is not None and len(schema.returns) == 1 and schema.returns[0].alias_info is not None:
        sets = schema.returns[0].alias_info.before_set
        for a, value in zip(schema.arguments, node.args):
            if a.alias_info is not None and a.alias_info.before_set & sets and hasattr(value, "op"):
                return value
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        storage = StorageWeakRef(val.untyped_storage())
        for a in node.all_input_nodes:
            aval = a.meta.get("val")
            if isinstance(aval, torch.Tensor) and StorageWeakRef(aval.untyped_storage()) == storage:
                return a
    return None


class _Meter:
    """Buffers by id, each with its bytes and the values (fx nodes, or (node, field)) that hold it."""

    def __init__(self):
        self.size: dict[int, int] = {}
        self.holders: dict[int, int] = {}
        self.buf_of: dict = {}  # value -> buffer id
        self.cur = 0
        self.peak = 0
        self.next = 0

    def new(self, value, nbytes: int) -> None:
        self.next += 1
        self.size[self.next] = nbytes
        self.holders[self.next] = 0
        self.cur += nbytes
        self.peak = max(self.peak, self.cur)
        self.hold(value, self.next)

    def hold(self, value, buf: int) -> None:
        self.buf_of[value] = buf
        self.holders[buf] += 1

    def release(self, value) -> None:
        buf = self.buf_of.pop(value, None)
        if buf is None:
            return
        self.holders[buf] -= 1
        if self.holders[buf] == 0:
            self.cur -= self.size.pop(buf)
            del self.holders[buf]


def _run(meter: _Meter, graph, keep: set, held: set, inplace: bool) -> None:
    """Replay one graph's nodes on the meter. `keep`: values never released here; `held`: placeholders
    already on the meter (saved forward values, tangents); other placeholders are new buffers."""
    import torch

    nodes = list(graph.nodes)
    last = {}
    for i, node in enumerate(nodes):
        if node.op != "output":
            for a in node.all_input_nodes:
                last[a] = i
    for i, node in enumerate(nodes):
        if node.op == "output":
            continue
        if node.op == "placeholder":
            if node not in held:
                meter.new(node, _nbytes(node.meta.get("val")))
            continue
        val = node.meta.get("val")
        if node.target is operator.getitem:
            pass  # held since its tuple was made
        elif (base := _alias_arg(node)) is not None:
            meter.hold(node, meter.buf_of[base])
        elif isinstance(val, tuple | list):
            for k, f in enumerate(_tensors(val)):
                meter.new((node, k), _nbytes(f))
                for user in node.users:
                    if user.target is operator.getitem and user.args[1] == k:
                        meter.hold(user, meter.buf_of[(node, k)])
        else:
            buf = None
            if inplace and torch.Tag.pointwise in getattr(node.target, "tags", ()):
                buf = next((meter.buf_of[a] for a in node.all_input_nodes if _reusable(meter, a, val, i, last, keep)), None)
            if buf is not None:
                meter.hold(node, buf)
            else:
                meter.new(node, _nbytes(val))
        if isinstance(val, tuple | list) and node.target is not operator.getitem:
            for k in range(len(val)):
                meter.release((node, k))  # each field goes with its getitems (at once when none reads it)
        for a in set(node.all_input_nodes):
            if last.get(a) == i and a not in keep:
                meter.release(a)
        if node not in last and node not in keep:
            meter.release(node)  # never read


def _reusable(meter: _Meter, a, val, i: int, last: dict, keep: set) -> bool:
    """Whether a pointwise op may compute into argument `a`: it dies here, owns its buffer alone, and
    has the result's size and dtype."""
    import torch

    buf = meter.buf_of.get(a)
    aval = a.meta.get("val")
    return (
        last.get(a) == i and a not in keep and a.op != "placeholder" and buf is not None
        and meter.holders[buf] == 1 and isinstance(aval, torch.Tensor) and aval.dtype == val.dtype
        and meter.size[buf] == _nbytes(val)
    )


def step_peak(fw, bw, inplace: bool = True) -> int:
    """The peak live bytes of forward then backward, by the executor's rule (module docstring).
    inplace=False: without the executor's in-place reuse (what running the graphs in PyTorch stores)."""
    fw_out = list(list(fw.graph.nodes)[-1].args[0])
    bw_places = [n for n in bw.graph.nodes if n.op == "placeholder"]
    tangents = [n for n in bw_places if n.name.startswith("tangents")]
    saved_places = [n for n in bw_places if not n.name.startswith("tangents")]
    saved = fw_out[len(fw_out) - len(saved_places):]
    meter = _Meter()
    for t in tangents:  # the cotangent is the adjoint's parameter: live from the start
        meter.new(t, _nbytes(t.meta.get("val")))
    fw_places = {n for n in fw.graph.nodes if n.op == "placeholder"}
    _run(meter, fw.graph, keep=fw_places | {v for v in fw_out if hasattr(v, "op")}, held=set(), inplace=inplace)
    held = set(tangents)
    for place, value in zip(saved_places, saved):
        if hasattr(value, "op") and value in meter.buf_of:
            meter.hold(place, meter.buf_of[value])
            held.add(place)
    outputs = fw_out[: len(fw_out) - len(saved_places)]
    for value in set(saved) - set(outputs) - fw_places:
        if hasattr(value, "op"):
            meter.release(value)  # from here the backward's placeholder holds it
    bw_out = {a for a in list(bw.graph.nodes)[-1].args[0] if hasattr(a, "op")}
    _run(meter, bw.graph, keep=set(tangents) | bw_out, held=held, inplace=inplace)
    return meter.peak


def recomputed_flops(bw) -> float:
    """Matmul and convolution FLOPs of backward nodes that read no tangent (recomputed forward work)."""
    import torch

    aten = torch.ops.aten
    tangent_free = {}
    total = 0.0
    for node in bw.graph.nodes:
        if node.op == "placeholder":
            tangent_free[node] = not node.name.startswith("tangents")
            continue
        tangent_free[node] = all(tangent_free.get(a, True) for a in node.all_input_nodes)
        if node.op != "call_function" or not tangent_free[node]:
            continue
        out = node.meta.get("val")
        packet = getattr(node.target, "overloadpacket", None)
        if packet in (aten.mm, aten.bmm, aten.addmm, aten.baddbmm):
            a = node.args[1] if packet in (aten.addmm, aten.baddbmm) else node.args[0]
            total += 2.0 * prod(out.shape) * a.meta["val"].shape[-1]
        elif packet in (aten.convolution, aten.convolution_overrideable, aten.conv2d):
            w = node.args[1].meta["val"].shape
            total += 2.0 * prod(out.shape) * prod(w) / w[0]
    return total
