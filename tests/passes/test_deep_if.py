"""If nests deeper than Python's default recursion limit allows per level: passes, printing, parsing back,
building and running, all under the default limit (each makes stack room for the nest it meets)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import retrograd
from retrograd.ir import BlockBuilder, Function, IRModule, Var, well_formed
from retrograd.ir.expr import If
from retrograd.ir.functor import if_depth
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.structural_hash import structural_hash
from retrograd.ops.api import R
from retrograd.passes import parse_pipeline


def nest(depth: int) -> IRModule:
    """main(x, c) = (x + x) + (x + x) under `depth` nested Ifs on c (else x); built, not parsed."""
    x = Var("x", TensorStructInfo((2,), "float32"))
    c = Var("c", TensorStructInfo((), "bool"))
    bb = BlockBuilder()
    bb.begin_scope()
    a = bb.emit(R.add(x, x))
    b = bb.emit(R.add(x, x))  # a common subexpression for cse
    body = bb.end_scope(bb.emit(R.add(a, b)))
    for _ in range(depth):  # innermost first: each level wraps the previous body in an If
        other = BlockBuilder()
        other.begin_scope()
        bb = BlockBuilder()
        bb.begin_scope()
        body = bb.end_scope(bb.emit(If(c, body, other.end_scope(x))))
    return IRModule({"main": Function([x, c], body, body.struct_info)})


def at_default_limit(fn):
    """fn() under Python's default recursion limit, restored after."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        return fn()
    finally:
        sys.setrecursionlimit(old)


def run_on_nested_ifs(transform, depth: int = 300) -> tuple[IRModule, IRModule]:
    """(input, transform(input)) for nest(depth), the transform run under Python's default recursion limit."""
    old = sys.getrecursionlimit()
    mod = nest(depth)
    out = at_default_limit(lambda: transform(mod))
    assert sys.getrecursionlimit() == old
    assert at_default_limit(lambda: well_formed(out)) == []
    return mod, out


def run_on_300_nested_ifs(transform) -> tuple[IRModule, IRModule]:
    return run_on_nested_ifs(transform, 300)


def check_runs(mod: IRModule) -> None:
    """main is 4x under c, else x, at the default recursion limit."""
    x = np.array([1.5, -2.0], "float32")
    ex = at_default_limit(lambda: retrograd.build(mod))
    for cond in (True, False):
        got = at_default_limit(lambda: ex["main"](x, np.array(cond)))
        np.testing.assert_array_equal(got, 4 * x if cond else x)


@pytest.mark.parametrize("depth", [300, 1000])
@pytest.mark.parametrize("name", ["cse", "simplify", "fold-constant", "dce"])
def test_passes_survive_nested_ifs(name, depth):
    mod, out = run_on_nested_ifs(parse_pipeline(name), depth)
    assert if_depth(mod["main"]) == depth
    check_runs(out)


def test_1000_nested_ifs_print_and_parse_back():
    # Each level indents 4 more spaces: the innermost lines start with 4000+ of them (MAX_INDENTS
    # allows 2000 levels; Python's tokenizer stops at 100).
    mod = nest(1000)
    text = at_default_limit(mod.script)
    assert text.count(" if c:\n") == 1000
    back = at_default_limit(lambda: retrograd.parse(text))
    assert if_depth(back["main"]) == 1000
    assert at_default_limit(lambda: retrograd.structural_equal(back, mod))
    assert at_default_limit(lambda: structural_hash(back) == structural_hash(mod))
    assert at_default_limit(lambda: well_formed(back)) == []
    assert at_default_limit(back.script) == text
    check_runs(back)


def test_checkpoint_survives_300_nested_ifs():
    from retrograd.analysis import peak_memory
    from retrograd.passes.checkpoint.pass_ import Checkpoint

    _, out = run_on_300_nested_ifs(Checkpoint("main", budget=None))
    assert at_default_limit(lambda: peak_memory(out, "main")) == 25
    check_runs(out)


def test_gradient_survives_300_nested_ifs():
    # Copying the forward and sweeping it backwards recurse once per nested If: the pass makes stack
    # room for the deepest nest, as the mutator-based passes do.
    from retrograd.passes import Gradient

    _, out = run_on_300_nested_ifs(Gradient("main", seeds="ones"))
    # The adjoint prints and parses back, as any module does.
    text = at_default_limit(out.script)
    assert at_default_limit(lambda: retrograd.structural_equal(retrograd.parse(text), out))
    x = np.array([1.5, -2.0], "float32")
    ex = at_default_limit(lambda: retrograd.build(out))
    for cond, slope in ((True, 4.0), (False, 1.0)):  # main is 4x under c, else x
        value, (grad,) = at_default_limit(lambda: ex["main_adjoint"](x, np.array(cond)))
        np.testing.assert_array_equal(value, slope * x)
        np.testing.assert_array_equal(grad, [slope, slope])


def test_check_gradients_survives_nested_ifs():
    # Its float64 copy of the module is an ExprMutator of its own.
    from retrograd.testing import check_gradients

    args = [np.array([1.5, -2.0], "float32"), np.array(True)]
    report = at_default_limit(lambda: check_gradients(nest(250), "main", args))
    assert report.ok
