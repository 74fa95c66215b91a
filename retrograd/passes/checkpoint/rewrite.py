"""Schedule -> Function: each recomputation group emitted before its stage by `barriers.emit_recomputation`,
behind checkpoint markers that keep clean-up passes from merging it with the original (JAX's optimization_barrier)."""

from __future__ import annotations

import attrs

from retrograd.ir.block import DataflowBlock, VarBinding
from retrograd.ir.expr import DataflowVar, Function, SeqExpr, Var
from retrograd.ir.nested import tuple_leaves
from retrograd.passes.barriers import emit_recomputation
from retrograd.passes.checkpoint.extract import Extraction, nodes_of
from retrograd.passes.checkpoint.problem import Schedule
from retrograd.passes.checkpoint.simulate import events
from retrograd.ir.vars import read_vars
from retrograd.ir.copy import copy_expr


def _reads(expr) -> list:
    out: list = []
    read_vars(expr, out)
    return out


def rewrite(ex: Extraction, recompute) -> Function:
    """The function with `recompute[t]` (node ids, in order) recomputed just before stage t."""
    func, sources, params = ex.plan.func, ex.plan.sources, ex.params
    if not any(recompute):
        return func
    bindings = [b for block in func.body.blocks for b in block.bindings]  # node i: bindings[i]
    block_of = [bi for bi, block in enumerate(func.body.blocks) for _ in block.bindings]
    latest: dict[int, Var] = {i: b.var for i, b in enumerate(bindings) if i not in ex.transparent}
    ev = events(ex.problem, Schedule(recompute))
    if isinstance(ev, str):
        raise ValueError(f"invalid schedule: {ev}")
    nodes, stages, _, last_use = ev
    stage_event = {t: e for e, (v, t) in enumerate(zip(nodes, stages)) if v == t}
    # exits[t]: recomputed nodes whose new instance is read at or after stage t (it leaves the group).
    exits: list[set] = [set() for _ in bindings]
    for e, (v, t) in enumerate(zip(nodes, stages)):
        if v != t and last_use[e] >= stage_event[t]:
            exits[t].add(v)
    emitted: list[list[VarBinding]] = [[] for _ in func.body.blocks]

    def substituted(value, node_var, param_var=None):
        return copy_expr(value, {v: ex.expr(sources[v], node_var, param_var) for v in _reads(value)})

    for t, binding in enumerate(bindings):
        out, group = emitted[block_of[t]], recompute[t] if t < len(recompute) else ()
        if group:
            inputs, members = {}, set(group)
            for v in group:
                for src in map(sources.__getitem__, _reads(bindings[v].value)):
                    for reg in (src,) if type(src) is int else tuple_leaves(src):
                        if reg in params:
                            inputs.setdefault(params[reg], params[reg])
                    for u in nodes_of([src], ex.node_of):
                        if u not in members:
                            inputs.setdefault(u, latest[u])
            cls = DataflowVar if isinstance(func.body.blocks[block_of[t]], DataflowBlock) else Var

            def emit(name, value, out=out, cls=cls):
                out.append(VarBinding(cls(name, value.struct_info), value))
                return out[-1].var

            group_of = [(v, bindings[v].var, bindings[v].value) for v in group]
            local_value = lambda value, local: substituted(value, local.__getitem__, local.__getitem__)  # noqa
            latest.update(emit_recomputation(emit, inputs.items(), group_of, local_value, exits[t]))
        if t in ex.transparent:
            value = ex.expr(sources[binding.var], latest.__getitem__)
        else:
            value = substituted(binding.value, latest.__getitem__)
        out.append(binding if value is binding.value else VarBinding(binding.var, value, span=binding.span))
    return _assemble(func, emitted, substituted(func.body.body, latest.__getitem__))


def _assemble(func: Function, emitted, body) -> Function:
    """Blocks as in `func`; a DataflowVar read outside its block becomes a Var (an output of the block)."""
    home, promote = {}, {}
    for bi, bindings in enumerate(emitted):
        for b in bindings:
            outside = (v for v in _reads(b.value) if isinstance(v, DataflowVar) and home.get(v, bi) != bi)
            promote.update((v, None) for v in outside)
            home[b.var] = bi
    promote.update((v, None) for v in _reads(body) if isinstance(v, DataflowVar))
    if promote:
        vmap = {v: Var(v.name_hint, v.struct_info, span=v.span) for v in promote}
        rebind = lambda b: VarBinding(vmap.get(b.var, b.var), copy_expr(b.value, vmap), span=b.span)  # noqa
        emitted = [[rebind(b) for b in bindings] for bindings in emitted]
        body = copy_expr(body, vmap)
    blocks = tuple(type(blk)(bindings, span=blk.span) for blk, bindings in zip(func.body.blocks, emitted))
    seq = SeqExpr(blocks, body, func.body.struct_info, span=func.body.span)
    return attrs.evolve(func, body=seq, attrs=dict(func.attrs))
