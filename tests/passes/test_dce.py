"""Dead code elimination: Before/Expected scripts."""

from __future__ import annotations

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.passes import get_pass


def _check(before: str, expected: str, **options):
    mod = retrograd.parse(before)
    text = mod.script()
    after = get_pass("dce", **options)(mod)
    assert mod.script() == text
    assert well_formed(after) == []
    retrograd.assert_structural_equal(after, retrograd.parse(expected))


def test_unused_bindings_and_empty_blocks_go():
    before = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            a = R.exp(x)
            b = R.sin(a)
            c = R.add(x, x)
            R.output(c)
        d = R.multiply(c, c)
        with R.dataflow():
            e = R.cos(x)
            R.output(e)
        return c
'''
    expected = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            c = R.add(x, x)
            R.output(c)
        return c
'''
    _check(before, expected)


def test_chains_die_transitively_and_tuples_keep_their_fields_alive():
    before = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32")):
        with R.dataflow():
            a = R.exp(x)
            b = R.sin(a)
            c = R.cos(b)
            t = (y, x)
            u = t[1]
            gv = (u, y)
            R.output(gv)
        return gv
'''
    expected = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32")):
        with R.dataflow():
            t = (y, x)
            u = t[1]
            gv = (u, y)
            R.output(gv)
        return gv
'''
    _check(before, expected)


def test_if_branches_are_cleaned_and_keep_what_they_read():
    before = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        a = R.exp(x)
        b = R.sin(x)
        unused = R.cos(x)
        if c:
            dead = R.tanh(a)
            r = R.add(a, a)
        else:
            r = R.multiply(b, x)
        return r
'''
    expected = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        a = R.exp(x)
        b = R.sin(x)
        if c:
            r = R.add(a, a)
        else:
            r = R.multiply(b, x)
        return r
'''
    _check(before, expected)


def test_unreachable_private_functions_are_removed():
    before = '''
@I.ir_module
class Module:
    @R.function(private=True)
    def used(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.exp(x)
        return y

    @R.function(private=True)
    def unused(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.sin(x)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        cls = Module
        y = cls.used(x)
        return y
'''
    expected = '''
@I.ir_module
class Module:
    @R.function(private=True)
    def used(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.exp(x)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        cls = Module
        y = cls.used(x)
        return y
'''
    _check(before, expected)
    # ...unless asked to keep them
    kept = get_pass("dce", remove_unused_functions=False)(retrograd.parse(before))
    assert "unused" in kept


def test_unchanged_module_functions_are_reused():
    text = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            y = R.exp(x)
            R.output(y)
        return y
'''
    mod = retrograd.parse(text)
    assert get_pass("dce")(mod)["main"] is mod["main"]


def test_an_unused_if_with_one_impure_branch_stays():
    before = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def effect(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        return x

    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        cls = Module
        if c:
            r = R.exp(x)
        else:
            r = cls.effect(x)
        return x
'''
    mod = retrograd.parse(before)
    _check(before, mod.script())


def test_an_unused_assert_stays_and_constant_folding_leaves_it():
    """R.assert_op is impure: its result is never read, yet the check stays (and a constant condition
    is not evaluated at compile time, where a failing one would raise)."""
    text = '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        c = R.less(R.const(1, "int64"), R.const(0, "int64"))
        R.assert_op(c, R.str("never"), format="{}")
        y = R.exp(x)
        return x
'''
    expected = text.replace("        y = R.exp(x)\n", "")
    _check(text, expected)
    folded = get_pass("fold-constant")(retrograd.parse(text))
    assert "R.assert_op(" in folded.script()
