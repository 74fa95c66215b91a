"""Bindings and binding blocks."""

from __future__ import annotations

import attrs

from retrograd.errors import Span
from retrograd.ir.expr import Expr, Var


@attrs.frozen(eq=False, repr=False)
class VarBinding:
    """`var = value`."""

    var: Var
    value: Expr
    span: Span | None = attrs.field(default=None, kw_only=True)

    def __repr__(self) -> str:
        return f"<VarBinding {self.var.name_hint} = {type(self.value).__name__}>"


@attrs.frozen(eq=False, repr=False)
class BindingBlock:
    """A sequence of bindings that may have side effects."""

    bindings: tuple = attrs.field(converter=tuple)
    span: Span | None = attrs.field(default=None, kw_only=True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {len(self.bindings)} bindings>"


@attrs.frozen(eq=False, repr=False)
class DataflowBlock(BindingBlock):
    """A side-effect-free block; its DataflowVars are invisible outside it."""
