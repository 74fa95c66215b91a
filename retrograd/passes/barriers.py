"""Optimization barriers: calls that clean-up passes never merge, fold or look through (checkpoint markers).

A recomputation reads its inputs through `start_checkpoint` and its results leave through
`end_checkpoint` (as JAX's optimization_barrier): merging it with the original computation would
keep the original alive and silently restore the memory peak the recomputation exists to lower.
"""

from __future__ import annotations

from retrograd.ir.expr import Call
from retrograd.ops.registry import get as get_op

START = "relax.grad.start_checkpoint"
END = "relax.grad.end_checkpoint"
BARRIER_OPS = frozenset({START, END})


def is_barrier(value) -> bool:
    """Whether `value` is a barrier call: each such call is unique and must stay where it is."""
    return isinstance(value, Call) and getattr(value.op, "name", None) in BARRIER_OPS


IN, RECOMPUTED, OUT = "_ckin", "_cp", "_ckout"  # name suffixes of a recomputation group's bindings


def emit_recomputation(emit, inputs, group, substitute, hand_on) -> dict:
    """Emits one recomputation group behind barriers; returns {key: the var handing key's value on}.

    The one emitter of recomputations (Gradient's checkpoint segments and the checkpoint planner):
    each input is read through a fresh `R.grad.start_checkpoint` (`<v>_ckin`), each recomputed value
    is bound to `<v>_cp` (TVM's name), and each value read after the group leaves it through
    `R.grad.end_checkpoint` (`<v>_ckout`). Every recomputed call thus reads variables nothing else
    reads, so no clean-up pass can merge it with the original.

    emit(name, value) -> Var binds one value. inputs: [(key, source Var)] read from outside the group,
    in emission order. group: [(key, original Var, value)] in forward order. substitute(value, local)
    -> the value reading local[key] for every key it reads. hand_on: the keys read after the group.
    """
    local: dict = {}
    for key, source in inputs:
        local[key] = emit(f"{source.name_hint}{IN}", Call(get_op(START), (source,), {}, source.struct_info))
    for key, var, value in group:
        local[key] = emit(f"{var.name_hint}{RECOMPUTED}", substitute(value, local))
    out: dict = {}
    for key, var, _ in group:
        if key in hand_on:
            cp = local[key]
            out[key] = emit(f"{var.name_hint}{OUT}", Call(get_op(END), (cp,), {}, cp.struct_info))
    return out
