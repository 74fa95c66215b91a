"""Schedule -> Function: recomputations emitted right before the stage that needs them, behind markers.

A recomputation group (the nodes recomputed before one stage) is emitted by
`barriers.emit_recomputation`, as Gradient's checkpoint segments are: each input is read through a fresh
`R.grad.start_checkpoint(v)` (`<v>_ckin`), and each value needed later leaves through
`R.grad.end_checkpoint(v_cp)` (`<v>_ckout`).
The markers are identities at run time (the same object, no bytes), but they make every recomputed call
read variables no other binding reads, so CSE cannot merge a recomputation with the original and undo
the plan (the role of JAX's optimization_barrier, played here by TVM's own checkpoint markers).
Recomputed values are named `<v>_cp` (TVM's naming); later uses read the latest instance.
"""

from __future__ import annotations

from retrograd.ir.block import DataflowBlock, VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import DataflowVar, Function, SeqExpr, Var
from retrograd.ir.nested import tuple_leaves
from retrograd.passes.barriers import emit_recomputation
from retrograd.passes.checkpoint.extract import Extraction
from retrograd.passes.checkpoint.problem import Schedule
from retrograd.passes.checkpoint.simulate import events
from retrograd.ir.vars import read_vars
from retrograd.ir.copy import copy_expr

def rewrite(ex: Extraction, recompute) -> Function:
    """The function with `recompute[t]` (node ids, in order) recomputed just before stage t."""
    func = ex.func
    if not any(recompute):
        return func
    problem = ex.problem
    sources = ex.plan.sources
    latest: dict[int, Var] = {i: b.var for i, b in enumerate(ex.bindings) if i not in ex.transparent}
    ev = events(problem, Schedule(tuple(recompute)))
    if isinstance(ev, str):
        raise ValueError(f"invalid schedule: {ev}")
    nodes, stages, _, last_use = ev
    stage_event = [0] * len(ex.bindings)
    for e, (v, t) in enumerate(zip(nodes, stages)):
        if v == t:
            stage_event[t] = e
    # exits[t]: recomputed nodes whose new instance is read at or after stage t (it leaves the group).
    exits: list[set] = [set() for _ in ex.bindings]
    for e, (v, t) in enumerate(zip(nodes, stages)):
        if v != t and last_use[e] >= stage_event[t]:
            exits[t].add(v)
    dataflow = [isinstance(blk, DataflowBlock) for blk in func.body.blocks]
    emitted: list[list[VarBinding]] = [[] for _ in func.body.blocks]

    def substituted(value, node_var, param_var=None):
        read: list = []
        read_vars(value, read)
        return copy_expr(value, {v: ex.expr(sources[v], node_var, param_var) for v in read})

    for t, binding in enumerate(ex.bindings):
        bi = ex.block_of[t]
        out = emitted[bi]
        group = recompute[t] if t < len(recompute) else ()
        if group:
            members = set(group)
            inputs: dict = {}
            params = ex.params
            for v in group:
                read: list = []
                read_vars(ex.bindings[v].value, read)
                for r in read:
                    src = sources[r]
                    for reg in (src,) if type(src) is int else tuple_leaves(src):
                        if reg in params:
                            inputs.setdefault(params[reg], params[reg])
                    for u in ex.nodes(src):
                        if u not in members:
                            inputs.setdefault(u, latest[u])

            def emit(name, value, out=out, bi=bi):
                var = (DataflowVar if dataflow[bi] else Var)(name, value.struct_info)
                out.append(VarBinding(var, value))
                return var

            def recomputed(value, local):
                return substituted(value, local.__getitem__, local.__getitem__)

            handed = emit_recomputation(
                emit,
                inputs.items(),
                [(v, ex.bindings[v].var, ex.bindings[v].value) for v in group],
                recomputed,
                exits[t],
            )
            latest.update(handed)
        if t in ex.transparent:
            value = ex.expr(sources[binding.var], latest.__getitem__)
        else:
            value = substituted(binding.value, latest.__getitem__)
        out.append(binding if value is binding.value else VarBinding(binding.var, value, span=binding.span))
    body = substituted(func.body.body, latest.__getitem__)
    return _assemble(func, emitted, body)


def _assemble(func: Function, emitted, body) -> Function:
    """Blocks as in `func`; a DataflowVar read outside its block becomes a Var (an output of the block)."""
    home: dict = {}
    promote: dict = {}
    for bi, bindings in enumerate(emitted):
        for b in bindings:
            read: list = []
            read_vars(b.value, read)
            for v in read:
                if isinstance(v, DataflowVar) and home.get(v, bi) != bi:
                    promote[v] = None
            home[b.var] = bi
    read = []
    read_vars(body, read)
    promote.update((v, None) for v in read if isinstance(v, DataflowVar))
    if promote:
        vmap = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in promote}
        emitted = [
            [VarBinding(vmap.get(b.var, b.var), copy_expr(b.value, vmap), span=b.span) for b in bindings]
            for bindings in emitted
        ]
        body = copy_expr(body, vmap)
    bb = BlockBuilder()
    bb.begin_scope()
    for blk, bindings in zip(func.body.blocks, emitted):
        bb.begin_block(dataflow=isinstance(blk, DataflowBlock))
        for b in bindings:
            bb.emit_binding(b)
        bb.end_block()
    seq = bb.end_scope(body)
    seq = SeqExpr(seq.blocks, seq.body, func.body.struct_info, span=func.body.span)
    return Function(
        func.params, seq, func.ret_struct_info, func.is_pure, func.private, dict(func.attrs), span=func.span
    )
