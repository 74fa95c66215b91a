"""Every op's `cost` property (ops/cost.py) evaluates on its OpCases; heavy ops' FLOPs against counts
written here (NumPy's einsum_path for contractions, the textbook conv and attention formulas), and
heavy ops cost more than a pointwise op with the same result."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from ops.all_cases import ALL_CASES

from retrograd.ir.expr import Call, Var
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops.cost import KINDS
from retrograd.ops.registry import all_ops, get

HEAVY = ("relax.matmul", "relax.einsum", "relax.nn.attention", "relax.nn.attention_bias", "relax.grad.attention_backward")


def is_heavy(op: str) -> bool:
    return op in HEAVY or re.fullmatch(r"relax\.nn\.conv\dd(_transpose)?", op) is not None


def the_call(case) -> tuple[Call, object]:
    """The op's call in the case's built function, normalized (struct info on every argument)."""
    for b in case.build()["main"].body.blocks[0].bindings:
        if isinstance(b.value, Call) and b.value.op.name == case.op:
            return b.value, b.var.struct_info
    raise AssertionError(f"{case.id}: no call of {case.op}")


def static_shape(sinfo) -> tuple | None:
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and all(isinstance(d, int) for d in sinfo.shape):
        return tuple(sinfo.shape)
    return None


def pointwise_cost(out) -> float:
    """What R.sin (or one per field) costs on values shaped like `out`."""
    fields = out.fields if isinstance(out, TupleStructInfo) else (out,)
    sin = get("relax.sin")
    total = 0.0
    for f in fields:
        call = Call(sin, (Var("x", TensorStructInfo(f.shape, "float32")),), {}, f)
        total += sin.cost(call, f)
    return total


def test_every_registered_op_has_a_known_cost_kind():
    for op in all_ops():
        assert op.cost.kind in KINDS, op.name


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_cost_evaluates_on_every_case(case):
    call, out = the_call(case)
    cost = case.opdef.cost(call, out)
    assert isinstance(cost, float) and math.isfinite(cost) and cost >= 0


def numpy_naive_flops(subscripts: str, shapes) -> float:
    text = np.einsum_path(subscripts, *[np.empty(s) for s in shapes], optimize=False)[1]
    return float(re.search(r"Naive FLOP count:\s*([0-9.e+]+)", text).group(1))


def conv_reference(call, out_shape) -> float:
    """2 multiply-adds per (output element, in-channel of its group, kernel tap); transposed: per
    (input element, out-channel of its group, kernel tap)."""
    w = dict(zip(call.attrs["kernel_layout"], call.args[1].struct_info.shape))
    taps = math.prod(v for k, v in w.items() if k not in "OI")
    # The weight's I (conv) or O (transposed) axis already counts the channels of one group.
    if call.op.name.endswith("_transpose"):
        return 2.0 * math.prod(call.args[0].struct_info.shape) * w["O"] * taps
    return 2.0 * math.prod(out_shape) * w["I"] * taps


def attention_reference(q, k, v) -> float:
    """Q·Kᵀ and P·V as einsums (NumPy's count) plus five per score for the softmax."""
    b, s, n, h = q
    t = k[1]
    kv = (b, t, n, h)  # grouped heads: each query head reads its group's key, same work per score
    qk = numpy_naive_flops("bsnh,btnh->bnst", [q, kv])
    pv = numpy_naive_flops("bnst,btnv->bsnv", [(b, n, s, t), (b, t, n, v[3])])
    return qk + pv + 5.0 * b * n * s * t


HEAVY_CASES = [c for c in ALL_CASES if is_heavy(c.op) and c.is_static]


@pytest.mark.parametrize("case", HEAVY_CASES, ids=lambda c: c.id)
def test_heavy_op_flops_against_reference(case):
    call, out = the_call(case)
    cost = case.opdef.cost(call, out)
    shapes = [static_shape(a.struct_info) for a in call.args]
    if case.op == "relax.matmul":
        a, b = shapes[0], shapes[1]
        sub = ("k" if len(a) == 1 else "...ik") + "," + ("k" if len(b) == 1 else "...kj")
        expected = numpy_naive_flops(sub, [a, b])
    elif case.op == "relax.einsum":
        fields = [static_shape(f) for f in call.args[0].struct_info.fields]
        expected = numpy_naive_flops(call.attrs["subscripts"], fields)
    elif "attention" in case.op:
        q, k, v = shapes[1:4] if case.op.startswith("relax.grad") else shapes[:3]
        expected = attention_reference(q, k, v) * (2 if case.op.startswith("relax.grad") else 1)
    else:
        expected = conv_reference(call, static_shape(out))
    assert cost == pytest.approx(expected), case.id


@pytest.mark.parametrize("case", HEAVY_CASES, ids=lambda c: c.id)
def test_heavy_ops_cost_more_than_pointwise_ops_of_the_same_size(case):
    call, out = the_call(case)
    if case.op == "relax.einsum":
        terms = call.attrs["subscripts"].split("->")[0].split(",")
        if len(terms) < 2:
            pytest.skip("a one-operand einsum (trace, transpose, diagonal) is a pointwise-sized op")
    assert case.opdef.cost.kind in ("matmul", "conv")
    assert case.opdef.cost(call, out) > pointwise_cost(out)
