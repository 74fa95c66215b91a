"""Constant folding: Before/Expected scripts."""

from __future__ import annotations

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.passes import get_pass

HEAD = "@I.ir_module\nclass Module:\n"


def _check(before: str, expected: str, **options):
    mod = retrograd.parse(HEAD + before)
    text = mod.script()
    after = get_pass("fold-constant", **options)(mod)
    assert mod.script() == text
    assert well_formed(after) == []
    retrograd.assert_structural_equal(after, retrograd.parse(HEAD + expected))
    return after


def test_constant_arithmetic_folds_and_propagates():
    # TVM's Gradient leaves R.subtract(R.const(3), R.const(1)) in place; we fold it.
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            k = R.subtract(R.const(3.0, "float32"), R.const(1.0, "float32"))
            k2 = R.multiply(k, k)
            c = R.const([1.0, 2.0, 3.0], "float32")
            d = R.add(c, k2)
            y = R.multiply(x, d)
            R.output(y)
        return y
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            y = R.multiply(x, R.const([5.0, 6.0, 7.0], "float32"))
            R.output(y)
        return y
'''
    _check(before, expected)


def test_creation_ops_fold_only_when_small():
    before = '''
    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((3, 3), "float32"):
        with R.dataflow():
            one = R.ones(R.shape([]), "float32")
            big = R.ones(R.shape([3, 3]), "float32")
            y = R.multiply(x, one)
            z = R.add(y, big)
            R.output(z)
        return z
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((3, 3), "float32"):
        with R.dataflow():
            big = R.ones(R.shape([3, 3]), "float32")
            y = R.multiply(x, R.const(1.0, "float32"))
            z = R.add(y, big)
            R.output(z)
        return z
'''
    _check(before, expected)
    # With grow=True even the 3x3 table becomes a constant.
    grown = '''
    @R.function
    def main(x: R.Tensor((3, 3), "float32")) -> R.Tensor((3, 3), "float32"):
        with R.dataflow():
            y = R.multiply(x, R.const(1.0, "float32"))
            z = R.add(y, R.const([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], "float32"))
            R.output(z)
        return z
'''
    _check(before, grown, grow=True)


def test_calls_on_variables_and_failing_kernels_stay():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((2,), "float32"):
        with R.dataflow():
            y = R.exp(x)
            t = R.take(R.const([1.0, 2.0], "float32"), R.const([5], "int64"), axis=0)
            z = R.add(R.take(y, R.const([0, 1], "int64"), axis=0), R.const(1.0, "float32"))
            R.output(z)
        return z
'''
    # take with an out-of-range constant index is left for run time (where it is an error)
    _check(before, before)


def test_constants_inside_if_branches_and_the_return_value():
    before = '''
    @R.function
    def main(x: R.Tensor((), "float32"), c: R.Tensor((), "bool")) -> R.Tuple(R.Tensor((), "float32"), R.Tensor((), "float32")):
        k = R.add(R.const(1.0, "float32"), R.const(1.0, "float32"))
        if c:
            r = R.multiply(x, k)
        else:
            h = R.negative(k)
            r = R.multiply(x, h)
        return (r, k)
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((), "float32"), c: R.Tensor((), "bool")) -> R.Tuple(R.Tensor((), "float32"), R.Tensor((), "float32")):
        if c:
            r = R.multiply(x, R.const(2.0, "float32"))
        else:
            r = R.multiply(x, R.const(-2.0, "float32"))
        return (r, R.const(2.0, "float32"))
'''
    _check(before, expected)
