"""well_formed / verify: each kind of problem on a hand-made module, located; good modules pass."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.errors import Span, WellFormedError
from retrograd.ir import (
    BindingBlock,
    BlockBuilder,
    Call,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    const,
    verify,
    well_formed,
)
from retrograd.ir.struct_info import PrimStructInfo, TensorStructInfo, TupleStructInfo
from retrograd.ops.api import R
from retrograd.ops.registry import get

ADD, EXP = get("relax.add"), get("relax.exp")


def T(*shape, dtype="float32"):
    return TensorStructInfo(tuple(shape), dtype)


def fn(params, blocks, body, ret=None):
    return Function(params, SeqExpr(blocks, body, body.struct_info), ret if ret is not None else body.struct_info)


def mod(**functions):
    return IRModule(functions)


def call(op, *args, sinfo=None, **attrs):
    """A call built directly (no builder), with attributes defaulted like OpDef.__call__ does."""
    full = op.normalize_attrs(attrs) if not set(attrs) - {a.name for a in op.attrs_schema} else attrs
    return Call(op, args, full, sinfo if sinfo is not None else op.infer_struct_info(Call(op, args, full)))


def one_problem(m, *fragments):
    problems = well_formed(m)
    assert len(problems) == 1, problems
    for frag in fragments:
        assert frag in problems[0], problems[0]
    return problems[0]


def good_module():
    bb = BlockBuilder()
    x, y = Var("x", T(3, 4)), Var("y", T(4))
    c = Var("c", TensorStructInfo((), "bool"))
    bb.begin_scope()
    with bb.dataflow():
        a = bb.emit(R.add(x, y), "a")
        t = bb.emit(Tuple([a, x]), "t")
        b = bb.emit(TupleGetItem(t, 1), "b")
        out = bb.emit_output(R.multiply(a, b), "out")
    bb.begin_scope()
    tb = bb.end_scope(bb.emit(R.exp(out), "e"))
    bb.begin_scope()
    fb = bb.end_scope(bb.emit(R.sin(out), "s"))
    r = bb.emit(If(c, tb, fb), "r")
    body = bb.end_scope(r)
    return mod(main=Function([x, y, c], body, body.struct_info))


def test_good_module_has_no_problems():
    m = good_module()
    assert well_formed(m) == []
    assert verify(m) is m


def test_undefined_variable():
    x, ghost = Var("x", T(3)), Var("ghost", T(3))
    y = Var("y", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(y, call(ADD, x, ghost))])], y))
    one_problem(m, "function 'main', binding 'y'", "undefined variable 'ghost'")


def test_body_referring_to_undefined_variable():
    x, ghost = Var("x", T(3)), Var("ghost", T(3))
    one_problem(mod(main=fn([x], [], ghost)), "return value", "undefined variable 'ghost'")


def test_use_before_definition():
    x, a, b = Var("x", T(3)), Var("a", T(3)), Var("b", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, call(EXP, b)), VarBinding(b, call(EXP, x))])], a))
    one_problem(m, "binding 'a'", "uses variable 'b' before its definition")


def test_variable_bound_twice():
    x, a = Var("x", T(3)), Var("a", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, call(EXP, x)), VarBinding(a, call(EXP, a))])], a))
    one_problem(m, "variable 'a' is bound twice")
    # A parameter bound again by a binding is the same mistake.
    m2 = mod(main=fn([x], [BindingBlock([VarBinding(x, call(EXP, x))])], x))
    one_problem(m2, "variable 'x' is bound twice (first as parameter 'x')")


def test_dataflow_var_used_outside_its_block():
    x, lv = Var("x", T(3)), DataflowVar("lv", T(3))
    m = mod(main=fn([x], [DataflowBlock([VarBinding(lv, call(EXP, x))])], lv))
    one_problem(m, "return value", "dataflow variable 'lv' outside its dataflow block")
    # ... also from a later block.
    y = Var("y", T(3))
    m2 = mod(
        main=fn([x], [DataflowBlock([VarBinding(lv, call(EXP, x))]), BindingBlock([VarBinding(y, call(EXP, lv))])], y)
    )
    one_problem(m2, "binding 'y'", "dataflow variable 'lv' outside its dataflow block")


def test_output_var_of_dataflow_block_is_visible_after_it():
    x, lv, gv = Var("x", T(3)), DataflowVar("lv", T(3)), Var("gv", T(3))
    m = mod(main=fn([x], [DataflowBlock([VarBinding(lv, call(EXP, x)), VarBinding(gv, call(EXP, lv))])], gv))
    assert well_formed(m) == []


def test_dataflow_var_bound_outside_dataflow_block_and_as_param():
    x, lv = Var("x", T(3)), DataflowVar("lv", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(lv, call(EXP, x))])], x))
    one_problem(m, "binding 'lv'", "dataflow variable 'lv' is bound outside a dataflow block")
    p = DataflowVar("p", T(3))
    one_problem(mod(main=fn([p], [], p)), "parameter 'p'", "cannot be a DataflowVar")


def test_variable_of_another_function():
    x, a = Var("x", T(3)), Var("a", T(3))
    f = fn([x], [BindingBlock([VarBinding(a, call(EXP, x))])], a)
    y, b = Var("y", T(3)), Var("b", T(3))
    g = fn([y], [BindingBlock([VarBinding(b, call(ADD, y, a))])], b)
    one_problem(mod(f=f, g=g), "function 'g', binding 'b'", "uses variable 'a' of function 'f'")


def test_variable_used_outside_the_if_branch_defining_it():
    c, x = Var("c", TensorStructInfo((), "bool")), Var("x", T(3))
    inner = Var("inner", T(3))
    tb = SeqExpr([BindingBlock([VarBinding(inner, call(EXP, x))])], inner, T(3))
    fb = SeqExpr([], x, T(3))
    r, z = Var("r", T(3)), Var("z", T(3))
    m = mod(main=fn([c, x], [BindingBlock([VarBinding(r, If(c, tb, fb, T(3))), VarBinding(z, call(ADD, r, inner))])], z))
    one_problem(m, "binding 'z'", "uses variable 'inner' outside the scope")


def test_annotation_contradicts_inference():
    x, y = Var("x", T(3, 4)), Var("y", T(4))
    wrong = Var("a", T(4, 3))
    m = mod(main=fn([x, y], [BindingBlock([VarBinding(wrong, call(ADD, x, y))])], wrong))
    one_problem(m, "binding 'a'", 'annotation R.Tensor((4, 3), "float32") contradicts', "(3, 4)")
    # A call whose own recorded struct info disagrees with re-inference.
    lied = Call(ADD, [x, y], {}, T(9, 9))
    b = Var("b", T(9, 9))
    p = one_problem(mod(main=fn([x, y], [BindingBlock([VarBinding(b, lied)])], b)), "R.add is annotated")
    assert "inference gives" in p
    # A less precise annotation is fine.
    loose = Var("c", TensorStructInfo(None, "float32", 2))
    assert well_formed(mod(main=fn([x, y], [BindingBlock([VarBinding(loose, call(ADD, x, y))])], loose))) == []


def test_inference_errors_are_reported_not_raised():
    x, y = Var("x", T(3, 4)), Var("y", T(5))
    b = Var("b", T(3, 4))
    m = mod(main=fn([x, y], [BindingBlock([VarBinding(b, Call(ADD, [x, y], {}, T(3, 4)))])], b))
    one_problem(m, "binding 'b'", "R.add", "broadcast")


def test_wrong_arity_and_unknown_attribute():
    x = Var("x", T(3))
    a = Var("a", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, Call(ADD, [x], {}, T(3)))])], a))
    one_problem(m, "binding 'a'", "R.add expects 2 arguments, got 1")
    b = Var("b", T(3))
    m2 = mod(main=fn([x], [BindingBlock([VarBinding(b, Call(ADD, [x, x], {"axis": 1}, T(3)))])], b))
    one_problem(m2, "R.add has no attribute 'axis'")


def test_attribute_schema_checks_with_a_real_attribute_op():
    summ = R.sum  # registered by retrograd.ops: a missing op fails here, it is not skipped
    x = Var("x", T(3, 4))
    a = Var("a", T(4))
    good = call(summ, x, axis=[0])
    assert well_formed(mod(main=fn([x], [BindingBlock([VarBinding(a, good)])], a))) == []
    missing = Call(summ, [x], {"axis": (0,)}, T(4))
    b = Var("b", T(4))
    p = well_formed(mod(main=fn([x], [BindingBlock([VarBinding(b, missing)])], b)))
    assert any("missing attribute 'keepdims'" in s for s in p), p


def test_missing_struct_info():
    x = Var("x", T(3))
    a = Var("a", None)
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, call(EXP, x))])], x))
    one_problem(m, "binding 'a'", "variable 'a' has no struct info")
    b = Var("b", T(3))
    m2 = mod(main=fn([x], [BindingBlock([VarBinding(b, Call(EXP, [x]))])], b))
    one_problem(m2, "binding 'b'", "has no struct info")
    p = Var("p", None)
    problems = well_formed(mod(main=Function([p], SeqExpr([], p, None), T(3))))
    assert any("parameter 'p'" in s and "no struct info" in s for s in problems), problems


def test_nested_call_argument_not_in_normal_form():
    x = Var("x", T(3))
    a = Var("a", T(3))
    nested = Call(ADD, [Call(EXP, [x], {}, T(3)), x], {}, T(3))
    one_problem(mod(main=fn([x], [BindingBlock([VarBinding(a, nested)])], a)), "argument 0 of R.add", "A-normal form")


def test_nested_argument_is_still_checked_for_scoping():
    x, ghost = Var("x", T(3)), Var("ghost", T(3))
    a = Var("a", T(3))
    nested = Call(ADD, [Call(EXP, [ghost], {}, T(3)), x], {}, T(3))
    problems = well_formed(mod(main=fn([x], [BindingBlock([VarBinding(a, nested)])], a)))
    assert len(problems) == 2 and any("undefined variable 'ghost'" in p for p in problems), problems


def test_if_condition_must_be_a_bool_scalar():
    c, x = Var("c", T(3)), Var("x", T(3))
    r = Var("r", T(3))
    branch = lambda: SeqExpr([], x, T(3))  # noqa: E731
    m = mod(main=fn([c, x], [BindingBlock([VarBinding(r, If(c, branch(), branch(), T(3)))])], r))
    one_problem(m, "binding 'r'", "If condition has type", "expected a boolean scalar")
    f = Var("f", TensorStructInfo((), "float32"))
    m2 = mod(main=fn([f, x], [BindingBlock([VarBinding(r2 := Var("r", T(3)), If(f, branch(), branch(), T(3)))])], r2))
    one_problem(m2, "If condition")
    p = Var("p", PrimStructInfo("bool"))
    m3 = mod(main=fn([p, x], [BindingBlock([VarBinding(r3 := Var("r", T(3)), If(p, branch(), branch(), T(3)))])], r3))
    assert well_formed(m3) == []


def test_tuple_index_out_of_range_and_non_tuple():
    x = Var("x", T(3))
    t = Var("t", TupleStructInfo([T(3), T(3)]))
    g = Var("g", T(3))
    m = mod(
        main=fn([x], [BindingBlock([VarBinding(t, Tuple([x, x], TupleStructInfo([T(3), T(3)]))),
                                     VarBinding(g, TupleGetItem(t, 2, T(3)))])], g)
    )
    one_problem(m, "binding 'g'", "tuple index 2 out of range for a tuple of 2 fields")
    h = Var("h", T(3))
    m2 = mod(main=fn([x], [BindingBlock([VarBinding(h, TupleGetItem(x, 0, T(3)))])], h))
    one_problem(m2, "indexes a non-tuple value")


def test_call_to_function_not_in_module():
    x, a = Var("x", T(3)), Var("a", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, Call(GlobalVar("missing"), [x], {}, T(3)))])], a))
    one_problem(m, "binding 'a'", "calls function 'missing', which is not in the module")


def test_call_to_module_function_checked_against_its_signature():
    y = Var("y", T(3))
    callee = fn([y], [], y)
    x, a = Var("x", T(4)), Var("a", T(3))
    m = mod(f=callee, main=fn([x], [BindingBlock([VarBinding(a, Call(GlobalVar("f"), [x], {}, T(3)))])], a))
    one_problem(m, "function 'main', binding 'a'", "argument 0 of call to 'f'")
    z, b = Var("z", T(3)), Var("b", T(3))
    m2 = mod(f=callee, main=fn([z], [BindingBlock([VarBinding(b, Call(GlobalVar("f"), [z, z], {}, T(3)))])], b))
    one_problem(m2, "takes 1 arguments, got 2")


def test_return_annotation_contradicting_body():
    x = Var("x", T(3))
    one_problem(mod(main=fn([x], [], x, ret=T(4))), "function 'main'", "return annotation")


def test_constant_annotation_must_match_data():
    x, a = Var("x", T(3)), Var("a", T(3))
    bad = const(np.ones(3, "float32"))
    bad = type(bad)(bad.data, T(4))
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, Call(ADD, [x, bad], {}, T(3)))])], a))
    problems = well_formed(m)
    assert any("constant of shape (3,)" in p for p in problems), problems


def test_problems_are_all_reported_and_located_by_span():
    src = "line one\n    a = R.add(x, ghost)\n"
    span = Span("model.py", 2, 5, 2, 24, source=src)
    x, ghost = Var("x", T(3)), Var("ghost", T(3))
    a = Var("a", T(9), span=span)
    lv = DataflowVar("lv", T(3))
    m = mod(main=fn([x], [BindingBlock([VarBinding(a, call(ADD, x, ghost), span=span),
                                         VarBinding(lv, call(EXP, x))])], lv))
    problems = well_formed(m)
    assert len(problems) == 3, problems
    assert sum(p.startswith("model.py:2:5: function 'main', binding 'a'") for p in problems) == 2
    with pytest.raises(WellFormedError) as info:
        verify(m)
    assert info.value.problems == problems
    assert "3 problem(s)" in str(info.value)


def test_check_struct_info_off_skips_inference_checks():
    x, y = Var("x", T(3, 4)), Var("y", T(4))
    wrong = Var("a", T(4, 3))
    m = mod(main=fn([x, y], [BindingBlock([VarBinding(wrong, call(ADD, x, y))])], wrong))
    assert well_formed(m, check_struct_info=False) == []
    assert well_formed(m) != []


def _chain(n, bad_at=None):
    """A long chain built directly; `bad_at` makes one binding use an undefined var."""
    x = Var("x", T(4))
    ghost = Var("ghost", T(4))
    bindings = []
    prev = x
    for i in range(n):
        v = DataflowVar(f"lv{i}", T(4)) if i < n - 1 else Var("gv", T(4))
        arg = ghost if i == bad_at else x
        bindings.append(VarBinding(v, Call(ADD, [prev, arg], {}, T(4))))
        prev = v
    return mod(main=fn([x], [DataflowBlock(bindings)], prev))


@pytest.mark.slow  # 20,000 bindings: twenty recursion limits
def test_long_chain_without_recursion_error():
    n = 20_000
    assert well_formed(_chain(n)) == []
    problems = well_formed(_chain(n, bad_at=n - 2))
    assert len(problems) == 1 and f"binding 'lv{n - 2}'" in problems[0]


def test_if_and_impure_calls_inside_a_dataflow_block():
    c, x = Var("c", TensorStructInfo((), "bool")), Var("x", T(3))
    r = Var("r", T(3))
    tb = SeqExpr([], x, T(3))
    fb = SeqExpr([], x, T(3))
    m = mod(main=fn([c, x], [DataflowBlock([VarBinding(r, If(c, tb, fb, T(3)))])], r))
    one_problem(m, "binding 'r'", "an If inside a dataflow block")
    y = Var("y", T(3))
    impure = Function([y], SeqExpr([], y, T(3)), T(3), is_pure=False)
    z = Var("z", T(3))
    m2 = mod(f=impure, main=fn([x], [DataflowBlock([VarBinding(z, Call(GlobalVar("f"), [x], {}, T(3)))])], z))
    one_problem(m2, "binding 'z'", "impure call to 'f' inside a dataflow block")
    w = Var("w", T(3))
    m3 = mod(f=impure, main=fn([x], [BindingBlock([VarBinding(w, Call(GlobalVar("f"), [x], {}, T(3)))])], w))
    assert well_formed(m3) == []
