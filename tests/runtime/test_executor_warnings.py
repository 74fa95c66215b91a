"""Running a module never emits NumPy RuntimeWarnings: inf and nan are results, in place or not."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import retrograd

TEXT = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float64"), y: R.Tensor((3,), "float64")) -> R.Tensor((3,), "float64"):
        a = R.exp(x)
        b = R.multiply(a, y)
        c = R.subtract(b, b)
        d = R.add(c, c)
        e = R.multiply(d, R.const(0.0, "float64"))
        f = R.tanh(e)
        return f
"""


@pytest.mark.parametrize("copies", [False, True])
def test_overflow_and_invalid_values_give_ieee_results_without_warnings(copies):
    ex = retrograd.build(retrograd.parse(TEXT))
    x, y = np.array([1000.0, 1.0, 2.0]), np.array([1.0, 0.0, np.inf])
    # naive reference, element by element in Python floats (inf - inf and 0 * inf are nan)
    expected = []
    for xi, yi in zip(x, y):
        a = np.inf if xi > 700 else float(np.exp(xi))
        b = a * yi if not (a == 0 or yi == 0) or (np.isfinite(a) and np.isfinite(yi)) else float("nan")
        c = b - b if np.isfinite(b) else float("nan")
        expected.append(np.tanh((c + c) * 0.0) if np.isfinite(c) else float("nan"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args = (x.copy(), y.copy()) if copies else (x, y)
        out = ex["main"](*args)
    np.testing.assert_array_equal(out, np.array(expected))
