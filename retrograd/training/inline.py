"""Inlining a function's body into a BlockBuilder: how the loss and the train step take in what they extend."""

from __future__ import annotations

from retrograd.ir.block import DataflowBlock
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.copy import copy_seq
from retrograd.ir.expr import Expr, Function


def inline_body(bb: BlockBuilder, func: Function, args: list) -> Expr:
    """Emit a copy of `func`'s blocks with its parameters replaced by `args` (vars); return its result."""
    body = copy_seq(func.body, dict(zip(func.params, args)))
    for block in body.blocks:
        bb.begin_block(dataflow=isinstance(block, DataflowBlock))
        for binding in block.bindings:
            bb.emit_binding(binding)
        bb.end_block()
    return body.body
