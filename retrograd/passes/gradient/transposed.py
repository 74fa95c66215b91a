"""Transposed matmul operands in the clean-up's form: the Gradient pass's sites (cleanup.TransposedSite).

A linear layer as networks are exported, `wt = permute_dims(w); y = matmul(a, wt)`, has rules that emit
p = permute_dims(a), dwt = matmul(p, g) (g the adjoint of y) and then dw = permute_dims(dwt), which the
clean-up rewrites into t = permute_dims(g), dw = matmul(t, a) (Simplifier.matmul_transpose; p and dwt die).
The sweep writes t and m (dw's var bound to matmul(t, a)) instead, and the clean-up checks each site (see
cleanup_function). Two ways: after the rules ran (`after_permute`, the first layer of a kind), or, when
both rules replay templates, at the matmul without building p, dwt and dw at all (`at_matmul`).
"""

from __future__ import annotations

from retrograd.ir.block import VarBinding, new_binding, new_call_binding
from retrograd.ir.expr import Call, DataflowVar, Var, new_call, new_var
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import get as get_op
from retrograd.passes.cleanup import TransposedSite
from retrograd.passes.simplify import MATMUL, PERMUTE, swaps_last_two, transpose_parts

_VARS = (Var, DataflowVar)


class TransposedOperands:
    """A sweep's sites: {t's var: TransposedSite}. `kept`: the vars whose adjoints the function returns."""

    def __init__(self, kept: set):
        self.sites: dict = {}
        self.kept = kept
        self.permute = get_op(PERMUTE)
        self.matmul = get_op(MATMUL)
        self._transposes: dict = {}  # see transpose_parts
        self._swapping: dict = {}  # see swaps
        self._forms: dict = {}  # id(template) -> (template, what _matmul_form or _permute_form found)
        self._lookups: dict = {}  # see at_matmul

    def swaps(self, call: Call) -> bool:
        """swaps_last_two(call), kept by attribute dict and rank (replayed calls share their dicts)."""
        attrs, ndim = call.attrs, getattr(call.struct_info, "ndim", None)
        hit = self._swapping.get(id(attrs))
        if hit is None or hit[0] is not attrs or hit[1] != ndim:
            hit = self._swapping[id(attrs)] = (attrs, ndim, swaps_last_two(call))
        return hit[2]

    def operands(self, wt, a, g) -> bool:
        """Whether `matmul(a, wt)` with adjoint g may make a site: wt's adjoint is this matmul's partial only
        and not returned, a and g are variables of tensors of rank 2 at least."""
        if a is wt or wt in self.kept or g.__class__ not in _VARS or a.__class__ not in _VARS:
            return False
        sa, sg = a.struct_info, g.struct_info
        return sa.__class__ is TensorStructInfo and sg.__class__ is TensorStructInfo and sa.ndim >= 2 and sg.ndim >= 2

    def site(self, sweep, a, g, p: tuple, p_call: Call, dwt: tuple, dwt_call: Call, dw_call: Call, dw_var) -> list:
        """Record a site; its two bindings [t, m]."""
        op, attrs, sinfo = transpose_parts(sweep.bb, g, self._transposes)
        t = new_call_binding(DataflowVar, "lv", sinfo, op, (g,), attrs, sinfo)
        m = new_binding(dw_var, new_call(dwt_call.op, (t.var, a), dwt_call.attrs, dw_call.struct_info))
        self.sites[t.var] = TransposedSite(a, g, p, p_call, dwt, dwt_call, dw_call, m)
        return [t, m]

    def after_permute(self, sweep, binding: VarBinding, after: VarBinding) -> None:
        """After the backward of `wt = permute_dims(w)`, the next forward binding being `y = matmul(a, wt)`:
        the block's last three bindings p, dwt, dw become the site's t and m."""
        mm = after.value
        wt = binding.var
        block = sweep.block
        if mm.__class__ is not Call or mm.op is not self.matmul or len(mm.args) != 2 or mm.args[1] is not wt or len(block) < 3:
            return
        a, g = mm.args[0], sweep.adj.get(after.var)
        p, dwt, dw = block[-3], block[-2], block[-1]
        if sweep.adj.get(wt) is not dwt.var or not self.operands(wt, a, g):
            return
        pv, dwtv, dwv = p.value, dwt.value, dw.value
        if dwv.__class__ is not Call or dwv.op is not self.permute or dwv.args[0] is not dwt.var:
            return
        if dwtv.__class__ is not Call or dwtv.op is not mm.op or dwtv.args != (p.var, g):
            return
        if pv.__class__ is not Call or pv.op is not self.permute or pv.args[0] is not a:
            return
        if not (self.swaps(pv) and self.swaps(dwv)):
            return
        pvar, dvar = p.var, dwt.var
        block[-3:] = self.site(
            sweep, a, g, (pvar.__class__, pvar.name_hint, pvar.struct_info), pv,
            (dvar.__class__, dvar.name_hint, dvar.struct_info), dwtv, dwv, dw.var,
        )

    def at_matmul(self, sweep, before: VarBinding, call: Call, var, g, template) -> bool:
        """The backward of `y = matmul(a, wt)` (`var` y, `template` its rule's) when the forward binding
        before it is `wt = permute_dims(w)`: replay the template's partial of a, then, if the partial of wt is
        [p, dwt] and permute_dims's rule for wt replays [dw] (a template too), the site's t and m with
        w's adjoint accumulated, as the two rules and after_permute would have left them. False (nothing
        done) or True (the backward of y done, and of wt where there is a site)."""
        wt, wv = before.var, before.value
        args = call.args
        if len(args) != 2 or args[1] is not wt or wt in sweep.adj or wv.__class__ is not Call or wv.op is not self.permute:
            return False
        a, w = args[0], wv.args[0]
        if w.__class__ not in _VARS or w not in sweep.active or not self.operands(wt, a, g):
            return False
        form = self._matmul_form(template)
        if form is None:
            return False
        others, last, p_step, d_step = form
        templates = sweep.templates
        if p_step[6] and templates.param_source(a, p_step[4], p_step[3]) is not None:
            return False  # the replay would read a parameter in place of p: no site
        block = sweep.block
        templates.replay(others, call, var, g, sweep.hint, block, sweep.add)
        # permute_dims's template for wt, looked up as its backward would (dwt's stand-in: its recorded var);
        # what the lookup depends on that the layers of a network share, by identity (all kept alive by
        # the pass: `forms` holds the template): found once for them.
        shared = (id(template), id(wv.attrs), id(wt.struct_info), id(w.struct_info), wt.__class__, w.__class__, w in sweep.adj)
        hit = self._lookups.get(shared)
        if hit is not None and hit[0] is template:
            w_step = hit[1]
        else:
            key = templates.key(wv, wt, d_step[0], sweep.active, sweep.adj, True)
            w_step = None if key is None else self._permute_form(templates.get(key))
            if w_step is not None:  # (a template found stays: store keeps the first of a key)
                self._lookups[shared] = (template, w_step)
        if w_step is None:
            templates.replay(last, call, var, g, sweep.hint, block, sweep.add)
            return True
        wt_hint = sweep.hint(wt)
        _, p_cls, p_name, p_sinfo, p_call, _, _ = p_step
        _, d_cls, d_name, d_sinfo, d_call, _, _ = d_step
        _, w_cls, w_name, w_sinfo, dw_call, _, _ = w_step
        dw_var = new_var(w_cls, sweep.hint(w) if w_name is None else w_name, w_sinfo)
        block += self.site(
            sweep, a, g, (p_cls, wt_hint if p_name is None else p_name, p_sinfo), p_call,
            (d_cls, wt_hint if d_name is None else d_name, d_sinfo), d_call, dw_call, dw_var,
        )
        sweep.add(w, dw_var)
        return True

    def _matmul_form(self, template):
        """(the template without its last segment, the last alone, p's and dwt's steps) when matmul's rule
        replays [p, dwt] for its second argument last; else None. Kept by template."""
        hit = self._forms.get(id(template))
        if hit is not None and hit[0] is template:
            return hit[1]
        form = None
        t_args, t_var, t_g, segments = template
        index, _, steps, fitted = segments[-1]
        if index == 1 and len(steps) == 2 and fitted is steps[1][0]:
            p_step, d_step = steps
            p_call, d_call = p_step[4], d_step[4]
            if p_step[5] and d_step[5] and p_call.op is self.permute and p_call.args[0] is t_args[0] and self.swaps(p_call):
                if d_call.op is self.matmul and d_call.args == (p_step[0], t_g):
                    form = ((t_args, t_var, t_g, segments[:-1]), (t_args, t_var, t_g, segments[-1:]), p_step, d_step)
        self._forms[id(template)] = (template, form)
        return form

    def _permute_form(self, template):
        """The step of permute_dims's template when it replays [dw = permute_dims(g)] swapping g's last two
        axes, dw its partial; else None. Kept by template."""
        if template is None:
            return None
        hit = self._forms.get(id(template))
        if hit is not None and hit[0] is template:
            return hit[1]
        step = None
        if len(template[3]) == 1:
            index, _, steps, fitted = template[3][0]
            if index == 0 and len(steps) == 1 and fitted is steps[0][0] and steps[0][5] and not steps[0][6]:
                value = steps[0][4]
                if value.op is self.permute and value.args == (template[2],) and self.swaps(value):
                    step = steps[0]
        self._forms[id(template)] = (template, step)
        return step
