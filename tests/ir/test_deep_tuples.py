"""Tuple expressions and tuple struct infos nested thousands deep, under a recursion limit of 1000:
building, printing, checking, comparing, copying, running, differentiating and the clean-up passes."""

from __future__ import annotations

import contextlib
import sys

import numpy as np
import pytest

import retrograd
from retrograd.errors import ParseError
from retrograd.ir import BlockBuilder, ExprMutator, ExprVisitor, Function, IRModule, Var, well_formed
from retrograd.ir.vars import free_vars, used_vars
from retrograd.ir.copy import copy_expr
from retrograd.ir.expr import Tuple, TupleGetItem, is_leaf
from retrograd.ir.struct_info import (
    TensorStructInfo,
    TupleStructInfo,
    annotation_form,
    is_base_of,
    sinfo_of_value,
    unify,
)
from retrograd.ir.structural_hash import structural_hash
from retrograd.ir.text import format_sinfo
from retrograd.ops.api import R
from retrograd.passes import Gradient
from retrograd.passes.infra.pipeline import parse_pipeline

D = 2000
T = TensorStructInfo((2,), "float32")
X = np.array([1.5, -2.0], "float32")


@contextlib.contextmanager
def low_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def nest_sinfo(depth: int, leaf=T):
    s = leaf
    for _ in range(depth):
        s = TupleStructInfo([s])
    return s


def nest_value(depth: int, leaf=X):
    v = leaf
    for _ in range(depth):
        v = (v,)
    return v


def wrap(expr, depth: int):
    for _ in range(depth):
        expr = Tuple([expr])
    return expr


def dig(expr, depth: int):
    for _ in range(depth):
        expr = TupleGetItem(expr, 0)
    return expr


def square_through(depth: int) -> IRModule:
    """main(x) = y * y, y read back out of x wrapped in `depth` tuples (one binding each way)."""
    x = Var("x", T)
    bb = BlockBuilder()
    bb.begin_scope()
    w = bb.emit(dig(bb.emit(wrap(x, depth)), depth))
    y = bb.emit(R.multiply(w, w))
    body = bb.end_scope(y)
    return IRModule({"main": Function([x], body, body.struct_info)})


def identity_through(depth: int) -> IRModule:
    """main(p) = p rebuilt, p a `depth`-deep tuple parameter: getitems down, then tuples back up."""
    s = nest_sinfo(depth)
    p = Var("p", s)
    bb = BlockBuilder()
    bb.begin_scope()
    v = bb.emit(wrap(bb.emit(dig(p, depth)), depth))
    body = bb.end_scope(v)
    return IRModule({"main": Function([p], body, s)})


def unwrap(value, depth: int):
    for _ in range(depth):
        assert isinstance(value, tuple) and len(value) == 1
        value = value[0]
    return value


def test_struct_info_of_a_deep_nest_compares_hashes_and_prints():
    with low_limit():
        a, b, c = nest_sinfo(10_000), nest_sinfo(10_000), nest_sinfo(9_999)
        assert a == b and hash(a) == hash(b)
        assert a != c and not (a == c)
        assert a != nest_sinfo(10_000, TensorStructInfo((3,), "float32"))
        assert is_base_of(a, b) and not is_base_of(a, c)
        assert unify(a, b) is a
        assert annotation_form(a) is a
        assert sinfo_of_value(nest_value(10_000)) == a
        assert repr(a).count("TupleStructInfo(") == 10_000
        assert format_sinfo(a).count("R.Tuple(") == 10_000
        assert format_sinfo(a, brief=True).startswith("Tuple(Tuple(")
    assert repr(nest_sinfo(1)) == f"TupleStructInfo(fields=({T!r},))"


def test_builder_runs_and_checks_a_2000_deep_nest():
    with low_limit():
        mod = square_through(D)
        assert well_formed(mod) == []
        assert np.array_equal(retrograd.build(mod)["main"](X), X * X)
        binding = mod["main"].body.blocks[0].bindings[0]
        assert is_leaf(binding.value)
        assert binding.var.struct_info == nest_sinfo(D)
        # The getitems are bound one a binding (normal form), in order.
        assert len(mod["main"].body.blocks[0].bindings) == D + 2


def test_structural_equal_and_hash_of_deep_nests():
    with low_limit():
        a, b, c = square_through(D), square_through(D), square_through(D - 1)
        assert retrograd.structural_equal(a, b)
        assert structural_hash(a) == structural_hash(b)
        assert not retrograd.structural_equal(a, c)
        assert structural_hash(a) != structural_hash(c)
        with pytest.raises(AssertionError):
            retrograd.assert_structural_equal(a, c)


def test_printing_a_deep_nest_and_reading_it_back():
    with low_limit():
        text = square_through(D).script()
        assert text.count("(x,)") == 1
        # The parser refuses brackets nested more than 200 deep, with a clear error.
        with pytest.raises(ParseError, match="nested too deeply"):
            retrograd.parse(text)
        # Values nested more than 100 deep are refused too (the parser reads values recursively) ...
        with pytest.raises(retrograd.DiagnosticError, match="nested too deeply"):
            retrograd.parse(square_through(150).script())
        # ... and up to that, the text reads back as the module it came from.
        mod = square_through(99)
        again = retrograd.parse(mod.script())
        assert retrograd.structural_equal(again, mod)
        assert structural_hash(again) == structural_hash(mod)


def test_visitor_mutator_and_copy_of_a_deep_nest():
    with low_limit():
        mod = square_through(D)
        func = mod["main"]
        x = func.params[0]
        nest = func.body.blocks[0].bindings[0].value

        seen = []

        class Vars(ExprVisitor):
            def visit_var(self, var):
                seen.append(var)

        Vars().visit_expr(func)
        assert x in seen

        y = Var("y", T)
        copied = copy_expr(nest, {x: y})
        assert used_vars(copied) == {y} and used_vars(nest) == {x}
        assert free_vars(func.body) == [x]

        class Rename(ExprMutator):
            def visit_var(self, var):
                return y if var is x else super().visit_var(var)

        renamed = Rename().visit_expr(nest)
        assert renamed is not nest and used_vars(renamed) == {y}
        assert renamed.struct_info == nest.struct_info
        assert ExprMutator().visit_expr(func) is func  # nothing to change: the same function


def test_deep_tuple_parameter_and_return_value():
    with low_limit():
        mod = identity_through(D)
        assert well_formed(mod) == []
        assert mod["main"].struct_info.params[0] == nest_sinfo(D)
        mod.script()
        f = retrograd.build(mod)["main"]
        out = f(nest_value(D))
        assert np.array_equal(unwrap(out, D), X)
        # A value of the wrong depth is refused with the path of the mismatch.
        with pytest.raises(retrograd.DiagnosticError, match=r"\[0\]\[0\]"):
            f(nest_value(D - 1))


def test_lowered_python_binds_a_deep_nest_level_by_level():
    with low_limit():
        source = retrograd.lower_to_python(square_through(D))
        namespace: dict = {}
        exec(compile(source, "<lowered>", "exec"), namespace)  # noqa: S102 - our own output
        assert np.array_equal(namespace["main"](X), X * X)
        assert "label" in retrograd.to_dot(square_through(D))


def test_gradient_through_a_deep_nest():
    with low_limit():
        out = Gradient("main", seeds="ones")(square_through(D))
        assert well_formed(out) == []
        value, (grad,) = retrograd.build(out)["main_adjoint"](X)
        assert np.array_equal(value, X * X)
        assert np.array_equal(grad, 2 * X)


def test_gradient_of_a_deep_tuple_parameter_gets_a_deep_tuple_of_zeros_and_ones():
    with low_limit():
        p = Var("p", nest_sinfo(D))
        bb = BlockBuilder()
        bb.begin_scope()
        w = bb.emit(dig(p, D))
        y = bb.emit(R.sum(R.multiply(w, w)))
        body = bb.end_scope(y)
        mod = IRModule({"main": Function([p], body, body.struct_info)})
        out = Gradient("main")(mod)
        assert well_formed(out) == []
        _, (grad,) = retrograd.build(out)["main_adjoint"](nest_value(D))
        assert np.array_equal(unwrap(grad, D), 2 * X)


@pytest.mark.parametrize("pipeline", ["cse", "simplify", "fold-constant", "dce", "cse, simplify, fold-constant, dce"])
def test_clean_up_passes_on_a_deep_nest(pipeline):
    with low_limit():
        mod = square_through(D)
        out = parse_pipeline(pipeline)(mod)
        assert well_formed(out) == []
        assert np.array_equal(retrograd.build(out)["main"](X), X * X)
    assert retrograd.structural_equal(mod, square_through(D))  # the input is left as it was


def test_checkpoint_pass_after_gradient_on_a_deep_nest():
    with low_limit():
        out = parse_pipeline("gradient(func=main, seeds=ones), checkpoint(func_name=main_adjoint)")(square_through(D))
        assert well_formed(out) == []
        _, (grad,) = retrograd.build(out)["main_adjoint"](X)
        assert np.array_equal(grad, 2 * X)


def test_checkpoint_planning_and_memory_model_of_a_function_with_deep_nests():
    from retrograd.analysis.memory import peak_memory
    from retrograd.passes.checkpoint import plan_checkpoint

    with low_limit():
        x = Var("x", T)
        bb = BlockBuilder()
        bb.begin_scope()
        a = bb.emit(wrap(x, D))
        w = bb.emit(dig(a, D))
        y = bb.emit(R.multiply(w, w))
        body = bb.end_scope(bb.emit(Tuple([y, wrap(y, D)])))
        mod = IRModule({"main": Function([x], body, body.struct_info)})
        assert peak_memory(mod, "main") > 0
        for budget in (None, 24):
            out, _ = plan_checkpoint(mod, "main", budget)
            assert well_formed(out) == []
            first, nest = retrograd.build(out)["main"](X)
            assert np.array_equal(first, X * X) and np.array_equal(unwrap(nest, D), X * X)
