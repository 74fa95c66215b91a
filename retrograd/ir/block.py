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


_new = object.__new__
_binding_var, _binding_value, _binding_span = (getattr(VarBinding, f).__set__ for f in ("var", "value", "span"))


def new_binding(var, value, span=None) -> VarBinding:
    """`VarBinding(var, value, span=span)` for hot paths (see `retrograd.ir.expr.new_call`)."""
    binding = _new(VarBinding)
    _binding_var(binding, var)
    _binding_value(binding, value)
    _binding_span(binding, span)
    return binding
