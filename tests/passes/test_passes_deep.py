"""Deep functions: the Gradient pass and the clean-up passes iterate over bindings, never recurse per binding."""

from __future__ import annotations

import pytest

import sys

import numpy as np

import retrograd
from retrograd.ir import DataflowBlock, DataflowVar, Function, IRModule, SeqExpr, Var, VarBinding
from retrograd.ir.expr import Call, const
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import get
from retrograd.passes import get_pass
from retrograd.passes.gradient import Gradient


def chain(n: int, dead_every: int = 0) -> IRModule:
    """x -> sin -> sin -> ... -> sum, built directly (typed nodes, no parsing); optional dead bindings."""
    s = TensorStructInfo((2,), "float32")
    x = Var("x", s)
    sin, mul = get("relax.sin"), get("relax.multiply")
    bindings, prev = [], x
    for i in range(n):
        v = DataflowVar(f"v{i}", s)
        bindings.append(VarBinding(v, Call(sin, (prev,), {}, s)))
        if dead_every and i % dead_every == 0:
            bindings.append(VarBinding(DataflowVar(f"dead{i}", s), Call(mul, (v, const(2.0)), {}, s)))
            bindings.append(VarBinding(DataflowVar(f"alias{i}", s), v))
        prev = v
    gv = Var("gv", TensorStructInfo((), "float32"))
    bindings.append(VarBinding(gv, Call(get("relax.sum"), (prev,), {"axis": None, "keepdims": False}, gv.struct_info)))
    body = SeqExpr((DataflowBlock(bindings),), gv, gv.struct_info)
    return IRModule({"main": Function((x,), body, gv.struct_info)})


@pytest.mark.slow
def test_gradient_of_a_chain_ten_times_the_recursion_limit():
    n = 10 * sys.getrecursionlimit()
    out = Gradient("main")(chain(n))
    x = np.array([0.3, -1.2], dtype="float32")
    _, (g,) = retrograd.build(out)["main_adjoint"](x)
    # d/dx sin^n(x) = prod of cos along the chain, in float64 as a reference
    v, expected = x.astype(np.float64), np.ones(2)
    for _ in range(n):
        expected *= np.cos(v)
        v = np.sin(v)
    np.testing.assert_allclose(g, expected, rtol=1e-3)


@pytest.mark.slow
def test_cleanup_passes_on_100000_bindings():
    mod = chain(100_000, dead_every=2)
    total = 100_000 + 2 * 50_000 + 1
    assert sum(len(b.bindings) for b in mod["main"].body.blocks) == total
    for name in ("fold-constant", "simplify", "dce"):
        mod = get_pass(name)(mod)
    assert sum(len(b.bindings) for b in mod["main"].body.blocks) == 100_001
