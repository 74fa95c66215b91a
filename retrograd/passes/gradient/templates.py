"""Rule templates: what a gradient rule emitted for one call, replayed for the next call of the same kind.

Networks repeat their layers: the same op with the same attributes on arguments of the same struct info,
thousands of times. A rule's partials, normalized, inferred and fitted to the arguments' shapes, depend
on nothing else (op inference reads struct info and attributes only), so the bindings emitted for the
first such call are kept with its variables as placeholders, and each later call gets copies over its
own variables: typed nodes built directly, without the rule, attribute checks, normalization or
inference.
"""

from __future__ import annotations

from retrograd.ir.copy import substitute
from retrograd.ir.expr import LEAF_TYPES, Call, DataflowVar, Tuple, Var, new_var
from retrograd.ir.block import VarBinding, new_binding, new_call_binding
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.vars import read_vars
from retrograd.passes.cse import AttrKeys
from retrograd.passes.simplify import PERMUTE, permute_axes


class RuleTemplates:
    """Templates by call kind; `key` says which calls may use one (None: not this call)."""

    def __init__(self, attr_keys: AttrKeys | None = None, forward: dict | None = None):
        self.memo: dict = {}
        self.attr_keys = AttrKeys() if attr_keys is None else attr_keys
        # Forward var -> value, when the clean-up will run: see param_source.
        self.forward = forward
        self._composes: dict = {}  # see param_source

    def key(self, call: Call, var: Var, g, active: set, adj: dict, in_dataflow: bool):
        """What the rule's emitted bindings depend on: the op, its attributes, each argument's class,
        struct info, activity, whether it has an adjoint yet and which earlier argument it repeats (other
        leaves by identity), the result's and the adjoint's class and struct info, the block kind."""
        if (g.__class__ is not Var and g.__class__ is not DataflowVar) or var.struct_info.__class__ is not TensorStructInfo:
            return None
        # One flat tuple (a variable's five entries start with its class, which no other leaf equals).
        parts = [call.op, None, var.__class__, var.struct_info, g.__class__, g.struct_info, in_dataflow]
        args = call.args
        for a in args:
            cls = a.__class__
            if cls is Var or cls is DataflowVar:
                if a is g:
                    return None
                parts += (cls, a.struct_info, a in active, a in adj, args.index(a))  # index: the first (vars compare by identity)
            elif cls is Tuple:
                return None
            else:
                parts.append(a)
        given = call.attrs
        hit = self.attr_keys.by_id.get(id(given))
        attrs = hit[1][1] if hit is not None and hit[0] is given else self.attr_keys(given)
        if attrs is None:
            return None
        parts[1] = attrs
        return tuple(parts)

    def get(self, key):
        return self.memo.get(key)

    def store(self, key, call: Call, var: Var, g, segments: list) -> None:
        """Keep `segments` [(argument index, hint, bindings emitted fitting it, the fitted value)] if they
        read only the call's variables, its result, the adjoint and their own variables."""
        known = {var, g, *(a for a in call.args if isinstance(a, Var))}
        reads: list = []
        for _, _, bindings, fitted in segments:
            if isinstance(fitted, tuple):
                return
            for b in bindings:
                reads.clear()
                read_vars(b.value, reads)
                if any(v not in known for v in reads):
                    return
                known.add(b.var)
            if isinstance(fitted, Var) and fitted not in known:
                return
        args = {a for a in call.args if isinstance(a, Var)}
        steps = [(index, hint, [_step(b, hint, args, fitted) for b in bindings], fitted) for index, hint, bindings, fitted in segments]
        self.memo[key] = (call.args, var, g, steps)

    def replay(self, template, call: Call, var: Var, g, hint_of, block: list, add) -> None:
        """Per segment, append its copied bindings to `block`, then `add(argument, fitted value)` (which
        may append an accumulation); `hint_of(argument)` is the name its partial takes now (as the caller
        names it)."""
        t_args, t_var, t_g, segments = template
        mapping = {t_var: var, t_g: g}
        for ta, a in zip(t_args, call.args):
            if ta.__class__ is Var or ta.__class__ is DataflowVar:
                mapping[ta] = a
        get = mapping.get
        append = block.append
        forward = self.forward
        for index, t_hint, steps, fitted in segments:
            hint = None
            for old, cls, name, sinfo, value, leaves, transposes_arg in steps:
                if transposes_arg and forward is not None:
                    source = self.param_source(get(value.args[0]), value, sinfo)
                    if source is not None:
                        mapping[old] = source
                        continue
                if name is None:
                    name = hint = hint_of(call.args[index]) if hint is None else hint
                if leaves:  # a call on leaves: vars are looked up, other leaves kept
                    args = value.args
                    b = new_call_binding(cls, name, sinfo, value.op, tuple(map(get, args, args)), value.attrs, value.struct_info)
                    append(b)
                    mapping[old] = b.var
                    continue
                if value.__class__ is Call:
                    args = tuple(get(a, a) if isinstance(a, Var) else substitute(a, mapping) for a in value.args)
                    value = Call(value.op, args, value.attrs, value.struct_info)
                else:
                    value = substitute(value, mapping)
                new = new_var(cls, name, sinfo)
                append(new_binding(new, value))
                mapping[old] = new
            add(call.args[index], get(fitted, fitted) if isinstance(fitted, Var) else fitted)

    def param_source(self, x, outer: Call, sinfo):
        """P when the clean-up would replace the step `outer` = permute_dims(x) by the parameter P, x being
        the forward value permute_dims(P): the two permutations compose to the identity (the inner one is
        not one itself) and P has the step's struct info. The step is then never built (nor walked): its
        readers read P, as the clean-up would make them. None otherwise."""
        inner = self.forward.get(x)
        if inner.__class__ is not Call or inner.op is not outer.op:
            return None
        p = inner.args[0]
        if (p.__class__ is not Var and p.__class__ is not DataflowVar) or p in self.forward:
            return None  # not a parameter: the clean-up may rewrite what it reads
        if p.struct_info is not sinfo and p.struct_info != sinfo:
            return None
        key = (id(inner.attrs), id(outer.attrs), inner.struct_info, outer.struct_info)
        hit = self._composes.get(key)
        if hit is None or hit[0] is not inner.attrs or hit[1] is not outer.attrs:
            a, b = permute_axes(inner), permute_axes(outer)
            cancels = a is not None and b is not None and a != tuple(range(len(a))) and len(a) == len(b)
            cancels = cancels and tuple(a[i] for i in b) == tuple(range(len(a)))
            hit = self._composes[key] = (inner.attrs, outer.attrs, cancels)
        return p if hit[2] else None


def _step(b: VarBinding, hint: str, args: set, fitted) -> tuple:
    """How `bindings` copies one recorded binding: its var, the new var's class, its name (None: the
    caller's hint), its struct info, its value, whether that is a call on leaves only, and whether it is
    permute_dims of a call argument read only by later steps (see param_source)."""
    old, value = b.var, b.value
    leaves = value.__class__ is Call and all(isinstance(a, LEAF_TYPES) for a in value.args)
    transposes_arg = leaves and getattr(value.op, "name", None) == PERMUTE and value.args[0] in args and old is not fitted
    return (old, old.__class__, None if old.name_hint == hint else old.name_hint, old.struct_info, value, leaves, transposes_arg)
