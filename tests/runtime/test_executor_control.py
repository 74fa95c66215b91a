"""Executor: If (both branches, conditions as tensors or prim values), calls between functions, recursion."""

import numpy as np
import pytest
from runtime_helpers import T, Tup, emit_if, function, module, signature

import retrograd
from retrograd.errors import ExecutionError
from retrograd.ir import Call, GlobalVar, PrimValue, Tuple, const
from retrograd.ops.api import R


def _select_module():
    """main(c, x, y) = (exp(x) + y, x) if c else (x * y, y)."""

    def body(bb, c, x, y):
        e = bb.emit(R.exp(x), "e")  # used only by the true branch
        return emit_if(
            bb,
            c,
            lambda b: Tuple((b.emit(R.add(e, y), "t"), x)),
            lambda b: Tuple((b.emit(R.multiply(x, y), "f"), y)),
        )

    params = [("c", T((), "bool")), ("x", T((3,))), ("y", T((3,)))]
    return module(main=function(params, body))


@pytest.mark.parametrize("cond", [True, False])
def test_if_takes_each_branch(cond):
    ex = retrograd.build(_select_module())
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
    # |x| summed by elementwise ops only: branch on a 0-d comparison.
    def body(bb, a, b):
        g = bb.emit(R.greater(a, b), "g")
        return emit_if(bb, g, lambda br: br.emit(R.subtract(a, b), "d1"), lambda br: br.emit(R.subtract(b, a), "d2"))

    ex = retrograd.build(module(main=function([("a", T(())), ("b", T(()))], body)))
    assert float(ex["main"](3.0, 1.0)) == 2.0
    assert float(ex["main"](1.0, 3.5)) == 2.5


def test_if_on_prim_value_condition():
    def body(bb, x):
        return emit_if(bb, PrimValue(0, "int64"), lambda b: b.emit(R.exp(x), "e"), lambda b: b.emit(R.negative(x), "n"))

    ex = retrograd.build(module(main=function([("x", T((2,)))], body)))
    np.testing.assert_array_equal(ex["main"](np.array([1.0, 2.0], "float32")), [-1.0, -2.0])


def test_if_condition_must_be_scalar():
    def body(bb, c, x):
        return emit_if(bb, c, lambda b: x, lambda b: b.emit(R.negative(x), "n"))

    ex = retrograd.build(module(main=function([("c", T((2,), "bool")), ("x", T((2,)))], body)))
    with pytest.raises(ExecutionError, match="condition of the If binding 'r' must be a scalar"):
        ex["main"](np.array([True, False]), np.zeros(2, "float32"))


def test_nested_ifs():
    # sign-like: x > 0 -> 1, x < 0 -> -1, else 0 (as float tensors)
    def body(bb, x):
        zero = const(0.0)
        pos = bb.emit(R.greater(x, zero), "pos")

        def negative_or_zero(b):
            neg = b.emit(R.less(x, zero), "neg")
            return emit_if(b, neg, lambda c: const(-1.0), lambda c: const(0.0), name="inner")

        return emit_if(bb, pos, lambda b: const(1.0), negative_or_zero)

    ex = retrograd.build(module(main=function([("x", T(()))], body)))
    assert [float(ex["main"](v)) for v in (2.0, -3.0, 0.0)] == [1.0, -1.0, 0.0]


def test_call_between_functions():
    callee_params = [("a", T((4,))), ("b", T((4,)))]
    callee = function(callee_params, lambda bb, a, b: Tuple((bb.emit(R.multiply(a, b), "m"), bb.emit(R.add(a, b), "s"))))
    sigs = {"helper": signature(callee_params, Tup(T((4,)), T((4,))))}

    def body(bb, x, y):
        t = bb.emit(Call(GlobalVar("helper"), (x, y)), "t")
        m = bb.emit(R.exp(bb.emit(__import__("retrograd").ir.TupleGetItem(t, 0), "m0")), "em")
        again = bb.emit(Call(GlobalVar("helper"), (m, x)), "again")
        return again

    mod = module(main=function([("x", T((4,))), ("y", T((4,)))], body, sigs), helper=callee)
    ex = retrograd.build(mod)
    x = np.linspace(-1, 1, 4).astype("float32")
    y = np.linspace(0, 2, 4).astype("float32")
    prod, total = ex["main"](x, y)
    em = np.exp(x * y)
    np.testing.assert_allclose(prod, em * x, rtol=1e-6)
    np.testing.assert_allclose(total, em + x, rtol=1e-6)
    # The helper is callable directly too.
    np.testing.assert_allclose(ex["helper"](x, y)[1], x + y)


def _power_module():
    """pow2(x, n) = x * 2**n by recursion: if n > 0 then pow2(x * 2, n - 1) else x."""
    params = [("x", T((3,))), ("n", T((), "int64"))]
    sigs = {"pow2": signature(params, T((3,)))}

    def body(bb, x, n):
        positive = bb.emit(R.greater(n, const(0, "int64")), "positive")

        def recurse(b):
            doubled = b.emit(R.multiply(x, const(2.0)), "doubled")
            m = b.emit(R.subtract(n, const(1, "int64")), "m")
            return b.emit(Call(GlobalVar("pow2"), (doubled, m)), "rec")

        return emit_if(bb, positive, recurse, lambda b: x)

    return module(pow2=function(params, body, sigs))


@pytest.mark.parametrize("n", [0, 1, 5, 30])
def test_recursion_with_if(n):
    ex = retrograd.build(_power_module())
    x = np.array([1.0, -0.5, 3.0], "float32")
    np.testing.assert_allclose(ex["pow2"](x, np.int64(n)), x * 2.0**n, rtol=1e-6)
    # Each level holds its own copy until it returns: x plus n doubled copies plus a few scalars.
    assert ex.stats.peak_live_bytes >= x.nbytes * (n + 1)


def test_runaway_recursion_is_a_clear_error():
    ex = retrograd.build(_power_module())
    with pytest.raises(ExecutionError, match="recursion limit"):
        ex["pow2"](np.zeros(3, "float32"), 100_000)


def test_kernel_failure_inside_callee_names_the_call_site():
    callee_params = [("a", T((2,), "int64"))]
    callee = function(callee_params, lambda bb, a: bb.emit(R.divide(a, const(0, "int64")), "q"))
    sigs = {"div0": signature(callee_params, T((2,), "int64"))}
    mod = module(
        div0=callee,
        main=function(callee_params, lambda bb, a: bb.emit(Call(GlobalVar("div0"), (a,)), "called"), sigs),
    )
    with np.errstate(all="raise"):  # whether the kernel checks itself or NumPy raises, it is reported
        with pytest.raises(ExecutionError) as info:
            retrograd.build(mod)["main"](np.array([1, 2]))
    text = str(info.value)
    assert "div0: binding 'q' = R.divide(a, const) failed: " in text
    assert "inputs: a: array of shape (2,) int64; const: array of shape () int64" in text
    assert "in the call of 'div0' from main, binding 'called'" in text
