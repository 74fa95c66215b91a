"""Gradient pass values where the checker alone does not apply: no_grad, intermediate variables, vjp seeds,
several targets, If on both branches, recursion, and the checker catching a wrong rule."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from passes.helpers import random_inputs, redefine_op
from retrograd.ops.registry import get as get_op
from retrograd.passes.gradient import Gradient
from retrograd.testing import check_gradients

HEAD = "@I.ir_module\nclass Module:\n"


def _run(text: str, *inputs, **options):
    mod = retrograd.parse(HEAD + text)
    out = Gradient("main", **options)(mod)
    return retrograd.build(out)["main_adjoint"](*inputs)


def test_no_grad_treats_its_value_as_a_constant():
    text = '''
    @R.function
    def main(x: R.Tensor((4,), "float64"), y: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            a = R.multiply(x, y)
            b = R.grad.no_grad(a)
            gv = R.sum(R.multiply(b, a))
            R.output(gv)
        return gv
'''
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    loss, (gx, gy) = _run(text, x, y)
    a = x * y
    np.testing.assert_allclose(loss, np.sum(a * a))
    # d/dx sum(stop(a) * a) = stop(a) * y: half the gradient without the stop.
    np.testing.assert_allclose(gx, a * y, rtol=1e-12)
    np.testing.assert_allclose(gy, a * x, rtol=1e-12)


def test_intermediate_variable_gradient_and_total_parameter_gradient():
    text = '''
    @R.function
    def main(x: R.Tensor((4,), "float64"), y: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            a = R.multiply(x, y)
            b = R.exp(a)
            c = R.multiply(b, x)
            gv = R.sum(c)
            R.output(gv)
        return gv
'''
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal(4), rng.standard_normal(4)
    _, (gb, gx) = _run(text, x, y, require_grads=["b", "x"])
    np.testing.assert_allclose(gb, x, rtol=1e-12)
    np.testing.assert_allclose(gx, np.exp(x * y) * (1 + x * y), rtol=1e-12)


def test_vjp_seed_parameter_gives_the_transposed_jacobian_product():
    text = '''
    @R.function
    def main(x: R.Tensor((2, 3), "float64"), w: R.Tensor((3, 4), "float64")) -> R.Tensor((2, 4), "float64"):
        with R.dataflow():
            y = R.matmul(x, w)
            gv = R.tanh(y)
            R.output(gv)
        return gv
'''
    rng = np.random.default_rng(2)
    x, w, v = rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    out, (gx, gw) = _run(text, x, w, v, seeds="param")
    t = np.tanh(x @ w)
    dy = v * (1 - t * t)
    np.testing.assert_allclose(out, t, rtol=1e-12)
    np.testing.assert_allclose(gx, dy @ w.T, rtol=1e-12)
    np.testing.assert_allclose(gw, x.T @ dy, rtol=1e-12)
    # The checker takes the same route (a random cotangent) for non-scalar targets.
    mod = retrograd.parse(HEAD + text)
    assert check_gradients(mod, "main", [x, w], seed=3).ok


def test_array_seed_and_ones_seed():
    text = '''
    @R.function
    def main(x: R.Tensor((3,), "float64")) -> R.Tensor((3,), "float64"):
        with R.dataflow():
            gv = R.sin(x)
            R.output(gv)
        return gv
'''
    x = np.array([0.1, -0.7, 2.0])
    seed = np.array([1.0, 2.0, -3.0])
    _, (g,) = _run(text, x, seeds=seed)
    np.testing.assert_allclose(g, np.cos(x) * seed, rtol=1e-12)
    _, (g,) = _run(text, x, seeds="ones")
    np.testing.assert_allclose(g, np.cos(x), rtol=1e-12)


def test_several_targets_list_and_dict_forms():
    text = '''
    @R.function
    def main(x: R.Tensor((3,), "float64")) -> R.Tuple(R.Tensor((), "float64"), R.Tensor((3,), "float64"), R.Tensor((3,), "float64")):
        with R.dataflow():
            a = R.exp(x)
            b = R.sum(a)
            c = R.sin(x)
            R.output(a, b, c)
        return (b, c, a)
'''
    rng = np.random.default_rng(4)
    x, v = rng.standard_normal(3), rng.standard_normal(3)
    # list form: d/dx [sum(exp x) + <sin x, v>]
    _, (g,) = _run(text, x, v, target_index=[0, 1], seeds=["ones", "param"])
    np.testing.assert_allclose(g, np.exp(x) + np.cos(x) * v, rtol=1e-12)
    # dict form: d/dx [sum(exp x) + <exp x, v>]
    _, (g,) = _run(text, x, v, seeds={0: "ones", 2: "param"})
    np.testing.assert_allclose(g, np.exp(x) * (1 + v), rtol=1e-12)
    # the whole (tuple) return value with ones: d/dx [sum(exp x) + sum(sin x) + sum(exp x)]
    _, (g,) = _run(text, x, target_index=None, seeds="ones")
    np.testing.assert_allclose(g, 2 * np.exp(x) + np.cos(x), rtol=1e-12)


def test_if_on_both_branches_and_nested_if():
    text = '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32"), c: R.Tensor((), "bool"), d: R.Tensor((), "bool")) -> R.Tensor((), "float32"):
        a = R.multiply(x, y)
        if c:
            if d:
                q = R.exp(a)
            else:
                q = R.multiply(R.sin(a), y)
            r = R.add(q, a)
        else:
            t = (a, x)
            u = t[1]
            r = R.multiply(u, u)
        s = R.sum(R.multiply(r, x))
        return s
'''
    mod = retrograd.parse(HEAD + text)
    for c in (True, False):
        for d in (True, False):
            inputs = random_inputs(mod, seed=5)[:2] + [np.array(c), np.array(d)]
            report = check_gradients(mod, "main", inputs)
            assert report.ok, f"c={c} d={d}: {report}"


def test_recursive_function_call():
    text = '''
    @R.function
    def power(x: R.Tensor((3,), "float64"), n: R.Tensor((), "int64")) -> R.Tensor((3,), "float64"):
        cls = Module
        stop = R.less_equal(n, R.const(0, "int64"))
        if stop:
            r = R.ones(R.shape([3]), "float64")
        else:
            m = R.subtract(n, R.const(1, "int64"))
            p = cls.power(x, m)
            r = R.multiply(p, x)
        return r

    @R.function
    def main(x: R.Tensor((3,), "float64")) -> R.Tensor((), "float64"):
        cls = Module
        y = cls.power(x, R.const(3, "int64"))
        s = R.sum(y)
        return s
'''
    mod = retrograd.parse(HEAD + text)
    x = np.array([0.5, -1.5, 2.0])
    out = Gradient("main")(mod)
    assert "power_vjp" in out
    _, (g,) = retrograd.build(out)["main_adjoint"](x)
    np.testing.assert_allclose(g, 3 * x**2, rtol=1e-12)


def test_checker_reports_a_wrong_rule(monkeypatch):
    text = '''
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            gv = R.sum(R.exp(x))
            R.output(gv)
        return gv
'''
    mod = retrograd.parse(HEAD + text)
    inputs = random_inputs(mod)
    assert check_gradients(mod, "main", inputs).ok
    # exp's derivative off by a factor (1 + 1e-3): the report must name the input and the element.
    redefine_op(monkeypatch, "relax.exp", grad=lambda call, out, g: [get_op("relax.multiply")(g, get_op("relax.multiply")(out, retrograd.ir.const(1.001, "float64")))])
    report = check_gradients(retrograd.parse(HEAD + text), "main", inputs)
    assert not report.ok
    assert report.worst_input == "x" and len(report.worst_index) == 2
    assert abs(report.analytic / report.numeric - 1.001) < 1e-6
    assert "MISMATCH" in str(report) and "x[" in str(report)


def test_checker_with_a_subset_of_coordinates():
    text = '''
    @R.function
    def main(x: R.Tensor((20, 30), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            gv = R.sum(R.tanh(x))
            R.output(gv)
        return gv
'''
    mod = retrograd.parse(HEAD + text)
    report = check_gradients(mod, "main", random_inputs(mod), max_coords=25, seed=0)
    assert report.ok and report.checked == 25


def test_checker_rejects_wrong_number_of_inputs():
    mod = retrograd.parse(HEAD + '''
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((), "float32"):
        gv = R.sum(x)
        return gv
''')
    with pytest.raises(ValueError, match="takes 1 inputs"):
        check_gradients(mod, "main", [])


def test_check_gradients_is_not_ok_when_it_checked_nothing():
    mod = retrograd.parse(HEAD + """
    @R.function
    def main(x: R.Tensor((3,), "float64")) -> R.Tensor((), "float64"):
        s = R.sum(x)
        return s
""")
    for options in ({"require_grads": []}, {"max_coords": 0}):
        report = check_gradients(mod, "main", [np.ones(3)], **options)
        assert report.checked == 0 and not report.ok, options
        assert "nothing to check" in str(report)


def test_gradient_of_the_adjoint_itself_is_a_hessian_vector_product():
    text = '''
    @R.function
    def main(x: R.Tensor((6, 5), "float64"), w1: R.Tensor((7, 5), "float64"), w2: R.Tensor((3, 7), "float64"), labels: R.Tensor((6,), "int64")) -> R.Tensor((), "float64"):
        with R.dataflow():
            h = R.tanh(R.matmul(x, R.permute_dims(w1)))
            logits = R.matmul(h, R.permute_dims(w2))
            loss = R.nn.nll_loss(R.nn.log_softmax(logits), labels)
            R.output(loss)
        return loss
'''
    mod = Gradient("main", require_grads=["w1", "w2"])(retrograd.parse(HEAD + text))
    # Target: the tuple of gradients (return field 1 of the adjoint); its seed v is a tuple parameter.
    mod = Gradient("main_adjoint", require_grads=["w1", "w2"], target_index=1, seeds="param")(mod)
    ex = retrograd.build(mod)
    rng = np.random.default_rng(0)
    x, w1, w2 = rng.standard_normal((6, 5)), rng.standard_normal((7, 5)), rng.standard_normal((3, 7))
    labels = np.array([0, 1, 2, 2, 1, 0])
    v = (rng.standard_normal((7, 5)), rng.standard_normal((3, 7)))
    _, hv = ex["main_adjoint_adjoint"](x, w1, w2, labels, v)
    grad, eps = ex["main_adjoint"], 1e-5
    plus = grad(x, w1 + eps * v[0], w2 + eps * v[1], labels)[1]
    minus = grad(x, w1 - eps * v[0], w2 - eps * v[1], labels)[1]
    for ours, p, m in zip(hv, plus, minus):
        np.testing.assert_allclose(ours, (p - m) / (2 * eps), rtol=1e-6, atol=1e-9)


def test_checker_handles_a_target_tuple_with_strings_shapes_prims_and_integers(monkeypatch):
    # Only the float tensors of the target take a cotangent and count in <target, cotangent>; the
    # other fields' seeds are values the adjoint's seed parameter accepts (it used to fail on them).
    text = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")):
        with R.dataflow():
            y = R.exp(x)
            k = R.astype(x, "int32")
            t = (y, R.str("a b"), R.shape([3]), R.prim_value(2), k)
            R.output(t)
        return (t, x)
'''
    inputs = [np.array([1.0, -2.0, 0.5], "float32")]
    report = check_gradients(retrograd.parse(HEAD + text), "main", inputs, seed=0)
    assert report.ok and report.checked == 3, str(report)
    redefine_op(monkeypatch, "relax.exp", grad=lambda call, out, g: [get_op("relax.multiply")(g, get_op("relax.multiply")(out, retrograd.ir.const(1.001, "float64")))])
    assert not check_gradients(retrograd.parse(HEAD + text), "main", inputs, seed=0).ok
