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
    body = "\n".join("            " + line for line in lines + [f"gv = R.sum({prev})", "R.output(gv)"])
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        f"    def main({', '.join(params)}) -> R.Tensor((), \"float32\"):\n        with R.dataflow():\n{body}\n        return gv\n"
    )

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
