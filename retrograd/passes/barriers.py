"""Optimization barriers: calls that clean-up passes never merge, fold or look through (checkpoint markers).

A recomputation reads its inputs through `start_checkpoint` and its results leave through
`end_checkpoint` (as JAX's optimization_barrier): merging it with the original computation would
keep the original alive and silently restore the memory peak the recomputation exists to lower.
"""

from __future__ import annotations

from retrograd.ir.expr import Call

START = "relax.grad.start_checkpoint"
END = "relax.grad.end_checkpoint"
BARRIER_OPS = frozenset({START, END})


def is_barrier(value) -> bool:
    """Whether `value` is a barrier call: each such call is unique and must stay where it is."""
    return isinstance(value, Call) and getattr(value.op, "name", None) in BARRIER_OPS
