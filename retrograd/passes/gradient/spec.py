"""The Gradient pass's options resolved once, against the function, into a frozen GradientSpec."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import Constant, Function, Tuple, Var
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ir.text import format_sinfo
from retrograd.passes.gradient.activity import all_float

SEED_KINDS = ("ones", "param")


@attrs.frozen(eq=False)
class GradientSpec:
    """What to differentiate in one function: every option checked, every name resolved to a Var."""

    func_name: str
    func: Function
    required: tuple[Var, ...]  # variables of `func` whose gradient is returned, in order
    targets: tuple[tuple[int | None, Any], ...]  # (return field or None for all, "ones" | "param" | Constant)
    sparse: tuple[Var, ...] = ()  # tables that may get an (indices, rows) gradient
    sparse_explicit: bool = False  # the tables were named: a table used otherwise is an error
    merge_duplicates: bool = False

    def error(self, message: str, binding=None) -> GradientError:
        return located_error(self.func_name, self.func, message, binding)


def located_error(func_name: str, func: Function, message: str, binding=None) -> GradientError:
    """A GradientError naming the function (and binding), located at the binding or else the function."""
    if binding is not None:
        message = f"binding '{binding.var.name_hint}': {message}"
    span = getattr(binding, "span", None) or (func.span if binding is None else None)
    return GradientError(f"in function '{func_name}': {message}", span)


def return_fields(func: Function):
    """(number of fields of the returned tuple or None, the returned expression)."""
    ret = func.body.body
    if isinstance(ret, Tuple):
        return len(ret.fields), ret
    if isinstance(ret.struct_info, TupleStructInfo):
        return len(ret.struct_info.fields), ret
    return None, ret


def resolve_spec(
    func_name: str,
    func: Function,
    require_grads: Any = None,
    target_index: Any = 0,
    seeds: Any = None,
    sparse_grads: Any = None,
    merge_duplicates: bool = False,
) -> GradientSpec:
    """Check the user's options against `func` (clear located errors) and resolve them."""
    r = _Resolver(func_name, func)
    r.option = "require_grads"
    required = r.required(require_grads)
    r.option = "target_index" if seeds is None else "seeds"
    targets = r.targets(target_index, seeds)
    r.option = "sparse_grads"
    sparse, explicit = r.sparse(sparse_grads, required)
    return GradientSpec(func_name, func, tuple(required), tuple(targets), tuple(sparse), explicit, bool(merge_duplicates))


def vjp_spec(func_name: str, func: Function, indices) -> GradientSpec:
    """The spec of `<callee>_vjp`: gradients of the parameters at `indices`, the cotangent as a parameter."""
    return GradientSpec(func_name, func, tuple(func.params[k] for k in indices), ((None, "param"),))


class _Resolver:
    def __init__(self, func_name: str, func: Function):
        self.func_name = func_name
        self.func = func
        self.params = list(func.params)
        self.option: str | None = None

    def error(self, message: str) -> GradientError:
        return located_error(self.func_name, self.func, message).about_option(self.option)

    # -- require_grads ------------------------------------------------------------
    def required(self, spec) -> list:
        params = self.params
        if spec is None:
            # Integer inputs (indices, targets) get no gradient unless explicitly asked for.
            return [p for p in params if all_float(p.struct_info)]
        items = list(spec) if isinstance(spec, list | tuple) else [spec]
        bound = [b.var for block in self.func.body.blocks for b in block.bindings]
        out = []
        for item in items:
            var = self.one(item, bound)
            if any(var is v for v in out):
                raise self.error(f"require_grads lists '{var.name_hint}' twice")
            if not all_float(var.struct_info):
                raise self.error(
                    f"require_grads: '{var.name_hint}' is not floating point ({format_sinfo(var.struct_info, brief=True)}); "
                    "only float tensors (or tuples of them) have gradients"
                )
            out.append(var)
        return out

    def one(self, item, bound) -> Var:
        params = self.params
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

    # -- targets and seeds -------------------------------------------------------------
    def targets(self, index, seeds) -> list:
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
            out.append((i, self.target(i, seed)))
        return out

    def target(self, index, seed):
        n, ret = return_fields(self.func)
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
        if seed is not None and not (isinstance(seed, str) and seed in SEED_KINDS):
            if isinstance(seed, str):
                raise self.error(f"unknown seed {seed!r}: use 'ones', 'param' or an array")
            return self.constant_seed(seed, sinfo)
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

    def constant_seed(self, value, sinfo):
        if not isinstance(sinfo, TensorStructInfo) or not sinfo.is_static or not sinfo.dtype:
            raise self.error(f"an array seed needs a target tensor of static shape, got {format_sinfo(sinfo, brief=True)}")
        try:
            arr = np.broadcast_to(np.asarray(value, dtype=sinfo.dtype), sinfo.shape).copy()
        except (ValueError, TypeError) as err:
            raise self.error(f"seed of shape {np.shape(value)} does not fit the target {format_sinfo(sinfo, brief=True)}: {err}") from None
        arr.setflags(write=False)
        return Constant(arr, TensorStructInfo(arr.shape, str(arr.dtype)))

    # -- sparse gradients -------------------------------------------------------------
    def sparse(self, spec, required: list) -> tuple[list, bool]:
        if spec is None or spec is False:
            return [], False
        if spec is True:
            return [p for p in required if any(p is q for q in self.params)], False
        out = []
        for item in list(spec) if isinstance(spec, list | tuple) else [spec]:
            var = self.one(item, [])
            if not any(var is r for r in required):
                raise self.error(f"sparse_grads: '{var.name_hint}' is not among the variables whose gradient is required")
            s = var.struct_info
            if not isinstance(s, TensorStructInfo) or s.ndim < 1 or s.shape is None:
                raise self.error(f"sparse_grads: '{var.name_hint}' must be a table (a tensor of known shape, ndim >= 1)")
            out.append(var)
        return out, True


def _as_list(index) -> list:
    if isinstance(index, list | tuple):
        return list(index)
    return [index]
