"""Gradient pass: tuple parameters and results, nested tuples, TupleGetItem, tuple updates."""

from __future__ import annotations

import numpy as np
from passes.helpers import check_gradient

import retrograd
from retrograd.ir.struct_info import PrimStructInfo
from retrograd.ir.well_formed import well_formed
from retrograd.passes.gradient import Gradient


def test_tuple_in_out():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tuple(R.Tensor((3, 3), "float32"), R.Tensor((3,), "float32")), y: R.Tensor((3, 3), "float32")) -> R.Tuple(R.Tensor((), "float32"), R.Tuple(R.Tensor((3, 3), "float32"), R.Tensor((3, 3), "float32"))):
        with R.dataflow():
            a = x[0]
            b = x[1]
            c = R.add(a, b)
            t = (c, y)
            d = t[0]
            gv = R.sum(d)
            R.output(gv, t)
        return (gv, t)
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")), y: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))), R.Tuple(R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")), R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3, 3), dtype="float32") = x[0]
            b: R.Tensor((3,), dtype="float32") = x[1]
            c: R.Tensor((3, 3), dtype="float32") = R.add(a, b)
            t: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32")) = (c, y)
            gv: R.Tensor((), dtype="float32") = R.sum(c, axis=None, keepdims=False)
            d_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            b_adjoint: R.Tensor((3,), dtype="float32") = R.collapse_sum_to(d_adjoint, R.shape([3]))
            x_adjoint_out: R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3,), dtype="float32")) = (d_adjoint, b_adjoint)
            y_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.zeros(R.shape([3, 3]), dtype="float32")
            R.output(t, gv, x_adjoint_out, y_adjoint_out)
        return ((gv, t), (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(before, expected)


def test_nested_tuple():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32"), z: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            t = ((x, y), z)
            u = t[0]
            v = u[1]
            w = t[1]
            s = R.multiply(v, w)
            gv = R.sum(s)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32"), z: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            s: R.Tensor((3,), dtype="float32") = R.multiply(y, z)
            gv: R.Tensor((), dtype="float32") = R.sum(s, axis=None, keepdims=False)
            s_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            y_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(s_adjoint, z)
            z_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(s_adjoint, y)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.zeros(R.shape([3]), dtype="float32")
            R.output(gv, y_adjoint_out, z_adjoint_out, x_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out, z_adjoint_out))
"""
    check_gradient(before, expected)


def test_tuple_update():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            t = (x, y)
            a = t[0]
            b = t[1]
            c = t[0]
            t2 = (c, b)
            d = t2[0]
            e = R.add(R.multiply(a, b), d)
            gv = R.sum(e)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            lv: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
            e: R.Tensor((3,), dtype="float32") = R.add(lv, x)
            gv: R.Tensor((), dtype="float32") = R.sum(e, axis=None, keepdims=False)
            e_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(e_adjoint, y)
            y_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(e_adjoint, x)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(e_adjoint, a_adjoint)
            R.output(gv, y_adjoint_out, x_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(before, expected)


# main(x) makes t = (x * x, R.prim_value(8)) and returns `ret`.
WITH_PRIM = """
@R.function
def main(x: R.Tensor((3,), "float32")):
    with R.dataflow():
        y = R.multiply(x, x)
        p = R.prim_value(8)
        t = (y, p)
        R.output(t)
    return {ret}
"""


def assert_prints_back(mod):
    assert well_formed(mod) == []
    assert retrograd.structural_equal(retrograd.parse(mod.script()), mod)


def test_a_param_seed_for_a_tuple_with_a_known_prim_prints_and_parses_back():
    # R.Prim takes a dtype only: the seed parameter cannot carry the prim's inferred value (8), or the
    # printed adjoint would read back as a different function.
    mod = retrograd.parse(WITH_PRIM.format(ret="(t, x)"))
    for after in (Gradient("main", seeds="param")(mod), Gradient("main_adjoint", seeds="param")(Gradient("main", seeds="param")(mod))):
        assert_prints_back(after)
    seed = Gradient("main", seeds="param")(mod)["main_adjoint"].params[-1]
    assert seed.struct_info.fields[1] == PrimStructInfo("int64")
    x, cot = np.array([1.0, -2.0, 0.5], "float32"), np.array([0.5, 3.0, -1.0], "float32")
    _, (grad,) = retrograd.build(Gradient("main", seeds="param")(mod))["main_adjoint"](x, (cot, 8))
    np.testing.assert_allclose(grad, 2 * x * cot, rtol=1e-6)


def test_a_call_to_a_function_returning_shapes_and_prims_is_differentiated():
    # The callee's vjp takes a seed for every returned field; shapes, prims and strings take no gradient,
    # so the caller passes placeholders (the value itself, zero prims) instead of failing to build zeros.
    mod = retrograd.parse("""
@I.ir_module
class Module:
    @R.function
    def g(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            y = R.multiply(x, x)
            s = R.shape([3])
            p = R.prim_value(8)
            q = R.prim_value(T.float32(1.5))
            b = R.prim_value(True)
            w = R.str("hello")
            R.output(y, s, p, q, b, w)
        return (y, s, p, q, b, w)

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        cls = Module
        with R.dataflow():
            t = cls.g(x)
            a = t[0]
            r = R.sum(a)
            R.output(r)
        return r
""")
    out = Gradient("main")(mod)
    assert_prints_back(out)
    x = np.array([1.0, -2.0, 3.0], "float32")
    value, (grad,) = retrograd.build(out)["main_adjoint"](x)
    np.testing.assert_allclose(value, np.sum(x * x), rtol=1e-6)
    np.testing.assert_allclose(grad, 2 * x, rtol=1e-6)


def test_the_second_order_through_a_tuple_with_a_prim_used_twice():
    # main_adjoint returns (t, t): Gradient of it accumulated the prim field's two seeds with R.add,
    # which prims do not take (a TypeInferenceError from inside the pass).
    mod = retrograd.parse(WITH_PRIM.format(ret="(t, t)"))
    first = Gradient("main", seeds="param")(mod)
    second = Gradient("main_adjoint", seeds="param")(first)
    assert_prints_back(second)
    # main_adjoint(x, s) returns ((t, t), (2 x s0,)) with t = (x * x, 8); seeded with ((a, 8), (b, 8)) on
    # its first field, the gradient of x is 2 x (a + b) (s, holding a prim, takes none by default).
    x, s0 = np.array([1.0, -2.0, 0.5], "float32"), np.array([0.5, 3.0, -1.0], "float32")
    a, b = np.array([2.0, 1.0, -1.0], "float32"), np.array([0.5, -4.0, 3.0], "float32")
    _, (gx,) = retrograd.build(second)["main_adjoint_adjoint"](x, (s0, 8), ((a, 8), (b, 8)))
    np.testing.assert_allclose(gx, 2 * x * (a + b), rtol=1e-6)
