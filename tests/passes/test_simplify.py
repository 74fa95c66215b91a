"""Simplify: var-to-var bindings, tuple projections, transpose of transpose, transposed matmul, and block
outputs turned back into dataflow vars (Before/Expected scripts)."""

from __future__ import annotations

import numpy as np

import retrograd
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Sequential, get_pass

HEAD = "@I.ir_module\nclass Module:\n"


def _check(before: str, expected: str, then_dce: bool = False):
    mod = retrograd.parse(HEAD + before)
    text = mod.script()
    passes = [get_pass("simplify")] + ([get_pass("dce")] if then_dce else [])
    after = Sequential(passes)(mod)
    assert mod.script() == text
    assert well_formed(after) == []
    retrograd.assert_structural_equal(after, retrograd.parse(HEAD + expected))
    return mod, after


def _same_values(before, after, *shapes, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype("float32") for s in shapes]
    a, b = retrograd.build(before)["main"](*args), retrograd.build(after)["main"](*args)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        np.testing.assert_allclose(x, y, rtol=1e-6)


def test_var_to_var_bindings_disappear():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            a = x
            b = a
            c = R.exp(b)
            d = c
            e = R.add(d, a)
            R.output(e)
        return e
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            c = R.exp(x)
            e = R.add(c, x)
            R.output(e)
        return e
'''
    _check(before, expected)


def test_output_alias_of_a_dataflow_var_takes_its_binding():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32"), R.Tensor((3,), "float32")):
        with R.dataflow():
            lv = R.exp(x)
            lv2 = R.sin(lv)
            gv = lv
            gv2 = lv
            gv3 = R.add(lv2, lv)
            R.output(gv, gv2, gv3)
        return (gv, gv2, gv3)
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32"), R.Tensor((3,), "float32")):
        with R.dataflow():
            gv = R.exp(x)
            lv2 = R.sin(gv)
            gv3 = R.add(lv2, gv)
            R.output(gv, gv3)
        return (gv, gv, gv3)
'''
    mod, after = _check(before, expected)
    _same_values(mod, after, (3,))


def test_coarser_annotations_are_kept():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor(ndim=1, dtype="float32"):
        with R.dataflow():
            a = R.exp(x)
            b: R.Tensor(ndim=1, dtype="float32") = a
            R.output(b)
        return b
'''
    _check(before, before)


def test_tuple_projections_read_the_field():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            t = (x, (y, x))
            a = t[1]
            b = a[0]
            c = R.multiply(b, t[0])
            R.output(c)
        return c
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), y: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            c = R.multiply(y, x)
            R.output(c)
        return c
'''
    _check(before, expected, then_dce=True)


def test_transpose_of_transpose():
    before = '''
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3, 4), "float32")) -> R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((3, 4, 2), "float32"), R.Tensor((2, 3), "float32")):
        with R.dataflow():
            a = R.permute_dims(x)
            b = R.permute_dims(a, axes=[1, 0])
            c = R.exp(b)
            p = R.permute_dims(y, axes=[2, 0, 1])
            q = R.permute_dims(p, axes=[2, 0, 1])
            i = R.permute_dims(x, axes=[0, 1])
            R.output(c, q, i)
        return (c, q, i)
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3, 4), "float32")) -> R.Tuple(R.Tensor((2, 3), "float32"), R.Tensor((3, 4, 2), "float32"), R.Tensor((2, 3), "float32")):
        with R.dataflow():
            c = R.exp(x)
            q = R.permute_dims(y, axes=[1, 2, 0])
            R.output(c, q)
        return (c, q, x)
'''
    mod, after = _check(before, expected, then_dce=True)
    _same_values(mod, after, (2, 3), (2, 3, 4))


def test_transposed_matmul_when_a_transpose_cancels():
    # The weight gradient of x @ w.T: permute(matmul(permute(x), g)) = matmul(permute(g), x).
    before = '''
    @R.function
    def main(x: R.Tensor((4, 3), "float32"), g: R.Tensor((4, 5), "float32"), h: R.Tensor((3, 4), "float32")) -> R.Tuple(R.Tensor((5, 3), "float32"), R.Tensor((4, 4), "float32")):
        with R.dataflow():
            xt = R.permute_dims(x)
            m = R.matmul(xt, g)
            w = R.permute_dims(m)
            n = R.matmul(x, h)
            keep = R.permute_dims(n)
            R.output(w, keep)
        return (w, keep)
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((4, 3), "float32"), g: R.Tensor((4, 5), "float32"), h: R.Tensor((3, 4), "float32")) -> R.Tuple(R.Tensor((5, 3), "float32"), R.Tensor((4, 4), "float32")):
        with R.dataflow():
            lv = R.permute_dims(g, axes=[1, 0])
            w = R.matmul(lv, x)
            n = R.matmul(x, h)
            keep = R.permute_dims(n)
            R.output(w, keep)
        return (w, keep)
'''
    mod, after = _check(before, expected, then_dce=True)
    _same_values(mod, after, (4, 3), (4, 5), (3, 4))


def test_outputs_nothing_reads_later_become_dataflow_vars():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            a = R.exp(x)
            b = R.sin(a)
            R.output(a, b)
        c = R.add(b, x)
        return c
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        with R.dataflow():
            a = R.exp(x)
            b = R.sin(a)
            R.output(b)
        c = R.add(b, x)
        return c
'''
    _check(before, expected)


def test_if_branches_are_simplified():
    before = '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        a = x
        if c:
            b = a
            r = R.exp(b)
        else:
            t = (a, x)
            r = R.sin(t[1])
        return r
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")) -> R.Tensor((3,), "float32"):
        if c:
            r = R.exp(x)
        else:
            r = R.sin(x)
        return r
'''
    _check(before, expected, then_dce=True)


def test_two_permutes_compose_in_order_on_values():
    # Non-commuting permutations: applying them in the wrong order gives another layout.
    text = """
@R.function
def main(y: R.Tensor((2, 3, 4), "float32")):
    with R.dataflow():
        p = R.permute_dims(y, axes=[1, 2, 0])
        q = R.permute_dims(p, axes=[1, 0, 2])
        R.output(q)
    return q
"""
    _rg = retrograd
    mod = _rg.parse(text)
    out = get_pass("simplify")(mod)
    y = np.arange(24, dtype="float32").reshape(2, 3, 4)
    expected = np.transpose(np.transpose(y, (1, 2, 0)), (1, 0, 2))
    got = _rg.build(out)["main"](y)
    assert got.shape == expected.shape == (4, 3, 2)
    np.testing.assert_array_equal(got, expected)
    q = out["main"].body.blocks[0].bindings[-1].value
    assert q.args[0] is out["main"].params[0]  # composed into one permute of y


def test_a_projection_after_the_block_keeps_the_blocks_dataflow_vars_inside():
    """gv takes the binding of t = (x, lv): gv[1] after the block must not become lv, a dataflow var there
    (found by the pipelines fuzz campaign)."""
    before = '''
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        with R.dataflow():
            lv = R.exp(x)
            t = (x, lv)
            gv = t
            R.output(gv)
        t1 = (x, gv)
        item = t1[1]
        inner = item[1]
        out = R.add(inner, x)
        return out
'''
    expected = '''
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        with R.dataflow():
            lv = R.exp(x)
            gv = (x, lv)
            R.output(gv)
        t1 = (x, gv)
        inner = gv[1]
        out = R.add(inner, x)
        return out
'''
    before_mod, after = _check(before, expected)
    _same_values(before_mod, after, (2,))
