"""CSE: Before/Expected scripts, scoping rules, and values unchanged when run."""

import numpy as np

import retrograd
from retrograd.ir import well_formed
from retrograd.passes import CommonSubexprElimination, Gradient


def _cse(text):
    mod = retrograd.parse(text)
    out = CommonSubexprElimination()(mod)
    assert well_formed(out) == []
    return mod, out


def test_repeated_calls_bound_once():
    before, after = _cse(
        """
@R.function
def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
    with R.dataflow():
        a = R.multiply(x, y)
        b = R.multiply(x, y)
        c = R.add(a, b)
        d = R.sum(c, axis=[1], keepdims=False)
        e = R.sum(c, axis=[1], keepdims=False)
        f = R.sum(c, axis=[0], keepdims=False)
        R.output(d, e, f)
    return (d, e, f)
"""
    )
    expected = retrograd.parse(
        """
@R.function
def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")):
    with R.dataflow():
        a = R.multiply(x, y)
        c = R.add(a, a)
        d = R.sum(c, axis=[1], keepdims=False)
        f = R.sum(c, axis=[0], keepdims=False)
        R.output(d, f)
    return (d, d, f)
"""
    )
    retrograd.assert_structural_equal(after, expected)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, 3, 4)).astype("float32")
    for got, want in zip(retrograd.build(after)["main"](x, y), retrograd.build(before)["main"](x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_equal_small_constants_match_and_different_attrs_do_not():
    before, after = _cse(
        """
@R.function
def main(x: R.Tensor((4,), "float32")):
    with R.dataflow():
        a = R.add(x, R.const(1.0, "float32"))
        b = R.add(x, R.const(1.0, "float32"))
        c = R.add(x, R.const(2.0, "float32"))
        d = R.add(R.add(a, b), c)
        R.output(d)
    return d
"""
    )
    bindings = after["main"].body.blocks[0].bindings
    # b folds into a; c has another constant and stays; d's nested add stays.
    assert len(bindings) == 4
    assert len(before["main"].body.blocks[0].bindings) == 5


def test_dataflow_var_not_reused_outside_its_block_nor_for_an_output():
    text = """
@R.function
def main(x: R.Tensor((4,), "float32")):
    with R.dataflow():
        a = R.exp(x)
        b = R.exp(x)
        R.output(b)
    with R.dataflow():
        c = R.exp(x)
        d = R.add(b, c)
        R.output(d)
    return d
"""
    before, after = _cse(text)
    # `b` is an output: it may not become the dataflow var `a`; `c` may not reach back into block 1's `a`,
    # but it can reuse the output `b`.
    blocks = after["main"].body.blocks
    assert [len(b.bindings) for b in blocks] == [2, 1]
    x = np.linspace(-1, 1, 4).astype("float32")
    np.testing.assert_allclose(retrograd.build(after)["main"](x), 2 * np.exp(x), rtol=1e-6)


def test_if_branches_see_outer_bindings_but_not_each_other():
    text = """
@R.function
def main(c: R.Tensor((), "bool"), x: R.Tensor((4,), "float32")):
    a = R.exp(x)
    if c:
        b = R.exp(x)
        r = R.add(a, b)
    else:
        b2 = R.sin(x)
        r = R.add(b2, a)
    s = R.sin(x)
    out = R.add(r, s)
    return out
"""
    before, after = _cse(text)
    ex_b, ex_a = retrograd.build(before)["main"], retrograd.build(after)["main"]
    x = np.linspace(-1, 1, 4).astype("float32")
    for cond in (True, False):
        np.testing.assert_allclose(ex_a(np.array(cond), x), ex_b(np.array(cond), x), rtol=1e-6)
    printed = after.script()
    # exp(x) in the true branch reuses the outer `a`; the else-branch sin(x) is not visible after the If.
    assert printed.count("R.exp(") == 1
    assert printed.count("R.sin(") == 2


def test_cse_shrinks_an_adjoint_and_keeps_its_values():
    mod = retrograd.parse(
        """
@R.function
def main(x: R.Tensor((5,), "float32")):
    with R.dataflow():
        y = R.multiply(x, x)
        z = R.multiply(y, x)
        s = R.sum(z, axis=None, keepdims=False)
        R.output(s)
    return s
"""
    )
    adj = Gradient("main")(mod)
    out = CommonSubexprElimination()(adj)
    assert well_formed(out) == []
    n = lambda m: sum(len(b.bindings) for b in m["main_adjoint"].body.blocks)  # noqa: E731
    assert n(out) <= n(adj)
    x = np.linspace(0.5, 2.0, 5).astype("float32")
    _, (g,) = retrograd.build(out)["main_adjoint"](x)
    np.testing.assert_allclose(g, 3 * x**2, rtol=1e-5)


def test_input_module_untouched_and_registered_by_name():
    from retrograd.passes import parse_pipeline

    text = """
@R.function
def main(x: R.Tensor((4,), "float32")):
    a = R.exp(x)
    b = R.exp(x)
    c = R.add(a, b)
    return c
"""
    mod = retrograd.parse(text)
    before = mod.script()
    out = parse_pipeline("cse, dce")(mod)
    assert mod.script() == before
    assert out.script().count("R.exp(") == 1


def test_calls_differing_only_in_attributes_stay_apart_on_a_square_input():
    # Same op, same argument, same result shape (the input is square): only the axis tells them apart.
    before, after = _cse(
        """
@R.function
def main(x: R.Tensor((3, 3), "float32")):
    with R.dataflow():
        a = R.sum(x, axis=[0], keepdims=False)
        b = R.sum(x, axis=[1], keepdims=False)
        c = R.subtract(a, b)
        R.output(c)
    return c
"""
    )
    x = np.arange(9, dtype="float32").reshape(3, 3)
    np.testing.assert_array_equal(retrograd.build(after)["main"](x), x.sum(axis=0) - x.sum(axis=1))
    assert len(after["main"].body.blocks[0].bindings) == 3


def test_signed_zeros_in_attributes_and_prim_values_stay_apart():
    """0.0 == -0.0, so keys of untyped values merged calls that give differently signed zeros."""
    before, after = _cse(
        """
@R.function
def main(x: R.Tensor((4,), "float32")):
    a = R.nn.leakyrelu(x, alpha=0.0)
    b = R.nn.leakyrelu(x, alpha=-0.0)
    c = R.clip(x, R.prim_value(T.float64(0.0)), R.prim_value(T.float64(2.0)))
    d = R.clip(x, R.prim_value(T.float64(-0.0)), R.prim_value(T.float64(2.0)))
    return (a, b, c, d)
"""
    )
    x = np.array([-1.0, -0.0, 0.5, 3.0], dtype=np.float32)
    got = retrograd.build(after)["main"](x)
    # Naive reference: leaky relu is x where x > 0 else alpha * x; clip is min(max(x, lo), hi).
    want = [
        np.where(x > 0, x, np.float32(0.0) * x),
        np.where(x > 0, x, np.float32(-0.0) * x),
        np.minimum(np.maximum(x, np.float32(0.0)), np.float32(2.0)),
        np.minimum(np.maximum(x, np.float32(-0.0)), np.float32(2.0)),
    ]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
        assert np.array_equal(np.signbit(np.asarray(g)), np.signbit(w))
    assert np.signbit(want[0][0]) != np.signbit(want[1][0])  # the two calls do differ


def test_attribute_keys_by_identity_and_content_agree_with_attrs_key():
    """AttrKeys (the clean-up's and the gradient templates' memo) gives attrs_key's key for every dict, and
    `shared` one dict only for dicts whose typed keys are equal: 1, 1.0 and True, or 0.0 and -0.0, stay apart."""
    from retrograd.ops.registry import attrs_key
    from retrograd.passes.cse import AttrKeys

    dicts = [
        {}, {"axis": None}, {"axis": None, "keepdims": False}, {"axis": None, "keepdims": 0},
        {"axis": 1}, {"axis": True}, {"axis": 1.0}, {"alpha": 0.0}, {"alpha": -0.0}, {"axes": [1, 0]},
        {"axes": [1.0, 0]}, {"axes": (1, 0)}, {"axes": [[1], [0]]}, {"v": "a"}, {"v": {"x": 1}}, {"keepdims": False, "axis": None},
    ]
    keys = AttrKeys()
    for round_ in range(2):  # the second time from the memos
        copies = [dict(d) for d in dicts]  # new objects: found by content (or keyed afresh)
        for d in dicts + copies:
            assert keys(d) == attrs_key(d)
        for d, c in zip(dicts, copies):
            first = keys.shared(c)
            assert first == c and attrs_key(first) == attrs_key(c)
            if attrs_key(c) is not None:
                assert first is keys.shared(d)  # one dict per key
    shared = {id(keys.shared(d)) for d in dicts}
    assert len(shared) == len({attrs_key(d) for d in dicts if attrs_key(d) is not None}) + sum(attrs_key(d) is None for d in dicts)
