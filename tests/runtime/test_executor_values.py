"""Executor: tensors, tuples (nested, in and out), constants, shapes, prim values, aliases, blocks."""

import numpy as np
import pytest
from runtime.helpers import T, function, module

import retrograd
from retrograd.ops.api import R

rng = np.random.default_rng(0)


def arr(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def build(text):
    return retrograd.build(retrograd.parse(text, "test.py"))


def test_chain_in_dataflow_block_matches_numpy():
    ex = build('''
@R.function
def main(x: R.Tensor((3, 4), dtype="float32"), y: R.Tensor((4,), dtype="float32")):
    with R.dataflow():
        a = R.add(x, y)
        b = R.exp(a)
        c = R.multiply(b, x)
        out = R.subtract(c, y)
        R.output(out)
    return out
''')
    x, y = arr(3, 4), arr(4)
    got = ex["main"](x, y)
    np.testing.assert_allclose(got, np.exp(x + y) * x - y, rtol=1e-6)
    assert got.dtype == np.float32


def test_nested_expressions_and_python_operators():
    ex = build('''
@R.function
def main(x: R.Tensor((5,), dtype="float32"), y: R.Tensor((5,), dtype="float32")):
    z = R.add(R.exp(x), y) * x - -y / R.const(2.0, "float32")
    return z
''')
    x, y = arr(5), arr(5)
    np.testing.assert_allclose(ex["main"](x, y), (np.exp(x) + y) * x - (-y) / 2, rtol=1e-6)


def test_nested_tuple_params_and_results():
    ex = build('''
@R.function
def main(p: R.Tuple(R.Tensor((2,), "float32"), R.Tuple(R.Tensor((2,), "float32"), R.Tensor((3,), "float32"))),
         q: R.Tensor((3,), "float32")):
    a = p[0]
    inner = p[1]
    b = inner[0]
    c = inner[1]
    s = R.add(a, b)
    t = R.multiply(c, q)
    return (s, (t, a))
''')
    a, b, c, q = arr(2), arr(2), arr(3), arr(3)
    out = ex["main"]((a, [b, c]), q)  # lists are accepted for tuples
    assert isinstance(out, tuple) and isinstance(out[1], tuple)
    np.testing.assert_allclose(out[0], a + b)
    np.testing.assert_allclose(out[1][0], c * q)
    assert out[1][1] is a  # a parameter returned as is


def test_tuple_bound_to_var_then_indexed_and_returned():
    ex = build('''
@R.function
def main(x: R.Tensor((5,), "float32")):
    e = R.exp(x)
    t = (x, e)
    first = t[1]
    n = R.negative(first)
    return (t, n)
''')
    x = arr(5)
    (tx, te), n = ex["main"](x)
    np.testing.assert_allclose(te, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(n, -np.exp(x), rtol=1e-6)
    assert tx is x


def test_tuple_valued_op_and_indexing():
    ex = build('''
@R.function
def main(x: R.Tensor((6, 2), "float32")):
    parts = R.split(x, indices_or_sections=3, axis=0)
    a = parts[0]
    c = parts[2]
    s = R.add(a, c)
    return (s, parts)
''')
    x = arr(6, 2)
    s, parts = ex["main"](x)
    np.testing.assert_allclose(s, x[0:2] + x[4:6])
    assert isinstance(parts, tuple) and len(parts) == 3
    np.testing.assert_array_equal(parts[1], x[2:4])


def test_constants_inline_and_bound():
    ex = build('''
@R.function
def main(x: R.Tensor((2, 3), "float32")):
    c = R.const(2.5, "float32")
    a = R.add(x, c)
    b = R.multiply(a, R.const(-1.0, "float32"))
    return b
''')
    x = arr(2, 3)
    np.testing.assert_allclose(ex["main"](x), -(x + 2.5), rtol=1e-6)


def test_metadata_or_large_constant_from_builder():
    from retrograd.ir import const

    c_data = np.arange(6, dtype="float32").reshape(2, 3)
    mod = module(main=function([("x", T((2, 3)))], lambda bb, x: bb.emit(R.add(x, bb.emit(const(c_data), "c")), "a")))
    x = arr(2, 3)
    np.testing.assert_allclose(retrograd.build(mod)["main"](x), x + c_data)


def test_shape_and_prim_values_as_results():
    ex = build('''
@R.function
def main(x: R.Tensor((1,), "float32")):
    s = R.shape([2, 3])
    p = R.prim_value(7)
    return (s, p, x)
''')
    shape, prim, x = ex["main"](np.ones(1, "float32"))
    assert shape == (2, 3) and prim == 7 and x.shape == (1,)


def test_several_blocks_and_bindings_outside_dataflow():
    ex = build('''
@R.function
def main(x: R.Tensor((4,), "float32")):
    a = R.exp(x)
    with R.dataflow():
        b = R.add(a, x)
        c = R.multiply(b, b)
        R.output(c)
    d = R.subtract(c, a)
    alias = d
    with R.dataflow():
        e = R.negative(alias)
        R.output(e)
    return e
''')
    x = arr(4)
    a = np.exp(x)
    np.testing.assert_allclose(ex["main"](x), -((a + x) ** 2 - a), rtol=1e-5)


def test_scalar_results_are_zero_d_arrays():
    ex = build('''
@R.function
def main(x: R.Tensor((), "float32"), y: R.Tensor((), "float32")):
    s = R.add(x, y)
    return s
''')
    out = ex["main"](np.float32(1.5), 2.0)  # NumPy and Python scalars for 0-d params
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32
    assert float(out) == 3.5


def test_bool_and_int_results_keep_their_dtype():
    ex = build('''
@R.function
def main(x: R.Tensor((3,), "int64"), y: R.Tensor((3,), "int64")):
    g = R.greater(x, y)
    s = R.add(x, y)
    return (g, s)
''')
    g, s = ex["main"](np.array([1, 5, 3]), np.array([2, 2, 3]))
    assert g.dtype == np.bool_ and g.tolist() == [False, True, False]
    assert s.dtype == np.int64 and s.tolist() == [3, 7, 6]


def test_inputs_are_not_mutated_and_results_fresh():
    ex = build('''
@R.function
def main(x: R.Tensor((8,), "float32")):
    n = R.negative(x)
    e = R.exp(n)
    return e
''')
    x = arr(8)
    keep = x.copy()
    r1 = ex["main"](x)
    r2 = ex["main"](x)
    np.testing.assert_array_equal(x, keep)
    assert r1 is not r2
    np.testing.assert_allclose(r1, np.exp(-keep), rtol=1e-6)


def test_reduction_and_matmul_attributes_reach_the_kernels():
    ex = build('''
@R.function
def main(x: R.Tensor((2, 3, 4), "float32"), w: R.Tensor((4, 5), "float32")):
    s = R.sum(x, axis=[0, 2], keepdims=True)
    m = R.mean(x, axis=[-1])
    p = R.permute_dims(x, axes=[2, 0, 1])
    mm = R.matmul(x, w)
    return (s, m, p, mm)
''')
    x, w = arr(2, 3, 4), arr(4, 5)
    s, m, p, mm = ex["main"](x, w)
    np.testing.assert_allclose(s, x.sum(axis=(0, 2), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(m, x.mean(axis=-1), rtol=1e-5)
    np.testing.assert_array_equal(p, x.transpose(2, 0, 1))
    np.testing.assert_allclose(mm, x @ w, rtol=1e-5)


@pytest.mark.parametrize("length", [11, pytest.param(100_000, marks=pytest.mark.slow)])
def test_deep_chain_runs_without_recursion(length):
    # 100,000 bindings: lowering and running iterate over the binding sequence.
    def body(bb, x):
        v = x
        for _ in range(length):
            v = bb.emit(R.negative(v), "v")
        return v

    ex = retrograd.build(module(main=function([("x", T((50,)))], body)))
    x = arr(50)
    out = ex["main"](x)
    np.testing.assert_array_equal(out, x if length % 2 == 0 else -x)
    # Each intermediate dies at the next binding, and negative reuses its dying input's buffer:
    # the parameter and one buffer are live.
    assert ex.stats.peak_live_bytes == 2 * x.nbytes


def test_returned_constant_cannot_corrupt_the_module():
    ex = build('''
@R.function
def main(x: R.Tensor((), "float32")):
    c = R.const(3.0, "float32")
    return (c, x)
''')
    c, _ = ex["main"](1.0)
    with pytest.raises(ValueError):
        c[...] = 5.0
    assert float(ex["main"](1.0)[0]) == 3.0


def test_python_number_from_a_kernel_gets_the_binding_dtype():
    from retrograd.ops.registry import Arg, OpDef

    total = OpDef("relax.test_total", (Arg("x"),), (), infer=lambda c: T((), c.tensor(0).dtype), kernel=lambda x: float(x.sum()))
    ex = retrograd.build(module(main=function([("x", T((3,)))], lambda bb, x: bb.emit(total(x), "t"))))
    out = ex["main"](np.ones(3, "float32"))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and float(out) == 3.0
