"""Executor: tensors, tuples (nested, in and out), constants, shapes, prim values, aliases, blocks."""

import numpy as np
import pytest
from runtime_helpers import T, Tup, function, module

import retrograd
from retrograd.ir import PrimValue, Tuple, TupleGetItem, const, shape_expr
from retrograd.ops.api import R

rng = np.random.default_rng(0)


def arr(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def test_chain_in_dataflow_block_matches_numpy():
    def body(bb, x, y):
        with bb.dataflow():
            a = bb.emit(R.add(x, y), "a")
            b = bb.emit(R.exp(a), "b")
            c = bb.emit(R.multiply(b, x), "c")
            out = bb.emit_output(R.subtract(c, y), "out")
        return out

    mod = module(main=function([("x", T((3, 4))), ("y", T((4,)))], body))
    x, y = arr(3, 4), arr(4)
    got = retrograd.build(mod)["main"](x, y)
    np.testing.assert_allclose(got, np.exp(x + y) * x - y, rtol=1e-6)
    assert got.dtype == np.float32


def test_nested_tuple_params_and_results():
    sig = [("p", Tup(T((2,)), Tup(T((2,)), T((3,))))), ("q", T((3,)))]

    def body(bb, p, q):
        a = bb.emit(TupleGetItem(p, 0), "a")
        inner = bb.emit(TupleGetItem(p, 1), "inner")
        b = bb.emit(TupleGetItem(inner, 0), "b")
        c = bb.emit(TupleGetItem(inner, 1), "c")
        s = bb.emit(R.add(a, b), "s")
        t = bb.emit(R.multiply(c, q), "t")
        return Tuple((s, Tuple((t, a))))

    ex = retrograd.build(module(main=function(sig, body)))
    a, b, c, q = arr(2), arr(2), arr(3), arr(3)
    out = ex["main"]((a, [b, c]), q)  # lists are accepted for tuples
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    np.testing.assert_allclose(out[0], a + b)
    np.testing.assert_allclose(out[1][0], c * q)
    np.testing.assert_allclose(out[1][1], a)


def test_tuple_bound_to_var_then_indexed_and_returned():
    def body(bb, x):
        e = bb.emit(R.exp(x), "e")
        t = bb.emit(Tuple((x, e)), "t")
        first = bb.emit(TupleGetItem(t, 1), "first")
        n = bb.emit(R.negative(first), "n")
        return Tuple((t, n))

    ex = retrograd.build(module(main=function([("x", T((5,)))], body)))
    x = arr(5)
    (tx, te), n = ex["main"](x)
    np.testing.assert_allclose(te, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(n, -np.exp(x), rtol=1e-6)
    assert tx is x  # a parameter returned as is


def test_constants_inline_and_bound():
    c_data = np.arange(6, dtype="float32").reshape(2, 3)

    def body(bb, x):
        c = bb.emit(const(c_data), "c")  # a constant bound to a variable
        a = bb.emit(R.add(x, c), "a")
        b = bb.emit(R.multiply(a, const(2.5)), "b")  # inline scalar constant
        return b

    ex = retrograd.build(module(main=function([("x", T((2, 3)))], body)))
    x = arr(2, 3)
    np.testing.assert_allclose(ex["main"](x), (x + c_data) * 2.5, rtol=1e-6)


def test_shape_and_prim_values_as_results():
    def body(bb, x):
        return Tuple((shape_expr([2, 3]), PrimValue(7, "int64"), x))

    ex = retrograd.build(module(main=function([("x", T((1,)))], body)))
    shape, prim, x = ex["main"](np.ones(1, "float32"))
    assert shape == (2, 3) and prim == 7 and x.shape == (1,)


def test_several_blocks_and_bindings_outside_dataflow():
    def body(bb, x):
        a = bb.emit(R.exp(x), "a")  # outside any dataflow block
        with bb.dataflow():
            b = bb.emit(R.add(a, x), "b")
            c = bb.emit_output(R.multiply(b, b), "c")
        d = bb.emit(R.subtract(c, a), "d")
        alias = bb.emit(d, "alias")  # an assignment
        with bb.dataflow():
            e = bb.emit_output(R.negative(alias), "e")
        return e

    ex = retrograd.build(module(main=function([("x", T((4,)))], body)))
    x = arr(4)
    a = np.exp(x)
    np.testing.assert_allclose(ex["main"](x), -((a + x) ** 2 - a), rtol=1e-5)


def test_scalar_results_are_zero_d_arrays():
    # NumPy ufuncs on 0-d arrays return NumPy scalars; the executor hands back arrays.
    def body(bb, x, y):
        return bb.emit(R.add(x, y), "s")

    ex = retrograd.build(module(main=function([("x", T(())), ("y", T(()))], body)))
    out = ex["main"](np.float32(1.5), 2.0)  # NumPy and Python scalars for 0-d params
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32
    assert float(out) == 3.5


def test_bool_and_int_results_keep_their_dtype():
    def body(bb, x, y):
        return Tuple((bb.emit(R.greater(x, y), "g"), bb.emit(R.add(x, y), "s")))

    ex = retrograd.build(module(main=function([("x", T((3,), "int64")), ("y", T((3,), "int64"))], body)))
    g, s = ex["main"](np.array([1, 5, 3]), np.array([2, 2, 3]))
    assert g.dtype == np.bool_ and g.tolist() == [False, True, False]
    assert s.dtype == np.int64 and s.tolist() == [3, 7, 6]


def test_inputs_are_not_mutated_and_results_fresh():
    def body(bb, x):
        return bb.emit(R.exp(bb.emit(R.negative(x), "n")), "e")

    ex = retrograd.build(module(main=function([("x", T((8,)))], body)))
    x = arr(8)
    keep = x.copy()
    r1 = ex["main"](x)
    r2 = ex["main"](x)
    np.testing.assert_array_equal(x, keep)
    assert r1 is not r2
    np.testing.assert_allclose(r1, np.exp(-keep), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 50])
def test_deep_chain_runs_without_recursion(n):
    # 100,000 bindings: lowering and running iterate over the binding sequence.
    length = 100_000 if n == 50 else 10

    def body(bb, x):
        v = x
        for _ in range(length):
            v = bb.emit(R.negative(v), "v")
        return v

    ex = retrograd.build(module(main=function([("x", T((n,)))], body)))
    x = arr(n)
    out = ex["main"](x)
    np.testing.assert_array_equal(out, x if length % 2 == 0 else -x)
    # Each intermediate dies at the next binding: at most the parameter and two values are live.
    assert ex.stats.peak_live_bytes == 3 * x.nbytes
