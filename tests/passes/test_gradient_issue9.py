"""Gradient correctness fixes of issue 9, each against float64 finite differences (and PyTorch when installed)."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import GradientError
from retrograd.ir.well_formed import well_formed
from retrograd.passes.gradient import Gradient
from retrograd.runtime import build
from retrograd.testing import check_gradients

HEAD = "from tvm.script import ir as I, relax as R, tir as T\n"

COLLIDING = HEAD + """
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
