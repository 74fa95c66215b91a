"""The Gradient pass's fast paths build what the slow ones build: the one-walk clean-up against the four
clean-up passes in a row, rule templates against running every rule."""

from __future__ import annotations

import pytest

import retrograd
from retrograd.ir.structural import assert_structural_equal
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient
from retrograd.passes.cleanup import cleanup_function
from retrograd.passes.cse import eliminate_common_subexpressions
from retrograd.passes.dce import eliminate_dead_code
from retrograd.passes.fold_constant import fold_constants
from retrograd.passes.gradient.templates import RuleTemplates
from retrograd.passes.simplify import simplify_function



def _summed_module(params: list, lines: list, last: str) -> str:
    """A module whose main runs `lines` in a dataflow block and returns the sum of `last`."""
    body = "\n".join("            " + line for line in lines + [f"gv = R.sum({last})", "R.output(gv)"])
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        f"    def main({', '.join(params)}) -> R.Tensor((), \"float32\"):\n        with R.dataflow():\n{body}\n        return gv\n"
    )


def mlp_text(layers: int, transposed: bool) -> str:
    """Layers of (permute_dims,) matmul, bias add and relu, summed: each layer's rules are the same."""
    t = 'R.Tensor((4, 8), "float32")'
    params = [f"x: {t}"] + [f'w{i}: R.Tensor((8, 8), "float32"), b{i}: R.Tensor((8,), "float32")' for i in range(layers)]
    lines, prev = [], "x"
    for i in range(layers):
        w = f"w{i}"
        if transposed:
            lines.append(f"wt{i} = R.permute_dims(w{i})")
            w = f"wt{i}"
        lines += [f"m{i} = R.matmul({prev}, {w})", f"a{i} = R.add(m{i}, b{i})", f"r{i} = R.nn.relu(a{i})"]
        prev = f"r{i}"
    return _summed_module(params, lines, prev)

# Repeated layers (templates replay), a shared weight (accumulation), repeated computations (CSE),
# a constant computation (folding), transposes (simplify), an unused value (dead code).
SHARED = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 3), "float32"), w: R.Tensor((3, 3), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            c = R.add(R.const(1.0, "float32"), R.const(2.0, "float32"))
            wt = R.permute_dims(w)
            h0 = R.matmul(x, wt)
            h1 = R.add(h0, b)
            h2 = R.nn.relu(h1)
            h3 = R.matmul(h2, wt)
            h4 = R.add(h3, b)
            h5 = R.nn.relu(h4)
            h6 = R.multiply(h5, c)
            e1 = R.exp(h6)
            e2 = R.exp(h6)
            s = R.add(e1, e2)
            unused = R.sin(s)
            gv = R.sum(s)
            R.output(gv)
        return gv
"""

MODULES = [SHARED, mlp_text(6, transposed=True), mlp_text(3, transposed=False)]


def _passes(func):
    return eliminate_dead_code(eliminate_common_subexpressions(simplify_function(fold_constants(func))))


@pytest.mark.parametrize("text", MODULES)
def test_one_walk_cleanup_equals_the_passes(text):
    mod = retrograd.parse(text)
    raw = Gradient("main", cleanup=False)(mod)["main_adjoint"]
    fast = cleanup_function(raw)
    assert_structural_equal(fast, _passes(raw))
    assert fast is not raw  # there was something to clean: the walk ran and changed it
    assert well_formed(Gradient("main")(mod)) == []


@pytest.mark.parametrize("text", MODULES)
def test_rule_templates_build_what_the_rules_build(text, monkeypatch):
    mod = retrograd.parse(text)
    with_templates = Gradient("main", cleanup=False)(mod)
    replays = []
    original = RuleTemplates.get

    def counting(self, key):
        hit = original(self, key)
        replays.append(hit is not None)
        return hit

    monkeypatch.setattr(RuleTemplates, "get", counting)
    Gradient("main", cleanup=False)(mod)
    assert any(replays)  # the repeated layers did replay templates
    monkeypatch.setattr(RuleTemplates, "get", lambda self, key: None)
    without = Gradient("main", cleanup=False)(mod)
    assert_structural_equal(with_templates["main_adjoint"], without["main_adjoint"])
    assert with_templates.script() == without.script()


def transposed_text(ndim: int, axes: str, annotation: str, layers: int = 3) -> str:
    """Layers of matmul by a transposed parameter (permute_dims(w_i, axes)) and tanh, summed."""
    batch = "8, " if ndim == 3 else ""  # cubes: any permutation of a weight fits the matmul
    w = f'R.Tensor(({batch}8, 8), "float32")'
    params = [f'x: R.Tensor(({batch}4, 8), "float32")'] + [f"w{i}: {w}" for i in range(layers)]
    ann = {"full": f": {w}", "ndim": f': R.Tensor(dtype="float32", ndim={ndim})', "none": ""}[annotation]
    lines, prev = [], "x"
    for i in range(layers):
        lines += [f"wt{i}{ann} = R.permute_dims(w{i}, axes={axes})", f"m{i} = R.matmul({prev}, wt{i})", f"r{i} = R.tanh(m{i})"]
        prev = f"r{i}"
    return _summed_module(params, lines, prev)


# (module, whether replayed rules skip the transpose of a transposed parameter): the clean-up cancels
# permute_dims(permute_dims(w)) only when the two compose to the identity, the inner one is not the
# identity itself, and w has the struct info of the outer one (here: not when wt is annotated by ndim only).
TRANSPOSED = [
    (mlp_text(6, transposed=True), True),
    (SHARED, False),  # a shared weight: one matmul of each kind, nothing replayed
    (transposed_text(2, "None", "none"), True),
    (transposed_text(2, "[1, 0]", "full"), True),
    (transposed_text(3, "[0, 2, 1]", "none"), True),
    (transposed_text(3, "[0, 2, 1]", "ndim"), False),
    (transposed_text(2, "[0, 1]", "none"), False),  # the identity: the clean-up drops the inner one instead
    (transposed_text(3, "[1, 2, 0]", "none"), False),  # rotations: the matmul rule swaps the last two axes
]


@pytest.mark.parametrize("text, skips", TRANSPOSED)
def test_replayed_rules_skip_what_the_cleanup_cancels(text, skips, monkeypatch):
    mod = retrograd.parse(text)
    found = []
    original = RuleTemplates.param_source

    def recording(self, x, outer, sinfo):
        source = original(self, x, outer, sinfo)
        found.append(source is not None)
        return source

    monkeypatch.setattr(RuleTemplates, "param_source", recording)
    fast = Gradient("main")(mod)
    assert any(found) is skips
    # The reference: every rule run, its bindings all built, the clean-up doing the cancelling.
    monkeypatch.setattr(RuleTemplates, "get", lambda self, key: None)
    reference = Gradient("main")(mod)
    assert_structural_equal(fast["main_adjoint"], reference["main_adjoint"])
    assert fast.script() == reference.script()
    assert well_formed(fast) == []
    # Without the clean-up nothing is skipped: the raw adjoint keeps every rule's bindings.
    found.clear()
    Gradient("main", cleanup=False)(mod)
    assert not any(found)


def _transposed_product(read_again: bool) -> str:
    """t = permute_dims(matmul(permute_dims(a), b)): simplify rewrites t when nothing else reads the
    product; `read_again` reads it once more, after t (the walk counts reads as it goes)."""
    again = ["v = R.multiply(m, R.const(2.0, \"float32\"))", "s2 = R.sum(v)"] if read_again else ["s2 = R.sum(at)"]
    lines = ["at = R.permute_dims(a)", "m = R.matmul(at, b)", "t = R.permute_dims(m)", "s1 = R.sum(t)"]
    lines += again + ["gv = R.add(s1, s2)", "R.output(gv)"]
    body = "\n".join("            " + line for line in lines)
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(a: R.Tensor((3, 4), "float32"), b: R.Tensor((3, 5), "float32")) -> R.Tensor((), "float32"):\n'
        f"        with R.dataflow():\n{body}\n        return gv\n"
    )


@pytest.mark.parametrize("read_again", [False, True])
def test_one_walk_read_counts_found_later(read_again):
    # The product is read once when t asks; read_again reads it later: the walk's guess is wrong
    # and it must clean as the passes do (which count every read first), leaving t a transpose.
    func = retrograd.parse(_transposed_product(read_again))["main"]
    fast = cleanup_function(func)
    assert_structural_equal(fast, _passes(func))
    t = next(b.value for b in fast.body.blocks[0].bindings if b.var.name_hint == "t")
    assert t.op.name == ("relax.permute_dims" if read_again else "relax.matmul")


def _dataflow_main(lines: list, result: str) -> str:
    body = "\n".join("            " + line for line in lines + [f"gv = R.sum({result})", "R.output(gv)"])
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(a: R.Tensor((3, 4), "float32"), b: R.Tensor((4, 3), "float32")) -> R.Tensor((), "float32"):\n'
        f"        with R.dataflow():\n{body}\n        return gv\n"
    )


# Each leaves a binding that only the dead-code step removes: the walk must not skip it (nothing_dead).
DEAD_AFTER_WALK = {
    "dead in the input": ["u = R.exp(a)", "v = R.sin(a)"],
    "an unread alias": ["u = R.exp(a)", "y = u", "v = R.sin(a)"],
    "permutations composed": ["p = R.permute_dims(a)", "q = R.permute_dims(p, axes=[1, 0])", "v = R.sin(q)"],
    "a projection of a known tuple": ["u = R.exp(a)", "t = (u, b)", "s = t[0]", "v = R.sin(s)"],
    "a repeated computation": ["u = R.exp(a)", "w = R.exp(a)", "v = R.add(u, w)"],
}


@pytest.mark.parametrize("case", list(DEAD_AFTER_WALK))
def test_one_walk_removes_what_becomes_dead(case):
    func = retrograd.parse(_dataflow_main(DEAD_AFTER_WALK[case], "v"))["main"]
    fast = cleanup_function(func)
    assert_structural_equal(fast, _passes(func))
    names = [b.var.name_hint for b in fast.body.blocks[0].bindings]
    assert names[-2:] == ["v", "gv"]
    assert len(names) < len(func.body.blocks[0].bindings)
