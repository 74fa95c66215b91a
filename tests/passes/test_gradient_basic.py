"""Gradient pass, TVM-compatible core: Before/Expected scripts (and finite differences) for each construct."""

from __future__ import annotations

from passes.helpers import check_gradient


def test_simple():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv1 = R.add(x, y)
            gv = R.sum(lv1)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            gv: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out, x_adjoint_out))
"""
    check_gradient(before, expected)


def test_assignment():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv1 = x
            lv2 = lv1
            lv3 = R.multiply(lv2, lv1)
            gv = R.sum(lv3)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(x, x)
            gv: R.Tensor((), dtype="float32") = R.sum(lv3, axis=None, keepdims=False)
            lv3_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv3_adjoint, x)
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.add(lv2_adjoint, lv2_adjoint)
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    check_gradient(before, expected)


def test_multiple_uses():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv1 = R.add(x, y)
            lv2 = R.add(lv1, x)
            lv3 = R.multiply(lv2, y)
            gv = R.sum(lv3)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.add(x, y)
            lv2: R.Tensor((3, 3), dtype="float32") = R.add(lv1, x)
            lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2, y)
            gv: R.Tensor((), dtype="float32") = R.sum(lv3, axis=None, keepdims=False)
            lv3_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv3_adjoint, y)
            y_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv3_adjoint, lv2)
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.add(lv2_adjoint, lv2_adjoint)
            y_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.add(y_adjoint, lv2_adjoint)
            R.output(gv, x_adjoint_out, y_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(before, expected)


def test_unused_param():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3, 3), "float32"), y: R.Tensor((3, 3), "float32"), z: R.Tuple(R.Tensor((2,), "float32"), R.Tensor((3, 3), "float32"))) -> R.Tensor((), "float32"):
        with R.dataflow():
            gv = R.sum(x)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32"), z: R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((3, 3), dtype="float32"))) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"), R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((3, 3), dtype="float32")))):
        with R.dataflow():
            gv: R.Tensor((), dtype="float32") = R.sum(x, axis=None, keepdims=False)
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            y_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.zeros(R.shape([3, 3]), dtype="float32")
            lv: R.Tensor((2,), dtype="float32") = R.zeros(R.shape([2]), dtype="float32")
            z_adjoint_out: R.Tuple(R.Tensor((2,), dtype="float32"), R.Tensor((3, 3), dtype="float32")) = (lv, y_adjoint_out)
            R.output(gv, x_adjoint_out, y_adjoint_out, z_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out, z_adjoint_out))
"""
    check_gradient(before, expected)


def test_broadcast():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), b: R.Tensor((3,), "float32"), s: R.Tensor((), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.add(x, b)
            c = R.multiply(a, s)
            gv = R.sum(c)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((2, 3), dtype="float32"), b: R.Tensor((3,), dtype="float32"), s: R.Tensor((), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((2, 3), dtype="float32") = R.add(x, b)
            c: R.Tensor((2, 3), dtype="float32") = R.multiply(a, s)
            gv: R.Tensor((), dtype="float32") = R.sum(c, axis=None, keepdims=False)
            c_adjoint: R.Tensor((2, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([2, 3]))
            x_adjoint_out: R.Tensor((2, 3), dtype="float32") = R.multiply(c_adjoint, s)
            lv: R.Tensor((2, 3), dtype="float32") = R.multiply(c_adjoint, a)
            s_adjoint_out: R.Tensor((), dtype="float32") = R.collapse_sum_to(lv, R.shape([]))
            b_adjoint_out: R.Tensor((3,), dtype="float32") = R.collapse_sum_to(x_adjoint_out, R.shape([3]))
            R.output(gv, x_adjoint_out, s_adjoint_out, b_adjoint_out)
        return (gv, (x_adjoint_out, b_adjoint_out, s_adjoint_out))
"""
    check_gradient(before, expected)


def test_constants():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            c = R.const([1.0, 2.0, 3.0], "float32")
            k = R.subtract(R.const(3.0, "float32"), R.const(1.0, "float32"))
            a = R.multiply(x, c)
            b = R.multiply(a, k)
            gv = R.sum(b)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.multiply(x, R.const([1.0, 2.0, 3.0], "float32"))
            b: R.Tensor((3,), dtype="float32") = R.multiply(a, R.const(2.0, "float32"))
            gv: R.Tensor((), dtype="float32") = R.sum(b, axis=None, keepdims=False)
            b_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint, R.const(2.0, "float32"))
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, R.const([1.0, 2.0, 3.0], "float32"))
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    check_gradient(before, expected)


def test_shape_expr():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3, 4), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            s = R.shape([4, 3])
            a = R.reshape(x, s)
            b = R.reshape(a, R.shape([12]))
            gv = R.sum(b)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3, 4), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 4), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((4, 3), dtype="float32") = R.reshape(x, R.shape([4, 3]))
            b: R.Tensor((12,), dtype="float32") = R.reshape(a, R.shape([12]))
            gv: R.Tensor((), dtype="float32") = R.sum(b, axis=None, keepdims=False)
            b_adjoint: R.Tensor((12,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([12]))
            a_adjoint: R.Tensor((4, 3), dtype="float32") = R.reshape(b_adjoint, R.shape([4, 3]))
            x_adjoint_out: R.Tensor((3, 4), dtype="float32") = R.reshape(a_adjoint, R.shape([3, 4]))
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    check_gradient(before, expected)


def test_int_indices():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(w: R.Tensor((5, 3), "float32"), idx: R.Tensor((4,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            e = R.take(w, idx, axis=0)
            gv = R.sum(e)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(w: R.Tensor((5, 3), dtype="float32"), idx: R.Tensor((4,), dtype="int64")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((5, 3), dtype="float32"))):
        with R.dataflow():
            e: R.Tensor((4, 3), dtype="float32") = R.take(w, idx, axis=0, mode="fast")
            gv: R.Tensor((), dtype="float32") = R.sum(e, axis=None, keepdims=False)
            e_adjoint: R.Tensor((4, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([4, 3]))
            w_adjoint_out: R.Tensor((5, 3), dtype="float32") = R.grad.take_backward(e_adjoint, w, idx, axis=0, mode="fast")
            R.output(gv, w_adjoint_out)
        return (gv, (w_adjoint_out,))
"""
    check_gradient(before, expected)


def test_no_grad():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.multiply(x, y)
            b = R.grad.no_grad(a)
            c = R.multiply(b, a)
            gv = R.sum(c)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
            b: R.Tensor((3,), dtype="float32") = R.grad.no_grad(a)
            c: R.Tensor((3,), dtype="float32") = R.multiply(b, a)
            gv: R.Tensor((), dtype="float32") = R.sum(c, axis=None, keepdims=False)
            c_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(c_adjoint, b)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, y)
            y_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, x)
            R.output(gv, x_adjoint_out, y_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(before, expected, numeric=False)


def test_target_index():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((), "float32"), R.Tensor((), "float32")):
        with R.dataflow():
            a = R.multiply(x, y)
            b = R.sum(a)
            c = R.sum(y)
            R.output(a, b, c)
        return (a, b, c)
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((), dtype="float32"), R.Tensor((), dtype="float32")), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
            b: R.Tensor((), dtype="float32") = R.sum(a, axis=None, keepdims=False)
            c: R.Tensor((), dtype="float32") = R.sum(y, axis=None, keepdims=False)
            y_adjoint_out: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.zeros(R.shape([3]), dtype="float32")
            R.output(a, b, c, y_adjoint_out, x_adjoint_out)
        return ((a, b, c), (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(before, expected, target_index=2)


def test_intermediate_require_grads():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.multiply(x, y)
            b = R.exp(a)
            c = R.multiply(b, x)
            gv = R.sum(c)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
            b: R.Tensor((3,), dtype="float32") = R.exp(a)
            c: R.Tensor((3,), dtype="float32") = R.multiply(b, x)
            gv: R.Tensor((), dtype="float32") = R.sum(c, axis=None, keepdims=False)
            c_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            b_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(c_adjoint, x)
            x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(c_adjoint, b)
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint_out, b)
            lv: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, y)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(x_adjoint, lv)
            R.output(gv, b_adjoint_out, x_adjoint_out)
        return (gv, (b_adjoint_out, x_adjoint_out))
"""
    check_gradient(before, expected, require_grads=['b', 'x'], numeric=False)
