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
from retrograd.passes.gradient.sweep import Sweep
from retrograd.testing import check_gradients

from .helpers import random_inputs

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

# (module, Gradient options, sites the sweep makes, whether the clean-up takes sites back)
CASES = [
    pytest.param(linear_stack(4, "nn.relu"), {}, 4, False, id="relu-stack"),
    # each layer's input a matmul's product, read by two bindings
    pytest.param(linear_stack(4, None), {}, 4, False, id="linear-stack"),
    pytest.param(linear_stack(3, "tanh", batch=(2,)), {}, 3, False, id="batched"),
    # wt1's adjoint is returned: no site for w1
    pytest.param(linear_stack(3, "tanh"), {"require_grads": ["x", "w0", "w1", "w2", "wt1"]}, 2, False, id="required"),
    pytest.param(SHARED_INPUT, {}, 3, False, id="shared-input"),
    pytest.param(SITE_REUSED, {}, 1, True, id="site-reused"),
    pytest.param(TRANSPOSED_ADJOINT, {}, 1, True, id="transposed-adjoint"),
    pytest.param(REPEATED_INPUT, {}, 1, True, id="repeated-input"),
    pytest.param(SHARED_WEIGHT, {}, 0, False, id="shared-weight"),
    # The vjp's block outputs the layer's result, which the vjp does not return: the clean-up passes
    # run instead of the one walk, on the three bindings.
    pytest.param(CALLED, {}, 1, True, id="called"),
]


def _gradient_with_sites(mod, options: dict, monkeypatch):
    """Gradient's result, how many sites the sweep made and how many functions the clean-up took them back in."""
    made, undone = [], []
    fuse, expand = Sweep.fuse_transposed_operand, cleanup.expand_sites

    def counting_fuse(self, binding, after):
        before = len(self.sites)
        fuse(self, binding, after)
        made.append(len(self.sites) - before)

    def counting_expand(func, sites):
        undone.append(func)
        return expand(func, sites)

    with monkeypatch.context() as m:
        m.setattr(Sweep, "fuse_transposed_operand", counting_fuse)
        m.setattr(cleanup, "expand_sites", counting_expand)
        out = Gradient("main", **options)(mod)
    return out, sum(made), len(undone)


@pytest.mark.parametrize("text, options, sites, undone", CASES)
def test_sites_clean_up_to_what_the_rules_clean_up_to(text, options, sites, undone, monkeypatch):
    mod = retrograd.parse(text)
    fast, made, taken_back = _gradient_with_sites(mod, options, monkeypatch)
    assert made == sites
    assert bool(taken_back) is undone
    # The reference: the rules' bindings all emitted, the clean-up rewriting them itself.
    monkeypatch.setattr(Sweep, "fuse_transposed_operand", lambda self, binding, after: None)
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
    made = []
    fuse = Sweep.fuse_transposed_operand
    monkeypatch.setattr(Sweep, "fuse_transposed_operand", lambda self, b, a: made.append(fuse(self, b, a)))
    Gradient("main", cleanup=False)(mod)
    assert made == []  # the raw adjoint keeps every rule's bindings
