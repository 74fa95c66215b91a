"""Higher-order test modules: `<f>_dot(params..., w...) = sum_i <grad_i of f, w_i>` built on Gradient's adjoint."""

from __future__ import annotations

import numpy as np

from retrograd.ir import BlockBuilder, Function, IRModule, Var
from retrograd.ir.expr import Call, GlobalVar, TupleGetItem
from retrograd.ir.struct_info import TupleStructInfo, is_float_dtype
from retrograd.ops.api import R
from retrograd.passes.gradient import Gradient


def dot_of_adjoint(mod: IRModule, name: str, required: list[int], **options) -> IRModule:
    """`mod` plus `<name>_adjoint` (Gradient with `options`) and `<name>_dot`, which takes the adjoint's
    parameters and one weight per gradient and returns sum_i sum(grad_i * w_i): differentiating it again
    is the next order (a Hessian-vector product when `name` returns a scalar)."""
    first = Gradient(name, required, **options)(mod)
    adj = first[f"{name}_adjoint"]
    params = [Var(p.name_hint, p.struct_info) for p in adj.params]
    weights = [Var(f"w{i}", s) for i, s in enumerate(adj.ret_struct_info.fields[1].fields)]
    bb = BlockBuilder(first)
    bb.begin_scope()
    # An impure adjoint (of collectives) is called outside dataflow blocks, from an impure function.
    bb.begin_block(dataflow=adj.is_pure)
    res = bb.emit(Call(GlobalVar(f"{name}_adjoint", adj.struct_info), tuple(params)), "res")
    grads = bb.emit(TupleGetItem(res, 1), "grads")
    total = None
    for i, w in enumerate(weights):
        term = bb.emit(R.sum(R.multiply(bb.emit(TupleGetItem(grads, i), "g"), w)), "t")
        total = term if total is None else bb.emit(R.add(total, term), "acc")
    out = bb.emit_output(total, "dot") if adj.is_pure else total
    bb.end_block()
    body = bb.end_scope(out)
    dot = Function(params + weights, body, body.struct_info, adj.is_pure, attrs={"global_symbol": f"{name}_dot"})
    return first.with_function(f"{name}_dot", dot)


def random_value(sinfo, rng):
    """Standard normal floats shaped like `sinfo` (zeros for integer fields: they take no cotangent)."""
    if isinstance(sinfo, TupleStructInfo):
        return tuple(random_value(f, rng) for f in sinfo.fields)
    if not is_float_dtype(sinfo.dtype):
        return np.zeros(tuple(sinfo.shape), sinfo.dtype)
    return rng.standard_normal(tuple(sinfo.shape))
