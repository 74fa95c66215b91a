"""Reverse-mode automatic differentiation: the Gradient pass adds `<func>_adjoint` to a module."""

from __future__ import annotations

from typing import Any

import numpy as np

from retrograd.errors import GradientError
from retrograd.gc_pause import collector_paused
from retrograd.ir.block import DataflowBlock
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.copy import copy_binding, copy_expr, fresh_var
from retrograd.ir.expr import Constant, Expr, Function, GlobalVar, If, Tuple, Var, shape_expr
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import FuncStructInfo, TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ir.text import format_sinfo
from retrograd.ops.registry import get as get_op
from retrograd.passes.cse import eliminate_common_subexpressions
from retrograd.passes.dce import eliminate_dead_code
from retrograd.passes.fold_constant import fold_constants
from retrograd.passes.gradient_sparse import SparseGrads
from retrograd.passes.gradient_sweep import Sweep, all_float, compute_active
from retrograd.passes.infra import module_pass
from retrograd.passes.simplify import simplify_function

_SEED_KINDS = ("ones", "param")


@module_pass(name="gradient", aliases={"func": "func_name"})
class Gradient:
    """Reverse-mode AD, TVM Relax's `Gradient` and beyond.

    Adds `<func_name>_adjoint` returning `(original result, (grad_1, ..., grad_k))`, one gradient
    per entry of `require_grads` (parameters as Vars, names or indices, or intermediate variables;
    default: every floating-point parameter). The target is the return value (or field
    `target_index` of a returned tuple) and must be a float scalar unless a seed is given.

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
        module (differentiated into private `<callee>_vjp` functions);
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
        # Without the pause the pass was 1.5x slower at 50,000 bindings.
        with collector_paused():
            return _ModuleAD(mod, self).run()


def cleanup_function(func: Function) -> Function:
    """The clean-up run on every function the Gradient pass creates."""
    func = fold_constants(func)
    func = simplify_function(func)
    func = eliminate_common_subexpressions(func)
    return eliminate_dead_code(func)


class _ModuleAD:
    """Differentiates one function of a module, and, on demand, the functions it calls."""

    def __init__(self, mod: IRModule, options: Gradient):
        self.mod = mod
        self.options = options
        self.new_functions: dict[str, Function] = {}
        self.vjps: dict[str, tuple] = {}

    def run(self) -> IRModule:
        name = self.options.func_name
        func = _lookup(self.mod, name, None)
        ad = _FunctionAD(self, name, func)
        ad.configure_from(self.options)
        adjoint_name = f"{name}_adjoint"
        self.new_functions = {adjoint_name: ad.build(return_forward=True, new_name=adjoint_name), **self.new_functions}
        out = self.mod
        if self.options.cleanup:
            self.new_functions = {n: cleanup_function(f) for n, f in self.new_functions.items()}
        for fname, f in self.new_functions.items():
            out = out.with_function(fname, f)
        return out

    def vjp_function(self, callee: str, binding, caller: "_FunctionAD"):
        """The GlobalVar of `<callee>_vjp(params..., result_adjoint) -> grads of its float params`."""
        hit = self.vjps.get(callee)
        if hit is not None:
            return hit
        func = _lookup(self.mod, callee, caller.func_name, binding)
        indices = [k for k, p in enumerate(func.params) if all_float(p.struct_info)]
        vjp_name = f"{callee}_vjp"
        ret = func.ret_struct_info or func.body.struct_info
        grads = [func.params[k].struct_info for k in indices]
        out_sinfo = grads[0] if len(grads) == 1 else TupleStructInfo(tuple(grads))
        sig = FuncStructInfo(tuple(p.struct_info for p in func.params) + (ret,), out_sinfo, func.is_pure)
        gvar = GlobalVar(vjp_name, sig)
        self.vjps[callee] = (gvar, indices)
        if indices:
            ad = _FunctionAD(self, callee, func)
            ad.configure_vjp(indices)
            self.new_functions[vjp_name] = ad.build(return_forward=False, new_name=vjp_name, private=True)
        return self.vjps[callee]


def _lookup(mod: IRModule, name: str, caller: str | None, binding=None) -> Function:
    where = f" (called from '{caller}')" if caller else ""
    span = getattr(binding, "span", None)
    if not isinstance(name, str) or name not in mod:
        known = ", ".join(mod.keys()) or "none"
        raise GradientError(f"no function named '{name}' in the module{where} (functions: {known})", span)
    func = mod[name]
    if not isinstance(func, Function):
        raise GradientError(f"'{name}' is not a Relax function{where}", span)
    return func


class _FunctionAD:
    """The adjoint of one function: forward bindings copied with fresh vars, then the reverse sweep."""

    def __init__(self, parent: _ModuleAD, func_name: str, func: Function):
        self.parent = parent
        self.func_name = func_name
        self.func = func
        self.required: list = []  # original vars
        self.targets: list = []  # (index or None, seed kind or array)
        self.sparse = SparseGrads(self)

    # -- errors -----------------------------------------------------------------
    def error(self, message: str, binding=None) -> GradientError:
        if binding is not None:
            message = f"binding '{binding.var.name_hint}': {message}"
        span = getattr(binding, "span", None) or (self.func.span if binding is None else None)
        return GradientError(f"in function '{self.func_name}': {message}", span)

    def vjp_function(self, callee: str, binding):
        return self.parent.vjp_function(callee, binding, self)

    def sparse_contribution(self, sweep, binding, call, adj) -> bool:
        return self.sparse.contribute(sweep, binding, call, adj)

    # -- options ------------------------------------------------------------------
    def configure_from(self, options: Gradient) -> None:
        self.required = self._resolve_required(options.require_grads)
        self.targets = self._resolve_targets(options.target_index, options.seeds)
        self.sparse.configure(options.sparse_grads, options.merge_duplicates, self.required)

    def configure_vjp(self, indices) -> None:
        self.required = [self.func.params[k] for k in indices]
        self.targets = [(None, "param")]

    def _top_bindings(self):
        for block in self.func.body.blocks:
            yield from block.bindings

    def _resolve_required(self, spec) -> list:
        params = list(self.func.params)
        if spec is None:
            # Integer inputs (indices, targets) get no gradient unless explicitly asked for.
            return [p for p in params if all_float(p.struct_info)]
        items = list(spec) if isinstance(spec, list | tuple) else [spec]
        bound = [b.var for b in self._top_bindings()]
        out = []
        for item in items:
            var = self._resolve_one(item, params, bound)
            if any(var is v for v in out):
                raise self.error(f"require_grads lists '{var.name_hint}' twice")
            if not all_float(var.struct_info):
                raise self.error(
                    f"require_grads: '{var.name_hint}' is not floating point ({format_sinfo(var.struct_info, brief=True)}); "
                    "only float tensors (or tuples of them) have gradients"
                )
            out.append(var)
        return out

    def _resolve_one(self, item, params, bound) -> Var:
        if isinstance(item, Var):
            if any(item is p for p in params) or any(item is v for v in bound):
                return item
            raise self.error(
                f"require_grads: variable '{item.name_hint}' is not a parameter or a top-level variable of the function"
            )
        if isinstance(item, bool) or not isinstance(item, int | str):
            raise self.error(f"require_grads entries are Vars, names or parameter indices, got {item!r}")
        if isinstance(item, int):
            if not 0 <= item < len(params):
                raise self.error(f"require_grads: parameter index {item} out of range ({len(params)} parameters)")
            return params[item]
        for p in params:
            if p.name_hint == item:
                return p
        matches = [v for v in bound if v.name_hint == item]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise self.error(f"require_grads: name '{item}' is bound {len(matches)} times; pass the Var instead")
        names = ", ".join(p.name_hint for p in params)
        raise self.error(f"require_grads: no parameter or variable named '{item}' (parameters: {names})")

    def _ret_fields(self):
        """(number of fields of the returned tuple or None, the returned expression)."""
        ret = self.func.body.body
        if isinstance(ret, Tuple):
            return len(ret.fields), ret
        if isinstance(ret.struct_info, TupleStructInfo):
            return len(ret.struct_info.fields), ret
        return None, ret

    def _resolve_targets(self, index, seeds) -> list:
        if isinstance(seeds, dict):
            if index not in (0, None) and sorted(_as_list(index)) != sorted(seeds):
                raise self.error("give the targets either as target_index or as the keys of a seeds dict, not both")
            indices, seed_list = list(seeds.keys()), list(seeds.values())
        else:
            indices = [None] if index is None else _as_list(index)
            if isinstance(seeds, list | tuple) and not isinstance(seeds, np.ndarray):
                if len(seeds) != len(indices):
                    raise self.error(f"{len(seeds)} seeds given for {len(indices)} targets")
                seed_list = list(seeds)
            else:
                seed_list = [seeds] * len(indices)
        if not indices:
            raise self.error("no differentiation target")
        out = []
        seen = set()
        for i, seed in zip(indices, seed_list):
            if i in seen:
                raise self.error(f"target {i} is listed twice")
            seen.add(i)
            out.append((i, self._check_target(i, seed)))
        return out

    def _check_target(self, index, seed):
        n, ret = self._ret_fields()
        if index is None:
            expr, sinfo = ret, ret.struct_info
        else:
            if isinstance(index, bool) or not isinstance(index, int):
                raise self.error(f"target_index must be an integer, got {index!r}")
            if n is None:
                if index != 0:
                    raise self.error(f"target_index {index} out of range: the function returns a single value")
                expr, sinfo = ret, ret.struct_info
            else:
                if not 0 <= index < n:
                    raise self.error(f"target_index {index} out of range: the function returns a tuple of {n} fields")
                expr = ret.fields[index] if isinstance(ret, Tuple) else None
                sinfo = ret.struct_info.fields[index]
        if expr is not None and not isinstance(expr, Var | Tuple):
            raise self.error(
                f"the target (return field {index}) is a {type(expr).__name__}, not a variable; nothing to differentiate"
            )
        if seed is not None and not (isinstance(seed, str) and seed in _SEED_KINDS):
            if isinstance(seed, str):
                raise self.error(f"unknown seed {seed!r}: use 'ones', 'param' or an array")
            return self._constant_seed(seed, sinfo)
        what = "the target" if index is None else f"the target (return field {index})"
        if isinstance(sinfo, TupleStructInfo):
            if seed is None:
                raise self.error(f"{what} is a tuple, not a tensor; give seeds='param' or seeds='ones' to use it")
            return seed
        if not isinstance(sinfo, TensorStructInfo):
            raise self.error(f"{what} is not a tensor ({format_sinfo(sinfo, brief=True)})")
        if not is_float_dtype(sinfo.dtype):
            raise self.error(f"{what} is not floating point (dtype {sinfo.dtype or 'unknown'})")
        if seed is None:
            if sinfo.ndim != 0:
                raise self.error(
                    f"{what} is not a scalar ({format_sinfo(sinfo, brief=True)}); give seeds='param' for a vjp "
                    "or seeds='ones' to differentiate the sum of its elements"
                )
            return "ones"
        return seed

    def _constant_seed(self, value, sinfo):
        if not isinstance(sinfo, TensorStructInfo) or not sinfo.is_static or not sinfo.dtype:
            raise self.error(f"an array seed needs a target tensor of static shape, got {format_sinfo(sinfo, brief=True)}")
        try:
            arr = np.broadcast_to(np.asarray(value, dtype=sinfo.dtype), sinfo.shape).copy()
        except (ValueError, TypeError) as err:
            raise self.error(f"seed of shape {np.shape(value)} does not fit the target {format_sinfo(sinfo, brief=True)}: {err}") from None
        arr.setflags(write=False)
        return Constant(arr, TensorStructInfo(arr.shape, str(arr.dtype)))

    # -- building -------------------------------------------------------------
    def build(self, return_forward: bool, new_name: str, private: bool | None = None) -> Function:
        func = self.func
        params = [fresh_var(p) for p in func.params]
        vmap = dict(zip(func.params, params))
        blocks = func.body.blocks
        has_if = any(isinstance(b.value, If) for blk in blocks for b in blk.bindings)
        # The backward joins the last forward block when that is a dataflow block (TVM's form);
        # otherwise forward values are made visible to it by turning dataflow vars into outputs.
        merged = not has_if and bool(blocks) and isinstance(blocks[-1], DataflowBlock)
        bb = BlockBuilder(self.parent.mod)
        bb.begin_scope()
        forward = []
        for k, block in enumerate(blocks):
            joins = merged and k == len(blocks) - 1
            bb.begin_block(dataflow=isinstance(block, DataflowBlock))
            for b in block.bindings:
                nb = copy_binding(b, vmap, promote=not joins)
                bb.emit_binding(nb)
                forward.append(nb)
            if not joins:
                bb.end_block()
        if not merged:
            bb.begin_block(dataflow=not has_if)
        ret = copy_expr(func.body.body, vmap, promote=True)
        required = [vmap[v] for v in self.required]
        self.sparse.bind(vmap, forward, ret)

        sweep = Sweep(self, bb, compute_active(forward, required))
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

    def _seed(self, sweep: Sweep, bb: BlockBuilder, ret: Expr) -> list:
        """Put each target's seed into the adjoint of the returned value; return new seed parameters."""
        n, _ = self._ret_fields()
        params = []
        for index, seed in self.targets:
            if index is None:
                target, sinfo = ret, ret.struct_info
            else:
                sinfo = ret.struct_info.fields[index] if n is not None else ret.struct_info
                target = ret.fields[index] if isinstance(ret, Tuple) else ret
            name = target.name_hint if isinstance(target, Var) else f"{self.func_name}_ret{'' if index is None else index}"
            if isinstance(seed, Constant):
                value = seed
            elif seed == "param":
                value = Var(f"{name}_adjoint", sinfo)
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
            return bb.normalize(Tuple([self._ones(bb, s, name) for s in sinfo.fields]))
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or not sinfo.dtype:
            raise self.error(f"cannot seed a target of unknown shape with ones ({format_sinfo(sinfo, brief=True)})")
        return bb.emit(get_op("relax.ones")(shape_expr(sinfo.shape), dtype=sinfo.dtype), f"{name}_adjoint")


def _as_list(index) -> list:
    if isinstance(index, list | tuple):
        return list(index)
    return [index]


__all__ = ["Gradient", "cleanup_function"]
