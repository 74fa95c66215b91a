"""cse, simplify and fold-constant on If nests deeper than Python's default stack allows per level."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import retrograd
from retrograd.ir import BlockBuilder, Function, IRModule, Var, well_formed
from retrograd.ir.expr import If
from retrograd.ir.functor import if_depth
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R
from retrograd.passes import parse_pipeline


def nest(depth: int) -> IRModule:
    """main(x, c) = (x + x) + (x + x) under `depth` nested Ifs on c (else x); built, not parsed."""
    x = Var("x", TensorStructInfo((2,), "float32"))
    c = Var("c", TensorStructInfo((), "bool"))

    def level(d, bb):
        bb.begin_scope()
        if d == 0:
            a = bb.emit(R.add(x, x))
            b = bb.emit(R.add(x, x))  # a common subexpression for cse
            return bb.end_scope(bb.emit(R.add(a, b)))
        inner = level(d - 1, BlockBuilder())
        other = BlockBuilder()
        other.begin_scope()
        v = bb.emit(If(c, inner, other.end_scope(x)))
        return bb.end_scope(v)

    body = level(depth, BlockBuilder())
    return IRModule({"main": Function([x, c], body, body.struct_info)})


def run_on_300_nested_ifs(transform) -> tuple[IRModule, IRModule]:
    """(input, transform(input)) for nest(300), the transform run under Python's default recursion limit."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4000))  # only to build the input recursively above
    try:
        mod = nest(300)
    finally:
        sys.setrecursionlimit(old)
    sys.setrecursionlimit(1000)
    try:
        out = transform(mod)
    finally:
        sys.setrecursionlimit(old)
    assert sys.getrecursionlimit() == old
    assert well_formed(out) == []
    return mod, out


@pytest.mark.parametrize("name", ["cse", "simplify", "fold-constant", "dce"])
def test_passes_survive_300_nested_ifs(name):
    mod, out = run_on_300_nested_ifs(parse_pipeline(name))
    assert if_depth(mod["main"]) == 300
    x = np.array([1.5, -2.0], "float32")
    for cond in (True, False):
        got = retrograd.build(out)["main"](x, np.array(cond))
        np.testing.assert_array_equal(got, 4 * x if cond else x)


def test_gradient_survives_300_nested_ifs():
    # Copying the forward and sweeping it backwards recurse once per nested If: the pass makes stack
    # room for the deepest nest, as the mutator-based passes do.
    from retrograd.passes import Gradient

    _, out = run_on_300_nested_ifs(Gradient("main", seeds="ones"))
    x = np.array([1.5, -2.0], "float32")
    for cond, slope in ((True, 4.0), (False, 1.0)):  # main is 4x under c, else x
        value, (grad,) = retrograd.build(out)["main_adjoint"](x, np.array(cond))
        np.testing.assert_array_equal(value, slope * x)
        np.testing.assert_array_equal(grad, [slope, slope])
