"""Executor: If (both branches, conditions as tensors or prim values), calls between functions, recursion."""

import numpy as np
import pytest

import retrograd
from retrograd.errors import ExecutionError


def build(text):
    return retrograd.build(retrograd.parse(text, "control.py"))


SELECT = '''
@R.function
def main(c: R.Tensor((), "bool"), x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")):
    e = R.exp(x)
    if c:
        t = R.add(e, y)
        r = (t, x)
    else:
        f = R.multiply(x, y)
        r = (f, y)
    return r
'''


@pytest.mark.parametrize("cond", [True, False])
def test_if_takes_each_branch(cond):
    ex = build(SELECT)
    x = np.array([0.5, -1.0, 2.0], "float32")
    y = np.array([1.0, 2.0, 3.0], "float32")
    first, second = ex["main"](np.array(cond), x, y)
    if cond:
        np.testing.assert_allclose(first, np.exp(x) + y, rtol=1e-6)
        np.testing.assert_array_equal(second, x)
    else:
        np.testing.assert_allclose(first, x * y)
        np.testing.assert_array_equal(second, y)


def test_if_condition_computed_from_data():
    ex = build('''
@R.function
def main(a: R.Tensor((), "float32"), b: R.Tensor((), "float32")):
    g = R.greater(a, b)
    if g:
        r = R.subtract(a, b)
    else:
        r = R.subtract(b, a)
    return r
''')
    assert float(ex["main"](3.0, 1.0)) == 2.0
    assert float(ex["main"](1.0, 3.5)) == 2.5


def test_if_on_int_tensor_and_prim_value_conditions():
    # The parser insists on bool conditions; the IR (and the executor) also take ints and prim values.
    from runtime.helpers import T, emit_if, function, module

    from retrograd.ir import PrimValue
    from retrograd.ops.api import R

    def body(bb, c, x):
        return emit_if(bb, c, lambda b: b.emit(R.exp(x), "e"), lambda b: b.emit(R.negative(x), "n"))

    ex = retrograd.build(module(main=function([("c", T((), "int64")), ("x", T((2,)))], body)))
    x = np.array([1.0, 2.0], "float32")
    np.testing.assert_array_equal(ex["main"](0, x), -x)
    np.testing.assert_allclose(ex["main"](np.int64(-3), x), np.exp(x), rtol=1e-6)

    def body2(bb, x):
        return emit_if(bb, PrimValue(0, "int64"), lambda b: b.emit(R.exp(x), "e"), lambda b: b.emit(R.negative(x), "n"))

    ex = retrograd.build(module(main=function([("x", T((2,)))], body2)))
    np.testing.assert_array_equal(ex["main"](x), -x)


def test_if_condition_must_be_scalar():
    from runtime.helpers import T, emit_if, function, module

    from retrograd.ops.api import R

    def body(bb, c, x):
        return emit_if(bb, c, lambda b: x, lambda b: b.emit(R.negative(x), "n"))

    ex = retrograd.build(module(main=function([("c", T((2,), "bool")), ("x", T((2,)))], body)))
    with pytest.raises(ExecutionError, match="condition of the If binding 'r' must be a scalar"):
        ex["main"](np.array([True, False]), np.zeros(2, "float32"))


def test_nested_ifs():
    ex = build('''
@R.function
def main(x: R.Tensor((), "float32")):
    pos = R.greater(x, R.const(0.0, "float32"))
    if pos:
        r = R.const(1.0, "float32")
    else:
        neg = R.less(x, R.const(0.0, "float32"))
        if neg:
            inner = R.const(-1.0, "float32")
        else:
            inner = R.const(0.0, "float32")
        r = inner
    return r
''')
    assert [float(ex["main"](v)) for v in (2.0, -3.0, 0.0)] == [1.0, -1.0, 0.0]


CALLS = '''
@I.ir_module
class Module:
    @R.function
    def helper(a: R.Tensor((4,), "float32"), b: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        m = R.multiply(a, b)
        s = R.add(a, b)
        return (m, s)

    @R.function
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")):
        cls = Module
        t = cls.helper(x, y)
        m0 = t[0]
        em = R.exp(m0)
        again = cls.helper(em, x)
        return again
'''


def test_call_between_functions():
    ex = build(CALLS)
    x = np.linspace(-1, 1, 4).astype("float32")
    y = np.linspace(0, 2, 4).astype("float32")
    prod, total = ex["main"](x, y)
    em = np.exp(x * y)
    np.testing.assert_allclose(prod, em * x, rtol=1e-6)
    np.testing.assert_allclose(total, em + x, rtol=1e-6)
    np.testing.assert_allclose(ex["helper"](x, y)[1], x + y)  # callable directly too


POWER = '''
@I.ir_module
class Module:
    @R.function
    def pow2(x: R.Tensor((3,), "float32"), n: R.Tensor((), "int64")) -> R.Tensor((3,), "float32"):
        cls = Module
        positive = R.greater(n, R.const(0, "int64"))
        if positive:
            doubled = R.multiply(x, R.const(2.0, "float32"))
            m = R.subtract(n, R.const(1, "int64"))
            r = cls.pow2(doubled, m)
        else:
            r = x
        return r
'''


@pytest.mark.parametrize("n", [0, 1, 5, 30])
def test_recursion_with_if(n):
    ex = build(POWER)
    x = np.array([1.0, -0.5, 3.0], "float32")
    np.testing.assert_allclose(ex["pow2"](x, np.int64(n)), x * 2.0**n, rtol=1e-6)
    # Every level keeps its `doubled` until the recursive call returns: n + 1 copies of x at the deepest point.
    assert ex.stats.peak_live_bytes >= x.nbytes * (n + 1)


def test_runaway_recursion_is_a_clear_error():
    ex = build(POWER)
    with pytest.raises(ExecutionError, match="recursion limit"):
        ex["pow2"](np.zeros(3, "float32"), 100_000)


def test_kernel_failure_inside_callee_names_the_call_site():
    ex = build('''
@I.ir_module
class Module:
    @R.function
    def rows(w: R.Tensor((5, 2), "float32"), i: R.Tensor((2,), "int64")) -> R.Tensor((2, 2), "float32"):
        r = R.take(w, i, axis=0)
        return r

    @R.function
    def main(w: R.Tensor((5, 2), "float32"), i: R.Tensor((2,), "int64")):
        cls = Module
        called = cls.rows(w, i)
        return called
''')
    w = np.arange(10, dtype="float32").reshape(5, 2)
    np.testing.assert_array_equal(ex["main"](w, np.array([4, 0])), w[[4, 0]])
    with pytest.raises(ExecutionError) as info:
        ex["main"](w, np.array([1, 7]))
    text = str(info.value)
    assert text.startswith("control.py:6:9: execution error: rows: binding 'r' = R.take(w, i, axis=0, mode=\"fast\") failed: ")
    assert "7" in text
    assert "note: inputs: w: array of shape (5, 2) float32; i: array of shape (2,) int64" in text
    assert "note: in the call of 'rows' from main, binding 'called' at control.py:12:9" in text
