"""Gradient pass beyond TVM: If, function calls, vjp seeds, several targets, several blocks (Before/Expected)."""

from __future__ import annotations

from passes.helpers import check_gradient


def test_if():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((), "float32"):
        a = R.multiply(x, y)
        if c:
            r = R.exp(a)
        else:
            r = R.multiply(a, x)
        s = R.sum(r)
        return s
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        a: R.Tensor((3,), dtype="float32") = R.multiply(x, y)
        if c:
            r_then: R.Tensor((3,), dtype="float32") = R.exp(a)
            r: R.Tensor((3,), dtype="float32") = r_then
        else:
            r_else: R.Tensor((3,), dtype="float32") = R.multiply(a, x)
            r: R.Tensor((3,), dtype="float32") = r_else
        s: R.Tensor((), dtype="float32") = R.sum(r, axis=None, keepdims=False)
        r_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
        if c:
            r_1: R.Tensor((3,), dtype="float32") = R.exp(a)
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(r_adjoint, r_1)
            lv_1: R.Tensor((3,), dtype="float32") = R.zeros(R.shape([3]), dtype="float32")
            lv: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (a_adjoint, lv_1)
        else:
            a_adjoint_1: R.Tensor((3,), dtype="float32") = R.multiply(r_adjoint, x)
            x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(r_adjoint, a)
            lv: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (a_adjoint_1, x_adjoint)
        lv_2: R.Tensor((3,), dtype="float32") = lv[0]
        lv_3: R.Tensor((3,), dtype="float32") = lv[1]
        lv_4: R.Tensor((3,), dtype="float32") = R.multiply(lv_2, y)
        x_adjoint_1: R.Tensor((3,), dtype="float32") = R.add(lv_3, lv_4)
        y_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_2, x)
        return (s, (x_adjoint_1, y_adjoint))
"""
    check_gradient(before, expected)


def test_function_call():
    before = """
@I.ir_module
class Module:

    @R.function(private=True)
    def square(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            y = R.multiply(x, x)
            R.output(y)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        cls = Module
        with R.dataflow():
            a = R.add(x, y)
            b = cls.square(a)
            gv = R.sum(b)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function(private=True)
    def square(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        with R.dataflow():
            y: R.Tensor((3,), dtype="float32") = R.multiply(x, x)
            R.output(y)
        return y

    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        cls = Module
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.add(x, y)
            b: R.Tensor((3,), dtype="float32") = cls.square(a)
            gv: R.Tensor((), dtype="float32") = R.sum(b, axis=None, keepdims=False)
            b_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            x_adjoint_out: R.Tensor((3,), dtype="float32") = cls.square_vjp(a, b_adjoint)
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out, x_adjoint_out))

    @R.function(private=True)
    def square_vjp(x: R.Tensor((3,), dtype="float32"), y_adjoint: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        with R.dataflow():
            x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(y_adjoint, x)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(x_adjoint, x_adjoint)
            R.output(x_adjoint_out)
        return x_adjoint_out
"""
    check_gradient(before, expected)


def test_vjp_seed():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 4), "float32")) -> R.Tensor((2, 4), "float32"):
        with R.dataflow():
            y = R.matmul(x, w)
            gv = R.tanh(y)
            R.output(gv)
        return gv
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((2, 3), dtype="float32"), w: R.Tensor((3, 4), dtype="float32"), gv_adjoint: R.Tensor((2, 4), dtype="float32")) -> R.Tuple(R.Tensor((2, 4), dtype="float32"), R.Tuple(R.Tensor((2, 3), dtype="float32"), R.Tensor((3, 4), dtype="float32"))):
        with R.dataflow():
            y: R.Tensor((2, 4), dtype="float32") = R.matmul(x, w, out_dtype=None)
            gv: R.Tensor((2, 4), dtype="float32") = R.tanh(y)
            lv: R.Tensor((2, 4), dtype="float32") = R.multiply(gv, gv)
            lv_1: R.Tensor((2, 4), dtype="float32") = R.subtract(R.const(1.0, "float32"), lv)
            y_adjoint: R.Tensor((2, 4), dtype="float32") = R.multiply(gv_adjoint, lv_1)
            lv_2: R.Tensor((4, 3), dtype="float32") = R.permute_dims(w, axes=[1, 0])
            x_adjoint_out: R.Tensor((2, 3), dtype="float32") = R.matmul(y_adjoint, lv_2, out_dtype=None)
            lv_3: R.Tensor((3, 2), dtype="float32") = R.permute_dims(x, axes=[1, 0])
            w_adjoint_out: R.Tensor((3, 4), dtype="float32") = R.matmul(lv_3, y_adjoint, out_dtype=None)
            R.output(gv, x_adjoint_out, w_adjoint_out)
        return (gv, (x_adjoint_out, w_adjoint_out))
"""
    check_gradient(before, expected, seeds='param', numeric=False)


def test_several_targets():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((), "float32"), R.Tensor((3,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.sum(a)
            c = R.sin(x)
            R.output(b, c)
        return (b, c)
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), c_adjoint: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tuple(R.Tensor((), dtype="float32"), R.Tensor((3,), dtype="float32")), R.Tuple(R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.exp(x)
            b: R.Tensor((), dtype="float32") = R.sum(a, axis=None, keepdims=False)
            c: R.Tensor((3,), dtype="float32") = R.sin(x)
            lv: R.Tensor((3,), dtype="float32") = R.cos(x)
            x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(c_adjoint, lv)
            a_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            lv_1: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, a)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(x_adjoint, lv_1)
            R.output(b, c, x_adjoint_out)
        return ((b, c), (x_adjoint_out,))
"""
    check_gradient(before, expected, target_index=[0, 1], seeds=['ones', 'param'], numeric=False)


def test_several_targets_dict():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((), "float32"), R.Tensor((3,), "float32"), R.Tensor((3,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.sum(a)
            c = R.sin(x)
            R.output(a, b, c)
        return (b, c, a)
"""
    expected = """
@I.ir_module
class Module:
    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), a_adjoint: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tuple(R.Tensor((), dtype="float32"), R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")), R.Tuple(R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.exp(x)
            b: R.Tensor((), dtype="float32") = R.sum(a, axis=None, keepdims=False)
            c: R.Tensor((3,), dtype="float32") = R.sin(x)
            lv: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            a_adjoint_1: R.Tensor((3,), dtype="float32") = R.add(a_adjoint, lv)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint_1, a)
            R.output(a, b, c, x_adjoint_out)
        return ((b, c, a), (x_adjoint_out,))
"""
    check_gradient(before, expected, seeds={0: 'ones', 2: 'param'}, numeric=False)


def test_blocks_outside_dataflow():
    before = """
@I.ir_module
class Module:

    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.multiply(x, y)
            b = R.exp(a)
            R.output(b)
        c = R.add(b, x)
        with R.dataflow():
            d = R.multiply(c, b)
            gv = R.sum(d)
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
            R.output(b)
        c: R.Tensor((3,), dtype="float32") = R.add(b, x)
        with R.dataflow():
            d: R.Tensor((3,), dtype="float32") = R.multiply(c, b)
            gv: R.Tensor((), dtype="float32") = R.sum(d, axis=None, keepdims=False)
            d_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            c_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(d_adjoint, b)
            b_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(d_adjoint, c)
            b_adjoint_1: R.Tensor((3,), dtype="float32") = R.add(b_adjoint, c_adjoint)
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint_1, b)
            lv: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, y)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(c_adjoint, lv)
            y_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, x)
            R.output(gv, x_adjoint_out, y_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(before, expected)
