"""Lowering and graphs of big functions and deep If nests: linear time, no recursion limit, clear limits."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import UnsupportedError
from retrograd.ir import BlockBuilder, Function, If, IRModule, Var
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R
from codegen.helpers import assert_same, load_source


def nested_ifs(depth: int) -> IRModule:
    """main(c, x): `depth` Ifs, each one's then-branch the next; the innermost computes exp(x)."""
    c = Var("c", TensorStructInfo((), "bool"))
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()

    def branch(make):
        bb.begin_scope()
        return bb.end_scope(make())

    inner = branch(lambda: bb.emit(R.exp(x), "leaf"))
    for _ in range(depth):
        node = If(c, inner, branch(lambda: bb.emit(R.negative(x), "n")))
        inner = branch(lambda: bb.emit(node, "r"))
    return IRModule({"main": Function((c, x), inner)})


def test_moderate_nest_lowers_and_agrees(tmp_path):
    mod = nested_ifs(40)
    module = load_source(retrograd.lower_to_python(mod), tmp_path, "nest40")
    x = np.array([0.5, -1.0, 2.0], "float32")
    for c in (True, False):
        got = module.main(np.array(c), x)
        assert_same(got, retrograd.build(mod)["main"](np.array(c), x))
        assert np.array_equal(got, np.exp(x) if c else -x)


def test_deep_nest_is_a_clear_error_for_lower_and_fine_for_dot():
    mod = nested_ifs(3000)
    with pytest.raises(UnsupportedError, match="nest more than 90 deep"):
        retrograd.lower_to_python(mod)
    text = retrograd.to_dot(mod)
    assert text.count("= If") == 3000 and text.count("leaf = R.exp") == 1


@pytest.mark.slow
def test_hundred_thousand_bindings(tmp_path):
    x = Var("x", TensorStructInfo((4,), "float32"))
    bb = BlockBuilder()
    bb.begin_scope()
    v = x
    for i in range(100_000):
        v = bb.emit(R.multiply(v, v) if i % 2 else R.tanh(v), "v")
    mod = IRModule({"main": Function((x,), bb.end_scope(v))})
    src = retrograd.lower_to_python(mod)
    assert src.count(" = tanh(") == 50_000 and src.count("\n        del ") == 100_000
    assert retrograd.to_dot(mod).count(" -> ") == 100_000 + 1 + 50_000  # multiply reads v twice
