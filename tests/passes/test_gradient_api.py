"""Gradient pass as an API: require_grads forms, re-running, the pass registry and pipelines, verification,
symbolic shapes, names of generated functions that never replace a user's."""

from __future__ import annotations

import numpy as np
import pytest
from passes.helpers import TVM_IMPORTS

import retrograd
from retrograd.errors import GradientError
from retrograd.ir.well_formed import well_formed
from retrograd.passes import PassContext, get_pass, parse_pipeline
from retrograd.passes.gradient import Gradient
from retrograd.runtime import build
from retrograd.testing import check_gradients

TEXT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            h = R.add(R.matmul(x, w), b)
            gv = R.sum(R.tanh(h))
            R.output(gv)
        return gv
'''


def _grad_names(mod, name="main_adjoint"):
    adjoint = mod[name]
    ret = adjoint.body.body
    return [v.name_hint for v in ret.fields[1].fields]


def test_require_grads_as_vars_names_and_indices_give_the_same_adjoint():
    mod = retrograd.parse(TEXT)
    params = mod["main"].params
    by_var = Gradient("main", require_grads=[params[2], params[1]])(mod)
    by_name = Gradient("main", require_grads=["b", "w"])(mod)
    by_index = Gradient("main", require_grads=[2, 1])(mod)
    retrograd.assert_structural_equal(by_var["main_adjoint"], by_name["main_adjoint"])
    retrograd.assert_structural_equal(by_var["main_adjoint"], by_index["main_adjoint"])
    assert _grad_names(by_var) == ["b_adjoint_out", "w_adjoint_out"]
    # a single Var (not a list), as TVM accepts
    single = Gradient("main", require_grads=params[1])(mod)
    assert _grad_names(single) == ["w_adjoint_out"]


def test_original_function_untouched_and_rerun_replaces_the_adjoint():
    mod = retrograd.parse(TEXT)
    once = Gradient("main")(mod)
    assert once["main"] is mod["main"]
    twice = Gradient("main", require_grads=["x"])(once)
    assert list(twice.keys()) == list(once.keys())
    assert _grad_names(twice) == ["x_adjoint_out"]
    assert well_formed(twice) == []


def test_registered_by_name_and_usable_in_a_pipeline():
    mod = retrograd.parse(TEXT)
    direct = Gradient("main", require_grads=["w"])(mod)
    named = get_pass("gradient", func_name="main", require_grads=["w"])(mod)
    piped = parse_pipeline("gradient(func=main, require_grads=[w], target_index=0), dce")(mod)
    retrograd.assert_structural_equal(direct["main_adjoint"], named["main_adjoint"])
    retrograd.assert_structural_equal(direct["main_adjoint"], piped["main_adjoint"])


def test_verified_pass_context_and_cleanup_off():
    mod = retrograd.parse(TEXT)
    with PassContext(verify=True):
        raw = Gradient("main", cleanup=False)(mod)
        clean = Gradient("main")(mod)

    def count(m):
        return sum(len(b.bindings) for b in m["main_adjoint"].body.blocks)

    assert count(clean) < count(raw)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype("float32") for s in [(2, 3), (3, 3), (3,)]]
    a = retrograd.build(raw)["main_adjoint"](*args)
    b = retrograd.build(clean)["main_adjoint"](*args)
    for x, y in zip(a[1], b[1]):
        np.testing.assert_allclose(x, y, rtol=1e-6)


def test_symbolic_shapes():
    text = '''
@I.ir_module
class Module:
    @R.function
    def layer(h: R.Tensor(("n", 3), "float32"), w: R.Tensor((3, 3), "float32")) -> R.Tensor(("n", 3), "float32"):
        with R.dataflow():
            y = R.tanh(R.matmul(h, w))
            R.output(y)
        return y

    @R.function
    def main(x: R.Tensor(("n", 3), "float32"), w: R.Tensor((3, 3), "float32"), b: R.Tensor((3,), "float32"), u: R.Tensor(("n", 2), "float32")) -> R.Tensor((), "float32"):
        cls = Module
        with R.dataflow():
            h = R.add(x, b)
            y = cls.layer(h, w)
            gv = R.sum(R.multiply(y, y))
            R.output(gv)
        return gv
'''
    mod = retrograd.parse(text)
    out = Gradient("main")(mod)
    assert well_formed(out) == []
    rng = np.random.default_rng(1)
    for n in (2, 5):
        args = [rng.standard_normal(s).astype("float32") for s in [(n, 3), (3, 3), (3,), (n, 2)]]
        report = check_gradients(mod, "main", args)
        assert report.ok, str(report)
        _, grads = retrograd.build(out)["main_adjoint"](*args)
        assert grads[3].shape == (n, 2) and not grads[3].any()


COLLIDING = TVM_IMPORTS + """
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((3,), "float64")) -> R.Tensor((3,), "float64"):
        y = R.multiply(x, x)
        return y

    @R.function
    def f_vjp(x: R.Tensor((3,), "float64"), g: R.Tensor((3,), "float64")) -> R.Tensor((3,), "float64"):
        y = R.add(x, g)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float64")) -> R.Tensor((), "float64"):
        cls = Module
        a = cls.f(x)
        b = cls.f_vjp(x, a)
        s = R.sum(b)
        return s
"""


def test_generated_vjp_never_replaces_a_user_function_of_that_name():
    mod = retrograd.parse(COLLIDING)
    x = np.array([1.0, 2.0, 3.0])
    before = build(mod)["main"](x)
    assert float(before) == pytest.approx(np.sum(x + x * x))  # naive reference: f_vjp(x, f(x)) = x + x^2
    out = Gradient("main")(mod)
    assert well_formed(out) == []
    assert retrograd.structural_equal(out["f_vjp"], mod["f_vjp"])
    assert "f_vjp_1" in out
    ex = build(out)
    assert float(ex["main"](x)) == pytest.approx(float(before))
    value, (gx,) = ex["main_adjoint"](x)
    assert float(value) == pytest.approx(float(before))
    np.testing.assert_allclose(gx, 1 + 2 * x)  # d/dx sum(x + x^2)
    assert check_gradients(mod, "main", [x]).ok


def test_an_existing_adjoint_name_is_refused_not_replaced():
    text = COLLIDING.replace("def f_vjp(", "def main_adjoint(").replace("cls.f_vjp(", "cls.main_adjoint(")
    mod = retrograd.parse(text)
    with pytest.raises(GradientError, match="already has a function named .main_adjoint., called by main"):
        Gradient("main")(mod)
