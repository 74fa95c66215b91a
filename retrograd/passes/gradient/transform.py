"""The Gradient pass: adds `<func>_adjoint` (and `<callee>_vjp` for called functions) to a module."""

from __future__ import annotations

from typing import Any

from retrograd.errors import GradientError, did_you_mean
from retrograd.gc_pause import collector_paused, promote_survivors
from retrograd.ir.vars import called_functions
from retrograd.ir.block import DataflowBlock, VarBinding, new_call_binding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.copy import copy_binding, copy_expr, fresh_var
from retrograd.ir.expr import Call, Constant, DataflowVar, Expr, Function, GlobalVar, If, Tuple, Var, new_var, shape_expr
from retrograd.ir.module import IRModule
from retrograd.ir.nested import fold
from retrograd.ir.struct_info import FuncStructInfo, TensorStructInfo, TupleStructInfo, annotation_form, tuple_fields
from retrograd.ir.text import format_sinfo
from retrograd.ops.registry import get as get_op
from retrograd.passes.cleanup import cleanup_function
from retrograd.passes.cse import AttrKeys
from retrograd.passes.dce import is_pure
from retrograd.passes.gradient.activity import all_float, compute_active
from retrograd.passes.gradient.markers import Recompute, collect_checkpoints, marker_kind
from retrograd.passes.gradient.sparse import SparseGrads
from retrograd.passes.gradient.spec import GradientSpec, resolve_spec, return_fields, vjp_spec
from retrograd.passes.gradient.sweep import Sweep
from retrograd.passes.gradient.templates import RuleTemplates
from retrograd.passes.gradient.transposed import TransposedOperands
from retrograd.passes.infra import module_pass


@module_pass(name="gradient", aliases={"func": "func_name"})
class Gradient:
    """Reverse-mode AD, TVM Relax's `Gradient` and beyond.

    Adds `<func_name>_adjoint` returning `(original result, (grad_1, ..., grad_k))`, one gradient
    per entry of `require_grads` (parameters as Vars, names or indices, or intermediate variables;
    default: every floating-point parameter). The target is the return value (or field
    `target_index` of a returned tuple) and must be a float scalar unless a seed is given.

    Checkpoint markers (TVM 0.27's semantics): values computed inside an
    `R.grad.start_checkpoint` / `R.grad.end_checkpoint` segment are not kept for the backward part,
    which recomputes them from the kept values right before their first backward use (`<v>_cp`,
    behind start/end_checkpoint barriers that clean-up passes leave alone); the markers themselves
    disappear from the adjoint. Gradients are bitwise those of the unmarked function.

    Beyond TVM:
      - `target_index` may be a list of fields (their sum is differentiated) or None (the whole
        return value, tuples included);
      - `seeds` gives the output cotangent of each target: "ones", "param" (a new trailing
        parameter named `<target>_adjoint` carries it: a vjp), or an array; one seed for all
        targets, a list parallel to the targets, or a dict {field index: seed} that also names the
        targets (Caffe2's list and dict forms);
      - `sparse_grads` (True, or parameters) returns the gradient of an embedding table used only
        by `take(table, indices, axis=0)` as an (indices, rows) pair; `merge_duplicates` sums rows
        of repeated indices (see `densify_sparse_grad`);
      - several blocks, bindings outside dataflow blocks, If, and calls to other functions of the
        module (differentiated into private `<callee>_vjp` functions; a name the module already
        uses gets a suffix, `<callee>_vjp_1`, so user functions are never captured or replaced; an
        existing `<func_name>_adjoint` is replaced only when no function calls it, as on a re-run);
      - `cleanup` (default True) folds constants, simplifies and removes dead code in the new functions.
    """

    def __init__(
        self,
        func_name: str,
        require_grads: Any = None,
        target_index: int | list[int] | None = 0,
        seeds: Any = None,
        sparse_grads: Any = None,
        merge_duplicates: bool = False,
        cleanup: bool = True,
    ):
        self.func_name = func_name
        self.require_grads = require_grads
        self.target_index = target_index
        self.seeds = seeds
        self.sparse_grads = sparse_grads
        self.merge_duplicates = merge_duplicates
        self.cleanup = cleanup

    def transform_module(self, mod: IRModule, ctx=None) -> IRModule:
        # Without the pause the pass was 1.5x slower at 50,000 bindings. (Copying and sweeping recurse
        # once per nested If: Pass.__call__ makes stack room for the deepest.)
        with collector_paused():
            out = ModuleAD(mod, self).run()
            promote_survivors()
            return out



class ModuleAD:
    """Differentiates one function of a module, and, on demand, the functions it calls."""

    def __init__(self, mod: IRModule, options: Gradient):
        self.mod = mod
        self.options = options
        self.new_functions: dict[str, Function] = {}
        self.vjps: dict[str, tuple] = {}
        self.reserved: set[str] = set()
        self.sites: dict[str, dict] = {}  # function name -> its FunctionAD's sites

    def _fresh_name(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, ... : a name no function of the module (or of this pass) has."""
        name, k = base, 0
        while name in self.mod or name in self.reserved:
            k += 1
            name = f"{base}_{k}"
        self.reserved.add(name)
        return name

    def run(self) -> IRModule:
        o = self.options
        name = o.func_name
        func = _lookup(self.mod, name, None)
        spec = resolve_spec(name, func, o.require_grads, o.target_index, o.seeds, o.sparse_grads, o.merge_duplicates)
        ad = FunctionAD(self, spec)
        adjoint_name = f"{name}_adjoint"
        # Only a re-run has callers to look for (the scan walks the whole module).
        callers = adjoint_name in self.mod and [
            n for n, f in self.mod.items() if isinstance(f, Function) and adjoint_name in called_functions(f)
        ]
        if callers:
            # A re-run replaces the previous adjoint; replacing a function others call would change their meaning.
            raise GradientError(
                f"the module already has a function named '{adjoint_name}', called by {', '.join(sorted(callers))}: "
                "rename it (generated functions never replace called ones)",
                func.span,
            )
        self.reserved.add(adjoint_name)
        self.new_functions = {adjoint_name: ad.build(return_forward=True, new_name=adjoint_name), **self.new_functions}
        self.sites[adjoint_name] = ad.sites
        out = self.mod
        if o.cleanup:
            self.new_functions = {n: cleanup_function(f, self.sites.get(n)) for n, f in self.new_functions.items()}
        for fname, f in self.new_functions.items():
            out = out.with_function(fname, f)
        return out

    def vjp_function(self, callee: str, binding, caller: FunctionAD):
        """The GlobalVar of `<callee>_vjp(params..., result_adjoint) -> grads of its float params`."""
        hit = self.vjps.get(callee)
        if hit is not None:
            return hit
        func = _lookup(self.mod, callee, caller.spec.func_name, binding)
        indices = [k for k, p in enumerate(func.params) if all_float(p.struct_info)]
        vjp_name = self._fresh_name(f"{callee}_vjp")
        ret = func.ret_struct_info or func.body.struct_info
        grads = [func.params[k].struct_info for k in indices]
        out_sinfo = grads[0] if len(grads) == 1 else TupleStructInfo(tuple(grads))
        sig = FuncStructInfo(tuple(p.struct_info for p in func.params) + (ret,), out_sinfo, func.is_pure)
        gvar = GlobalVar(vjp_name, sig)
        self.vjps[callee] = (gvar, indices)
        if indices:
            ad = FunctionAD(self, vjp_spec(callee, func, indices))
            self.new_functions[vjp_name] = ad.build(return_forward=False, new_name=vjp_name, private=True)
            self.sites[vjp_name] = ad.sites
        return self.vjps[callee]


def _lookup(mod: IRModule, name: str, caller: str | None, binding=None) -> Function:
    where = f" (called from '{caller}')" if caller else ""
    span = getattr(binding, "span", None)
    if not isinstance(name, str) or name not in mod:
        known = ", ".join(mod.keys()) or "none"
        hint = did_you_mean(name, mod.keys())
        raise GradientError(f"no function named '{name}' in the module{where}{hint} (functions: {known})", span)
    func = mod[name]
    if not isinstance(func, Function):
        raise GradientError(f"'{name}' is not a Relax function{where}", span)
    return func


class FunctionAD:
    """The adjoint of one function: forward bindings copied with fresh vars, then the reverse sweep.
    It is the sweep's host (errors, callee vjps, sparse tables)."""

    def __init__(self, parent: ModuleAD, spec: GradientSpec):
        self.parent = parent
        self.spec = spec
        self.sparse = SparseGrads(spec)
        # The sweep asks at every op call: the tables' method itself, one frame less.
        self.sparse_contribution = self.sparse.contribute
        self.recompute: Recompute | None = None
        # Attribute dicts and tensor struct infos that the forward copies share (see _copy_binding); the
        # templates key attributes with the same AttrKeys.
        self.attr_keys = AttrKeys()
        self.sinfos: dict = {}
        self.sites: dict = {}  # the sweep's rewrites for the clean-up to check (transposed.py)

    def error(self, message: str, binding=None) -> GradientError:
        return self.spec.error(message, binding)

    def vjp_function(self, callee: str, binding):
        return self.parent.vjp_function(callee, binding, self)

    def restore(self, expr: Expr) -> Expr:
        return expr if self.recompute is None else self.recompute.restore(expr)

    # -- building -------------------------------------------------------------
    def build(self, return_forward: bool, new_name: str, private: bool | None = None) -> Function:
        spec = self.spec
        func = spec.func
        sinfos = self.sinfos
        params = [new_var(p.__class__, p.name_hint, _shared_sinfo(p.struct_info, sinfos), p.span) for p in func.params]
        vmap = dict(zip(func.params, params))
        blocks = func.body.blocks
        # An If, or an impure call (a collective, whose adjoint is one too), keeps the backward out of
        # dataflow blocks, where neither may stand.
        values = [b.value for blk in blocks for b in blk.bindings]
        by_op = {v.op: v for v in values if v.__class__ is Call}  # a call's purity is its callee's
        has_if = If in set(map(type, values)) or not all(is_pure(v, self.parent.mod) for v in by_op.values())
        # The backward joins the last forward block when that is a dataflow block (TVM's form);
        # otherwise forward values are made visible to it by turning dataflow vars into outputs.
        merged = not has_if and bool(blocks) and isinstance(blocks[-1], DataflowBlock)
        bb = BlockBuilder(self.parent.mod)
        bb.begin_scope()
        checkpoints = collect_checkpoints(func, self.parent.mod)
        marks = checkpoints[1] if checkpoints else {}
        forward = self._copy_forward(bb, vmap, merged, marks, checkpoints is not None)
        if not merged:
            bb.begin_block(dataflow=not has_if)
        ret = copy_expr(func.body.body, vmap, promote=True)
        required = [vmap[v] for v in spec.required]
        self.sparse.bind(vmap, forward, ret)
        if checkpoints:
            kept = {vmap[v] for v in checkpoints[0]} | {vmap[m] for m, v in marks.items() if v in checkpoints[0]}
            self.recompute = Recompute(bb, forward, kept)

        templates = None
        if self.recompute is None:
            # With the clean-up to come, replayed rules skip the transposes it would cancel (param_source).
            templates = RuleTemplates(self.attr_keys, {b.var: b.value for b in forward} if self.parent.options.cleanup else None)
        sweep = Sweep(self, bb, compute_active(forward, required), templates)
        if templates is not None and templates.forward is not None:
            sweep.transposed = TransposedOperands(set(required))
            self.sites = sweep.transposed.sites
        seed_params = self._seed(sweep, bb, ret)
        sweep.run(forward)

        outs = []
        for var in required:
            if self.sparse.is_sparse(var):
                value = self.sparse.result(sweep, var)
            else:
                value = sweep.materialize(sweep.adj.get(var), var.struct_info, var)
            outs.append(bb.emit_output(value, f"{var.name_hint}_adjoint_out"))
        if return_forward:
            result = Tuple([ret, Tuple(outs)])
        else:
            result = outs[0] if len(outs) == 1 else Tuple(outs)
        body = bb.end_scope(result)
        attrs = dict(func.attrs)
        if "global_symbol" in attrs:
            attrs["global_symbol"] = new_name
        return Function(
            tuple(params) + tuple(seed_params),
            body,
            body.struct_info,
            func.is_pure,
            func.private if private is None else private,
            attrs,
            span=func.span,
        )

    def _copy_forward(self, bb: BlockBuilder, vmap: dict, merged: bool, marks: dict, has_markers: bool) -> list:
        """Emit the forward bindings with fresh vars (vmap maps old to new) and return them. Checkpoint
        markers (`has_markers`) disappear: a marker var stands for the var it marks."""
        blocks = self.spec.func.body.blocks
        forward = []
        shared, sinfos = self.attr_keys.shared, self.sinfos
        for k, block in enumerate(blocks):
            joins = merged and k == len(blocks) - 1
            bb.begin_block(dataflow=isinstance(block, DataflowBlock))
            if not has_markers:  # the common case: no marker to look for
                copied = [_copy_binding(b, vmap, not joins, shared, sinfos) for b in block.bindings]
                bb.current_bindings().extend(copied)
                forward += copied
                if not joins:
                    bb.end_block()
                continue
            for b in block.bindings:
                if b.var in marks:
                    value = vmap[marks[b.var]]
                    if isinstance(b.var, DataflowVar) or not isinstance(value, DataflowVar):
                        vmap[b.var] = value
                        continue
                    nb = VarBinding(fresh_var(b.var), value, span=b.span)  # an output of the block
                    vmap[b.var] = nb.var
                elif marker_kind(b.value):  # of a constant or a tuple: bound as it is
                    nb = VarBinding(fresh_var(b.var, not joins), copy_expr(b.value.args[0], vmap), span=b.span)
                    vmap[b.var] = nb.var
                else:
                    nb = copy_binding(b, vmap, promote=not joins)
                bb.emit_binding(nb)
                forward.append(nb)
            if not joins:
                bb.end_block()
        return forward

    def _seed(self, sweep: Sweep, bb: BlockBuilder, ret: Expr) -> list:
        """Put each target's seed into the adjoint of the returned value; return new seed parameters."""
        spec = self.spec
        n, _ = return_fields(spec.func)
        params = []
        for index, seed in spec.targets:
            if index is None:
                target, sinfo = ret, ret.struct_info
            else:
                sinfo = ret.struct_info.fields[index] if n is not None else ret.struct_info
                target = ret.fields[index] if isinstance(ret, Tuple) else ret
            name = target.name_hint if isinstance(target, Var) else f"{spec.func_name}_ret{'' if index is None else index}"
            if isinstance(seed, Constant):
                value = seed
            elif seed == "param":
                value = Var(f"{name}_adjoint", annotation_form(sinfo))
                params.append(value)
            else:
                value = self._ones(bb, sinfo, name)
            if index is None or n is None:
                sweep.add(ret, value if not isinstance(value, Tuple) else tuple(value.fields))
            else:
                sweep.add(ret, tuple(value if i == index else None for i in range(n)))
        return params

    def _ones(self, bb: BlockBuilder, sinfo, name: str) -> Expr:
        if isinstance(sinfo, TupleStructInfo):
            # Built with a stack (tuples nest to any depth), then normalized at once.
            return bb.normalize(fold(sinfo, tuple_fields, lambda s, kids: Tuple(kids) if isinstance(s, TupleStructInfo) else self._one(bb, s, name), shared=False))
        return self._one(bb, sinfo, name)

    def _one(self, bb: BlockBuilder, sinfo, name: str) -> Expr:
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or not sinfo.dtype:
            raise self.error(f"cannot seed a target of unknown shape with ones ({format_sinfo(sinfo, brief=True)})")
        return bb.emit(get_op("relax.ones")(shape_expr(sinfo.shape), dtype=sinfo.dtype), f"{name}_adjoint")

def _copy_binding(b: VarBinding, vmap: dict, promote: bool, shared, sinfos: dict) -> VarBinding:
    """copy_binding, sharing what equal copies may share: a call on leaves takes `shared(its attributes)`,
    the new var the first equal tensor struct info in `sinfos`. A parsed module gives each call its own
    dict and each var its own struct info; the templates and the clean-up key attributes by dict, and
    compare struct infos (by identity first) in their keys."""
    value = b.value
    if value.__class__ is not Call or Tuple in map(type, value.args):
        return copy_binding(b, vmap, promote)
    args = value.args
    old = b.var
    sinfo = old.struct_info
    if sinfo.__class__ is TensorStructInfo:  # _shared_sinfo, inline: one call less per binding
        sinfo = sinfos.setdefault((sinfo.shape, sinfo.dtype, sinfo.ndim), sinfo)
    new = new_call_binding(
        Var if promote else old.__class__, old.name_hint, sinfo, value.op,
        tuple(map(vmap.get, args, args)), shared(value.attrs), value.struct_info, old.span, value.span, b.span,
    )
    vmap[old] = new.var
    return new


def _shared_sinfo(sinfo, sinfos: dict):
    """The first tensor struct info equal to `sinfo` (equal ones print alike: dims are ints or names, the
    dtype a string); other kinds as they are (a prim's value 0.0 equals -0.0)."""
    if sinfo.__class__ is TensorStructInfo:
        # Keyed by its fields (what its equality compares): hashed and compared at C speed.
        return sinfos.setdefault((sinfo.shape, sinfo.dtype, sinfo.ndim), sinfo)
    return sinfo


__all__ = ["Gradient", "cleanup_function"]

