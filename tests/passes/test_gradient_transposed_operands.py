"""The Gradient pass writes the adjoint of a transposed matmul operand (`matmul(a, permute_dims(w))`, a
linear layer's weight) in the form the clean-up gives it, and the clean-up checks each such site: the
adjoint must be exactly the clean-up of what the rules emit (the sweep's shortcut switched off), whether a
site is kept, or taken back because the clean-up would have gone another way."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
import retrograd.passes.cleanup as cleanup
from retrograd.ir.structural import assert_structural_equal
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient
import retrograd.passes.gradient.transform as transform
from retrograd.passes.gradient.transposed import TransposedOperands
from retrograd.testing import check_gradients

from passes.helpers import random_inputs

F = '"float32"'


def _module(params: str, lines: list, extra: str = "") -> str:
    body = "\n".join("            " + line for line in lines + ["R.output(gv)"])
    return (
        f"@I.ir_module\nclass Module:\n{extra}    @R.function\n    def main({params}) -> R.Tensor((), {F}):\n"
        f"        with R.dataflow():\n{body}\n        return gv\n"
    )


def _t(*shape) -> str:
    return f"R.Tensor(({', '.join(map(str, shape))},), {F})"


def linear_stack(layers: int, activation: str | None, batch: tuple = ()) -> str:
    """Layers of matmul by a transposed weight (and bias, activation): a network as PyTorch exports it."""
    params = [f"x: {_t(*batch, 4, 8)}"] + [f"w{i}: {_t(*batch, 8, 8)}, b{i}: {_t(8)}" for i in range(layers)]
    lines, prev = [], "x"
    for i in range(layers):
        lines += [f"wt{i} = R.permute_dims(w{i}, axes={list(range(len(batch))) + [len(batch) + 1, len(batch)]})"]
        lines += [f"m{i} = R.matmul({prev}, wt{i})", f"a{i} = R.add(m{i}, b{i})"]
        prev = f"a{i}"
        if activation:
            lines.append(f"r{i} = R.{activation}(a{i})")
            prev = f"r{i}"
    return _module(", ".join(params), lines + [f"gv = R.sum({prev})"])


# Query, key and value projections of one input: three sites transpose the same input.
SHARED_INPUT = _module(
    f"x: {_t(4, 8)}, wq: {_t(8, 8)}, wk: {_t(8, 8)}, wv: {_t(8, 8)}",
    [
        "wqt = R.permute_dims(wq)", "q = R.matmul(x, wqt)",
        "wkt = R.permute_dims(wk)", "k = R.matmul(x, wkt)",
        "wvt = R.permute_dims(wv)", "v = R.matmul(x, wvt)",
        "qk = R.multiply(q, k)", "s = R.add(qk, v)", "t = R.tanh(s)", "gv = R.sum(t)",
    ],
)

# x is also multiplied by an untransposed weight, after the transposed one: that rule transposes x
# as the site did, and the clean-up would keep the site's transpose of x for it.
SITE_REUSED = _module(
    f"x: {_t(4, 8)}, u: {_t(8, 8)}, w: {_t(8, 8)}",
    ["h1 = R.matmul(x, u)", "wt = R.permute_dims(w)", "h2 = R.matmul(x, wt)", "s = R.multiply(h1, h2)", "gv = R.sum(s)"],
)

# The product's adjoint is a transpose itself: the clean-up uses its source instead of transposing.
TRANSPOSED_ADJOINT = _module(
    f"x: {_t(4, 8)}, w: {_t(8, 8)}, c: {_t(8, 4)}",
    ["wt = R.permute_dims(w)", "h = R.matmul(x, wt)", "ht = R.permute_dims(h)", "p = R.multiply(ht, c)",
     "t = R.tanh(p)", "gv = R.sum(t)"],
)

# As SITE_REUSED, the site made at the matmul (the layer's rules replayed): r0 is also multiplied by u.
MATMUL_SITE_REUSED = _module(
    f"x: {_t(4, 8)}, u: {_t(8, 8)}, " + ", ".join(f"w{i}: {_t(8, 8)}, b{i}: {_t(8)}" for i in range(3)),
    [
        "wt0 = R.permute_dims(w0)", "m0 = R.matmul(x, wt0)", "a0 = R.add(m0, b0)", "r0 = R.nn.relu(a0)",
        "h = R.matmul(r0, u)",
        "wt1 = R.permute_dims(w1)", "m1 = R.matmul(r0, wt1)", "a1 = R.add(m1, b1)", "r1 = R.nn.relu(a1)",
        "wt2 = R.permute_dims(w2)", "m2 = R.matmul(r1, wt2)", "a2 = R.add(m2, b2)", "r2 = R.nn.relu(a2)",
        "s = R.add(r2, h)", "gv = R.sum(s)",
    ],
)

# The input is a repeated product (bound once by the clean-up) that nothing else reads.
REPEATED_INPUT = _module(
    f"x: {_t(4, 8)}, u: {_t(8, 8)}, w: {_t(8, 8)}",
    ["p1 = R.matmul(x, u)", "p2 = R.matmul(x, u)", "wt = R.permute_dims(w)", "h = R.matmul(p2, wt)",
     "t = R.tanh(h)", "s1 = R.sum(t)", "s2 = R.sum(p1)", "gv = R.add(s1, s2)"],
)

# The transposed weight is used twice: its adjoint is a sum, not one product.
SHARED_WEIGHT = _module(
    f"x: {_t(4, 8)}, w: {_t(8, 8)}",
    ["wt = R.permute_dims(w)", "h1 = R.matmul(x, wt)", "r = R.tanh(h1)", "h2 = R.matmul(r, wt)", "gv = R.sum(h2)"],
)

# A called function with a linear layer: its vjp has a site too.
CALLED = _module(
    f"x: {_t(4, 8)}, w: {_t(8, 8)}",
    ["cls = Module", "h = cls.layer(x, w)", "t = R.tanh(h)", "gv = R.sum(t)"],
    extra=(
        f"    @R.function\n    def layer(x: {_t(4, 8)}, w: {_t(8, 8)}) -> {_t(4, 8)}:\n"
        "        with R.dataflow():\n            wt = R.permute_dims(w)\n            y = R.matmul(x, wt)\n"
        "            z = R.tanh(y)\n            R.output(z)\n        return z\n"
    ),
)

# (module, Gradient options, sites the sweep makes, of which at the matmul, whether the clean-up takes
# sites back). The first layer of a kind runs the rules; the layer reading the parameter x is of its own kind.
CASES = [
    pytest.param(linear_stack(4, "nn.relu"), {}, 4, 2, False, id="relu-stack"),
    # each layer's input a matmul's product, read by two bindings
    pytest.param(linear_stack(4, None), {}, 4, 2, False, id="linear-stack"),
    pytest.param(linear_stack(3, "tanh", batch=(2,)), {}, 3, 1, False, id="batched"),
    # wt1's adjoint is returned: no site for w1
    pytest.param(linear_stack(3, "tanh"), {"require_grads": ["x", "w0", "w1", "w2", "wt1"]}, 2, 0, False, id="required"),
    pytest.param(SHARED_INPUT, {}, 3, 1, False, id="shared-input"),
    pytest.param(SITE_REUSED, {}, 1, 0, True, id="site-reused"),
    pytest.param(MATMUL_SITE_REUSED, {}, 3, 1, True, id="matmul-site-reused"),
    pytest.param(TRANSPOSED_ADJOINT, {}, 1, 0, True, id="transposed-adjoint"),
    pytest.param(REPEATED_INPUT, {}, 1, 0, True, id="repeated-input"),
    pytest.param(SHARED_WEIGHT, {}, 0, 0, False, id="shared-weight"),
    # The vjp's block outputs the layer's result, which the vjp does not return: the clean-up passes
    # run instead of the one walk, on the three bindings.
    pytest.param(CALLED, {}, 1, 0, True, id="called"),
]


def _gradient_with_sites(mod, options: dict, monkeypatch):
    """Gradient's result, how many sites the sweep made, whether the one walk made them at the matmul (the
    rules' templates replayed) and in how many functions the clean-up took them back."""
    made, at_matmul, undone = [], [], []
    clean, expand, fuse = cleanup.cleanup_function, cleanup.expand_sites, TransposedOperands.at_matmul

    def counting_cleanup(func, sites=None):
        made.append(len(sites or ()))
        return clean(func, sites)

    def counting_fuse(self, sweep, before, call, var, g, template):
        before_sites = len(self.sites)
        done = fuse(self, sweep, before, call, var, g, template)
        at_matmul.append(len(self.sites) - before_sites)
        return done

    def counting_expand(func, sites):
        undone.append(func)
        return expand(func, sites)

    with monkeypatch.context() as m:
        m.setattr(transform, "cleanup_function", counting_cleanup)
        m.setattr(TransposedOperands, "at_matmul", counting_fuse)
        m.setattr(cleanup, "expand_sites", counting_expand)
        out = Gradient("main", **options)(mod)
    return out, sum(made), sum(at_matmul), len(undone)


def _without_sites(monkeypatch):
    monkeypatch.setattr(TransposedOperands, "after_permute", lambda self, sweep, binding, after: None)
    monkeypatch.setattr(TransposedOperands, "at_matmul", lambda self, sweep, before, call, var, g, template: False)


@pytest.mark.parametrize("text, options, sites, at_matmul, undone", CASES)
def test_sites_clean_up_to_what_the_rules_clean_up_to(text, options, sites, at_matmul, undone, monkeypatch):
    mod = retrograd.parse(text)
    fast, made, made_at_matmul, taken_back = _gradient_with_sites(mod, options, monkeypatch)
    assert (made, made_at_matmul) == (sites, at_matmul)
    assert bool(taken_back) is undone
    # The reference: the rules' bindings all emitted, the clean-up rewriting them itself.
    _without_sites(monkeypatch)
    reference = Gradient("main", **options)(mod)
    for name in reference.keys():
        assert_structural_equal(fast[name], reference[name])
    assert fast.script() == reference.script()
    assert well_formed(fast) == []


@pytest.mark.parametrize("text", [linear_stack(3, "nn.relu"), SHARED_INPUT, SITE_REUSED, CALLED], ids=["stack", "shared-input", "site-reused", "called"])
def test_sites_gradients_match_finite_differences(text):
    mod = retrograd.parse(text)
    for seed in (0, 1):
        report = check_gradients(mod, "main", random_inputs(mod, "main", seed), seed=seed)
        assert report.ok, str(report)


def test_linear_layer_gradient_against_numpy():
    # One layer y = x @ w.T + b, loss sum(tanh(y)): dW = (g.T @ x), dx = g @ w, db = sum(g), g = 1 - tanh(y)^2.
    mod = retrograd.parse(linear_stack(1, "tanh"))
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype("float32") for s in ((4, 8), (8, 8), (8,)))
    adjoint = retrograd.build(Gradient("main")(mod))["main_adjoint"]
    loss, (dx, dw, db) = adjoint(x, w, b)
    y = x.astype("float64") @ w.T.astype("float64") + b
    g = 1.0 - np.tanh(y) ** 2
    np.testing.assert_allclose(float(loss), np.tanh(y).sum(), rtol=1e-5)
    np.testing.assert_allclose(dx, g @ w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, g.T @ x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(db, g.sum(axis=0), rtol=1e-4, atol=1e-5)


def test_no_sites_without_the_cleanup(monkeypatch):
    mod = retrograd.parse(linear_stack(3, "nn.relu"))
    raw = Gradient("main", cleanup=False)(mod)
    _without_sites(monkeypatch)
    assert raw.script() == Gradient("main", cleanup=False)(mod).script()  # every rule's bindings, as they were
    dw = {b.var.name_hint: b.value for b in raw["main_adjoint"].body.blocks[0].bindings}["w0_adjoint"]
    assert dw.op.name == "relax.permute_dims"  # the rule's dw, not a site's m


def _random_network(rng) -> str:
    """Layers drawn at random: matmuls by transposed (sometimes shared) or plain weights, transposes,
    sums of earlier values, squares and activations, a matmul by a layer's transposed weight reused."""
    n = rng.choice([4, 6])
    params, lines, values = {"x": (3, n)}, [], ["x"]
    for i in range(rng.randint(2, 7)):
        src, kind, last = rng.choice(values[-3:]), rng.random(), f"m{i}"
        if kind < 0.55:
            w = f"w{rng.randrange(i)}" if i and rng.random() < 0.2 and f"w{i - 1}" in params else f"w{i}"
            params.setdefault(w, (n, n))
            lines += [f"wt{i} = R.permute_dims({w})", f"m{i} = R.matmul({src}, wt{i})"]
            if rng.random() < 0.15:
                lines.append(f"d{i} = R.matmul({values[-1]}, wt{i})")
                values.append(f"d{i}")
        elif kind < 0.7:
            params[f"u{i}"] = (n, n)
            lines.append(f"m{i} = R.matmul({src}, u{i})")
        elif kind < 0.8:
            lines += [f"m{i} = R.permute_dims({src})", f"t{i} = R.permute_dims(m{i})"]
            last = f"t{i}"
        elif kind < 0.9:
            lines.append(f"m{i} = R.add({src}, {rng.choice(values)})")
        else:
            lines.append(f"m{i} = R.multiply({src}, {src})")
        activation = rng.choice(["nn.relu", "tanh", None, None])
        if activation:
            lines.append(f"r{i} = R.{activation}({last})")
            last = f"r{i}"
        values.append(last)
    terms = rng.sample(values[1:], min(len(values) - 1, rng.randint(1, 3)))
    for j, t in enumerate(terms[1:]):
        lines.append(f"s{j} = R.add({terms[0] if j == 0 else f's{j - 1}'}, {t})")
    lines.append(f"gv = R.sum({f's{len(terms) - 2}' if len(terms) > 1 else terms[0]})")
    return _module(", ".join(f"{p}: {_t(*s)}" for p, s in params.items()), lines)


def test_random_networks_clean_up_to_what_the_rules_clean_up_to(monkeypatch):
    import random

    rng = random.Random(7)
    texts = [_random_network(rng) for _ in range(40)]
    fast, made, undone = [], 0, 0
    for text in texts:
        out, sites, _, taken_back = _gradient_with_sites(retrograd.parse(text), {}, monkeypatch)
        fast.append(out.script())
        made, undone = made + sites, undone + bool(taken_back)
    assert made > 40 and undone > 0  # both kinds of outcome drawn
    _without_sites(monkeypatch)
    for text, got in zip(texts, fast):
        assert got == Gradient("main")(retrograd.parse(text)).script(), text
