"""Numeric gradient checking: the Gradient pass's adjoint against central differences in float64."""

from __future__ import annotations

import math

import attrs
import numpy as np

from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Call, Constant, Function, GlobalVar, Var
from retrograd.ir.functor import ExprMutator, module_if_depth, stack_room
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import FuncStructInfo, StructInfo, TensorStructInfo, TupleStructInfo, is_float_dtype

__all__ = ["check_gradients", "GradientCheckReport", "to_float64"]


# -- float64 copy of a module ---------------------------------------------------------------------


def _retype(s: StructInfo) -> StructInfo:
    if isinstance(s, TensorStructInfo) and is_float_dtype(s.dtype):
        return TensorStructInfo(s.shape, "float64", s.ndim)
    if isinstance(s, TupleStructInfo):
        return TupleStructInfo(tuple(_retype(f) for f in s.fields))
    if isinstance(s, FuncStructInfo):
        return FuncStructInfo(tuple(_retype(p) for p in s.params), _retype(s.ret), s.purity)
    return s


_DTYPE_ATTRS = ("dtype", "out_dtype")


class _ToFloat64(ExprMutator):
    def __init__(self, mod: IRModule, sigs: dict):
        super().__init__(mod)
        self.builder = BlockBuilder(global_sinfo=sigs)
        self.sigs = sigs

    def visit_global_var(self, gv: GlobalVar):
        return GlobalVar(gv.name_hint, self.sigs.get(gv.name_hint, gv.struct_info), span=gv.span)

    def visit_constant(self, c: Constant):
        if not is_float_dtype(str(c.data.dtype)):
            return c
        data = c.data.astype(np.float64)
        data.setflags(write=False)
        return Constant(data, TensorStructInfo(data.shape, "float64"), span=c.span)

    def visit_call(self, call: Call):
        op = self.visit_expr(call.op) if isinstance(call.op, GlobalVar) else call.op
        args = tuple(self.visit_expr(a) for a in call.args)
        new_attrs = {
            k: ("float64" if k in _DTYPE_ATTRS and isinstance(v, str) and is_float_dtype(v)
                else _retype(v) if isinstance(v, StructInfo) else v)  # R.match_cast's target
            for k, v in call.attrs.items()
        }
        return self.builder.normalize(Call(op, args, new_attrs, span=call.span))

    def visit_function(self, func: Function):
        params = tuple(type(p)(p.name_hint, _retype(p.struct_info), span=p.span) for p in func.params)
        self.var_remap.update(zip(func.params, params))
        body = self.visit_expr(func.body)
        return attrs.evolve(func, params=params, body=body, ret_struct_info=body.struct_info, attrs=dict(func.attrs), struct_info=None)


def to_float64(mod: IRModule) -> IRModule:
    """The module with every floating-point tensor (params, constants, dtype attributes) in float64."""
    sigs = {name: _retype(f.struct_info) for name, f in mod.items()}
    out = {}
    with stack_room(module_if_depth(mod)):  # the mutator recurses once per nested If
        for name, func in mod.items():
            out[name] = _ToFloat64(mod, sigs).visit_function(func)
    return IRModule(out, mod.attrs)


# -- the report -----------------------------------------------------------------------------------


@attrs.frozen
class GradientCheckReport:
    """Outcome of check_gradients: `ok`, the worst element (input, index, analytic, numeric) and per-input errors."""

    ok: bool
    worst_input: str | None
    worst_index: tuple | None
    analytic: float
    numeric: float
    max_abs_error: float
    max_rel_error: float
    per_input: dict
    checked: int

    def __str__(self) -> str:
        if self.worst_input is None:
            return "gradient check: nothing to check"
        status = "ok" if self.ok else "MISMATCH"
        lines = [
            f"gradient check {status}: {self.checked} element(s); worst at {self.worst_input}{list(self.worst_index)}: "
            f"adjoint {self.analytic:.9g} vs finite differences {self.numeric:.9g} "
            f"(abs error {self.max_abs_error:.3g}, rel error {self.max_rel_error:.3g})"
        ]
        for name, (abs_err, rel_err) in self.per_input.items():
            lines.append(f"  {name}: max abs error {abs_err:.3g}, max rel error {rel_err:.3g}")
        return "\n".join(lines)


# -- the checker -----------------------------------------------------------------------------------


def _leaves(value, sinfo, prefix: str, out: list) -> None:
    """(path name, array) for every float tensor of a (possibly nested tuple) input."""
    if isinstance(sinfo, TupleStructInfo):
        for i, (v, s) in enumerate(zip(value, sinfo.fields)):
            _leaves(v, s, f"{prefix}[{i}]", out)
    elif isinstance(sinfo, TensorStructInfo) and is_float_dtype(sinfo.dtype):
        out.append((prefix, value))


def _as64(value, sinfo):
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_as64(v, s) for v, s in zip(value, sinfo.fields))
    arr = np.array(value)  # a private copy: the checker perturbs it in place
    if isinstance(sinfo, TensorStructInfo) and is_float_dtype(sinfo.dtype):
        return arr.astype(np.float64)
    return arr


def _target(result, index):
    if index is None:
        return result
    if isinstance(result, tuple):
        return result[index]
    return result


def _dot(value, cot, sinfo) -> float:
    """<value, cot> over the float tensors of a (possibly nested tuple) value; other fields take no part."""
    if isinstance(sinfo, TupleStructInfo):
        return sum(_dot(v, c, s) for v, c, s in zip(value, cot, sinfo.fields))
    if not (isinstance(sinfo, TensorStructInfo) and is_float_dtype(sinfo.dtype)):
        return 0.0
    return float(np.sum(np.asarray(value, dtype=np.float64) * cot))


def _random_like(value, sinfo, rng):
    """A cotangent for `value`: random for float tensors; for other fields, which take no cotangent, a
    value the seed parameter accepts (zeros for integer tensors such as topk's indices, else the value)."""
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random_like(v, s, rng) for v, s in zip(value, sinfo.fields))
    if not isinstance(sinfo, TensorStructInfo):
        return value
    arr = np.asarray(value)
    if arr.dtype.kind not in "fc":
        return np.zeros(arr.shape, arr.dtype)
    return rng.standard_normal(arr.shape).astype(np.float64)


def check_gradients(
    mod: IRModule,
    func_name: str,
    inputs,
    *,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-7,
    require_grads=None,
    target_index=0,
    seed: int | None = None,
    cotangent=None,
    max_coords: int | None = None,
    **gradient_options,
) -> GradientCheckReport:
    """Compare the adjoint built by the Gradient pass with central differences, all in float64.

    The module is first converted to float64. For a scalar target the adjoint is checked as is;
    for any other target a cotangent (given, or drawn with `seed`) is passed as a vjp seed and
    the finite differences are taken of <target, cotangent>. Every element of every float input
    whose gradient is required is perturbed by +-eps (at most `max_coords` random elements per
    input when given). An element passes when |adjoint - numeric| <= atol + rtol * |numeric|.
    """
    from retrograd.passes.gradient import Gradient
    from retrograd.runtime import build

    rng = np.random.default_rng(seed)
    mod64 = to_float64(mod)
    func = mod64[func_name]
    if len(inputs) != len(func.params):
        raise ValueError(f"'{func_name}' takes {len(func.params)} inputs, {len(inputs)} given")
    args = [_as64(v, p.struct_info) for v, p in zip(inputs, func.params)]
    required = _required_params(func, require_grads)
    ex = build(mod64)
    forward = ex[func_name]
    target = _target(forward(*args), target_index)
    target_sinfo = func.ret_struct_info
    if target_index is not None and isinstance(target_sinfo, TupleStructInfo):
        target_sinfo = target_sinfo.fields[target_index]
    scalar = not isinstance(target, tuple) and np.ndim(target) == 0
    if cotangent is None:
        cot = 1.0 if scalar else _random_like(target, target_sinfo, rng)
    else:
        cot = _as64(cotangent, _sinfo_of(target))
    if scalar and cotangent is None:
        adj_mod = Gradient(func_name, required, target_index, **gradient_options)(mod64)
        _, grads = build(adj_mod)[f"{func_name}_adjoint"](*args)
    else:
        adj_mod = Gradient(func_name, required, target_index, seeds="param", **gradient_options)(mod64)
        _, grads = build(adj_mod)[f"{func_name}_adjoint"](*args, cot)

    per_input: dict = {}
    worst = (-1.0, None, None, 0.0, 0.0)
    max_abs = max_rel = 0.0
    checked = 0

    def objective() -> float:
        return _dot(_target(forward(*args), target_index), cot, target_sinfo)

    grads = tuple(grads)
    if len(grads) != len(required):
        raise ValueError(f"the adjoint returned {len(grads)} gradient(s) for {len(required)} required input(s)")
    for grad, k in zip(grads, required):
        param = func.params[k]
        leaves: list = []
        _leaves(args[k], param.struct_info, param.name_hint, leaves)
        grad_leaves: list = []
        _leaves(grad, param.struct_info, param.name_hint, grad_leaves)
        if len(grad_leaves) != len(leaves):
            raise ValueError(f"the gradient of '{param.name_hint}' has {len(grad_leaves)} float field(s), the input {len(leaves)}")
        for (name, arr), (_, g) in zip(leaves, grad_leaves):
            g = np.asarray(g, dtype=np.float64)
            if g.shape != arr.shape:
                raise ValueError(f"the gradient of {name} has shape {g.shape}, the input {arr.shape}")
            flat = arr.reshape(-1)  # a view: perturbing it perturbs the input
            coords = np.arange(flat.size)
            if max_coords is not None and flat.size > max_coords:
                coords = np.sort(rng.choice(flat.size, max_coords, replace=False))
            abs_err = rel_err = 0.0
            for j in coords:
                orig = flat[j]
                flat[j] = orig + eps
                plus = objective()
                flat[j] = orig - eps
                minus = objective()
                flat[j] = orig
                numeric = (plus - minus) / (2 * eps)
                analytic = float(g.reshape(-1)[j])
                err = abs(analytic - numeric)
                rel = err / max(abs(numeric), 1e-300)
                ratio = err / (atol + rtol * abs(numeric))
                if math.isnan(ratio):
                    ratio = math.inf
                abs_err, rel_err = max(abs_err, err), max(rel_err, rel)
                if ratio > worst[0]:
                    worst = (ratio, name, np.unravel_index(j, arr.shape), analytic, numeric)
                checked += 1
            per_input[name] = (abs_err, rel_err)
            max_abs, max_rel = max(max_abs, abs_err), max(max_rel, rel_err)
    ratio, name, index, analytic, numeric = worst
    return GradientCheckReport(
        # Nothing checked is not a pass: a check that compared no element cannot vouch for anything.
        ok=checked > 0 and bool(ratio <= 1.0),
        worst_input=name,
        worst_index=None if index is None else tuple(int(i) for i in index),
        analytic=analytic,
        numeric=numeric,
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        per_input=per_input,
        checked=checked,
    )


def _sinfo_of(value):
    from retrograd.ir.struct_info import sinfo_of_value

    return sinfo_of_value(value)


def _required_params(func: Function, require_grads) -> list:
    """Indices of the parameters whose gradients the adjoint returns (the checker perturbs parameters)."""
    params = list(func.params)
    if require_grads is None:
        from retrograd.passes.gradient import all_float

        return [k for k, p in enumerate(params) if all_float(p.struct_info)]
    items = list(require_grads) if isinstance(require_grads, list | tuple) else [require_grads]
    out = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            out.append(item)
        elif isinstance(item, str):
            names = [p.name_hint for p in params]
            if item not in names:
                raise ValueError(f"check_gradients perturbs parameters; '{item}' is not a parameter")
            out.append(names.index(item))
        elif isinstance(item, Var):
            names = [p.name_hint for p in params]
            if item.name_hint not in names:
                raise ValueError(f"check_gradients perturbs parameters; '{item.name_hint}' is not a parameter")
            out.append(names.index(item.name_hint))
        else:
            raise ValueError(f"unsupported require_grads entry {item!r}")
    return out
