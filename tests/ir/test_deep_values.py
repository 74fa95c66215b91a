"""Structural equality and hashing of deeply nested attribute values; printing zero-size constants."""

from __future__ import annotations

import sys

import attrs
import numpy as np
import pytest

import retrograd
from retrograd.ir import BlockBuilder, Function, IRModule, Var
from retrograd.ir.expr import Constant
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.structural_hash import value_equal, value_key
from retrograd.ops.api import R


def nested(depth, leaf=1):
    v = leaf
    for _ in range(depth):
        v = (v,)
    return v


def test_value_equal_and_key_on_2000_deep_tuples():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        assert value_equal(nested(2000), nested(2000))
        assert not value_equal(nested(2000), nested(2000, 2))
        assert not value_equal(nested(2000), nested(1999))
        assert hash(value_key(nested(2000))) == hash(value_key(list(nested(2000))))
        assert value_key(nested(600)) == value_key(list(nested(600)))
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize("a, b, same", [([1, (2, 3)], (1, [2, 3]), True), ({"a": [True]}, {"a": [1]}, False),
                                        ([float("nan")], [float("nan")], True), ({"a": 1}, {"b": 1}, False)])
def test_value_equal_agrees_with_value_key(a, b, same):
    assert value_equal(a, b) is same
    assert (value_key(a) == value_key(b)) is same


def test_structural_equal_on_a_330_deep_attribute():
    mod = retrograd.parse('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n')
    f = mod["main"]
    a = IRModule({"main": attrs.evolve(f, attrs={"k": nested(330)})})
    b = IRModule({"main": attrs.evolve(f, attrs={"k": nested(330)})})
    c = IRModule({"main": attrs.evolve(f, attrs={"k": nested(330, 2)})})
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        assert retrograd.structural_equal(a, b)
        assert not retrograd.structural_equal(a, c)
    finally:
        sys.setrecursionlimit(old)


@pytest.mark.parametrize("shape", [(0, 1), (3, 0, 2), (2, 0, 0), (1, 0), (0,), (2, 3, 0)])
def test_zero_size_constants_print_with_their_shape(shape):
    x = Var("x", TensorStructInfo(shape, "float32"))
    bb = BlockBuilder()
    bb.begin_scope()
    v = bb.emit(R.add(x, Constant(np.zeros(shape, "float32"))))
    body = bb.end_scope(v)
    mod = IRModule({"main": Function([x], body, body.struct_info)})
    again = retrograd.parse(mod.script())
    assert again["main"].ret_struct_info.shape == shape
    assert retrograd.build(again)["main"](np.zeros(shape, "float32")).shape == shape
