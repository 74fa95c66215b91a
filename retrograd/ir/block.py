"""Bindings and binding blocks."""

from __future__ import annotations

import attrs

from retrograd.errors import Span
from retrograd.ir.expr import Call, Expr, Var


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


_call_op, _call_args, _call_attrs, _call_sinfo, _call_span = (
    getattr(Call, f).__set__ for f in ("op", "args", "attrs", "struct_info", "span")
)
_var_name, _var_sinfo, _var_span = (getattr(Var, f).__set__ for f in ("name_hint", "struct_info", "span"))


def new_call_binding(
    var_cls: type, name_hint: str, var_sinfo, op, args: tuple, attrs: dict, call_sinfo, var_span=None, call_span=None, span=None
) -> VarBinding:
    """`new_binding(new_var(var_cls, name_hint, var_sinfo, var_span), new_call(op, args, attrs, call_sinfo,
    call_span), span)` in one frame: the hot paths (replayed rules, copies) build thousands."""
    var = _new(var_cls)
    _var_name(var, name_hint)
    _var_sinfo(var, var_sinfo)
    _var_span(var, var_span)
    call = _new(Call)
    _call_op(call, op)
    _call_args(call, args)
    _call_attrs(call, attrs)
    _call_sinfo(call, call_sinfo)
    _call_span(call, call_span)
    binding = _new(VarBinding)
    _binding_var(binding, var)
    _binding_value(binding, call)
    _binding_span(binding, span)
    return binding
