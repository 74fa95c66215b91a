"""Second-order gradients of every differentiable op: Gradient applied to the first-order adjoint.

For each op (its first static differentiable OpCase), the adjoint `main_adjoint(params, cot)` is built
(a vjp), then h(params, cot, w) = sum_i sum(grad_i * w_i) is differentiated again with Gradient (with
respect to the params and the cotangent) and checked against float64 central differences of h, which
the executor computes by running the first-order adjoint."""

from __future__ import annotations

import numpy as np
import pytest

from all_cases import ALL_CASES
from retrograd.errors import GradientError
from retrograd.ir import BlockBuilder, Function, IRModule, Var
from retrograd.ir.expr import Call, GlobalVar, TupleGetItem
from retrograd.ir.struct_info import TupleStructInfo, is_float_dtype
from retrograd.ops.api import R
from retrograd.passes.gradient import Gradient
from retrograd.passes.gradient.activity import all_float
from retrograd.testing import check_gradients, to_float64


def _first_cases() -> list:
    seen, out = set(), []
    for c in ALL_CASES:
        if (c.op in seen and not ALL) or not c.is_static or not c.differentiable_params():
            continue
        seen.add(c.op)
        out.append(c)
    return out


import os
ALL = os.environ.get("ALLSECOND")
SECOND_CASES = _first_cases()


def second_order_module(mod: IRModule, required: list[int]) -> IRModule:
    """`mod` (float64) plus main_adjoint (a vjp) and h(params, cot, w...) = sum_i sum(grad_i * w_i)."""
    first = Gradient("main", required, None, seeds="param")(mod)
    adj = first["main_adjoint"]
    params = [Var(p.name_hint, p.struct_info) for p in adj.params]
    grads_sinfo = adj.ret_struct_info.fields[1].fields
    weights = [Var(f"w{i}", s) for i, s in enumerate(grads_sinfo)]
    bb = BlockBuilder(first)
    bb.begin_scope()
    with bb.dataflow():
        res = bb.emit(Call(GlobalVar("main_adjoint", adj.struct_info), tuple(params)), "res")
        grads = bb.emit(TupleGetItem(res, 1), "grads")
        total = None
        for i, w in enumerate(weights):
            gi = bb.emit(TupleGetItem(grads, i), "g")
            term = bb.emit(R.sum(R.multiply(gi, w)), "t")
            total = term if total is None else bb.emit(R.add(total, term), "acc")
        out = bb.emit_output(total, "h")
    body = bb.end_scope(out)
    h = Function(params + weights, body, body.struct_info, attrs={"global_symbol": "h"})
    return IRModule({**{k: v for k, v in first.items()}, "h": h})


def _random(sinfo, rng):
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_random(f, rng) for f in sinfo.fields)
    if not is_float_dtype(sinfo.dtype):
        return np.zeros(tuple(sinfo.shape), sinfo.dtype)
    return rng.standard_normal(tuple(sinfo.shape))


@pytest.mark.parametrize("case", SECOND_CASES, ids=lambda c: c.id)
def test_second_order_matches_finite_differences(case):
    mod = to_float64(case.build())
    required = case.differentiable_params()
    try:
        mod2 = second_order_module(mod, required)
    except GradientError as err:
        pytest.fail(f"first order: {err}")
    rng = np.random.default_rng(3)
    inputs = [np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v for v in case.make_inputs(seed=1)]
    h = mod2["h"]
    n = len(inputs)
    extra = [_random(p.struct_info, rng) for p in h.params[n:]]
    # The params and the cotangent (when all float: topk's carries integer indices).
    wrt = required + ([n] if all_float(h.params[n].struct_info) else [])
    report = check_gradients(mod2, "h", inputs + extra, require_grads=wrt, rtol=1e-4, atol=1e-6, max_coords=8, seed=4)
    assert report.ok, f"{case.op} {case.name}:\n{report}"
