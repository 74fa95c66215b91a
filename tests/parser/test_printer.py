"""The printer: TVMScript conventions, unique names, explicit attributes, and text that parses back."""

from __future__ import annotations

import re

import numpy as np
import pytest

import retrograd
from retrograd.ir import (
    BlockBuilder,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    Tuple,
    Var,
    const,
    prim_value,
    shape_expr,
)
from retrograd.ir.expr import Call, StringImm
from retrograd.ir.struct_info import FuncStructInfo, PrimStructInfo, TensorStructInfo
from retrograd.ir.structural import assert_structural_equal
from retrograd.ops.api import R
from retrograd.parser import parse, print_expr, print_function, print_module
from retrograd.parser.printer import format_sinfo


def T(*shape, dtype="float32"):
    return TensorStructInfo(tuple(shape), dtype)


def roundtrip(mod: IRModule) -> str:
    text = print_module(mod)
    back = parse(text)
    assert_structural_equal(mod, back)
    assert print_module(back) == text
    return text


def one(params, emit, name="main", dataflow=False, global_sinfo=None, **func_kw) -> Function:
    bb = BlockBuilder(global_sinfo=global_sinfo)
    bb.begin_scope()
    if dataflow:
        bb.begin_block(dataflow=True)
    out = emit(bb, *params)
    if dataflow:
        out = bb.emit_output(out, "gv")
        bb.end_block()
    body = bb.end_scope(out)
    return Function(params, body, body.struct_info, **func_kw)


def test_every_binding_annotated_and_every_attribute_explicit():
    x = Var("x", T(2, 3))
    f = one([x], lambda bb, x: bb.emit(R.sum(bb.emit(R.nn.log_softmax(x)), axis=[1])), dataflow=True)
    text = roundtrip(IRModule({"main": f}))
    body = [line.strip() for line in text.splitlines() if " = " in line]
    assert all(re.match(r"^\w+: R\.\w+", line) for line in body), body
    assert "R.nn.log_softmax(x, axis=-1)" in text
    assert "R.sum(lv, axis=[1], keepdims=False)" in text
    assert 'def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2,), dtype="float32"):' in text
    assert text.startswith("# from tvm.script import ir as I\n# from tvm.script import relax as R\n")
    assert "tir as T" not in text


def test_names_are_kept_where_unique_else_suffixed():
    x = Var("x", T(2))
    f = one([x], lambda bb, x: bb.emit(R.exp(bb.emit(R.exp(bb.emit(R.exp(x), "x")), "x_1")), "x"))
    text = roundtrip(IRModule({"main": f}))
    assert re.findall(r"^\s+(\w+):", text, re.M) == ["x_1", "x_1_1", "x_2"]


def test_bad_and_reserved_names_are_rewritten():
    x = Var("R", T(2))
    f = one([x], lambda bb, x: bb.emit(R.exp(bb.emit(R.exp(bb.emit(R.exp(x), "2nd")), "a.b")), "lambda"))
    text = roundtrip(IRModule({"main": f}))
    assert "def main(R_: " in text
    assert re.findall(r"^\s+(\w+):", text, re.M) == ["v2nd", "a_b", "lambda_"]


def test_dataflow_block_lists_its_outputs():
    x = Var("x", T(2))

    def emit(bb, x):
        bb.begin_block(dataflow=True)
        a = bb.emit_output(R.exp(x), "a")
        b = bb.emit(R.exp(a), "b")
        c = bb.emit_output(R.exp(b), "c")
        bb.end_block()
        return Tuple([a, c])

    text = roundtrip(IRModule({"main": one([x], emit)}))
    assert "            R.output(a, c)\n        return (a, c)\n" in text


def test_if_prints_both_branches_binding_the_name():
    c, x = Var("c", T(dtype="bool")), Var("x", T(2))

    def emit(bb, c, x):
        bb.begin_scope()
        tb = bb.end_scope(bb.emit(R.exp(x), "y"))
        bb.begin_scope()
        fb = bb.end_scope(x)
        return bb.emit(If(c, tb, fb), "y")

    text = roundtrip(IRModule({"main": one([c, x], emit)}))
    assert re.search(
        r"if c:\n\s+y_then: .* = R.exp\(x\)\n\s+y: (.*) = y_then\n\s+else:\n\s+y: \1 = x\n", text
    ), text


def test_cls_line_only_in_functions_calling_others():
    x = Var("x", T(2))
    g = one([Var("a", T(2))], lambda bb, a: bb.emit(R.exp(a)))
    gv = GlobalVar("g", g.struct_info)
    f = one([x], lambda bb, x: bb.emit(Call(gv, [x])))
    text = roundtrip(IRModule({"main": f, "g": g}))
    assert text.count("cls = Module") == 1
    assert "        cls = Module\n        lv: R.Tensor((2,), dtype=\"float32\") = cls.g(x)\n" in text


def test_symbolic_dims_quoted_in_parameters_bare_elsewhere():
    x = Var("x", T("n", 4))
    f = one([x], lambda bb, x: bb.emit(R.reshape(x, shape_expr(["n * 4"]))))
    text = roundtrip(IRModule({"main": f}))
    assert 'def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor((n * 4,), dtype="float32"):' in text
    assert "R.reshape(x, R.shape([n * 4]))" in text


def test_tir_header_only_when_needed():
    x = Var("x", T(2))
    f = one([x], lambda bb, x: Tuple([x, bb.emit(prim_value(0.5, "float32"), "p")]))
    text = roundtrip(IRModule({"main": f}))
    assert "# from tvm.script import tir as T\n" in text and "R.prim_value(T.float32(0.5))" in text


def test_constants_inline_up_to_16_elements():
    x = Var("x", T(4, 4))
    f = one([x], lambda bb, x: bb.emit(R.add(x, const(np.arange(16, dtype="float32").reshape(4, 4)))))
    text = roundtrip(IRModule({"main": f}))
    assert "metadata" not in text
    assert 'R.const([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]], "float32")' in text
    y = Var("x", T(17))
    g = one([y], lambda bb, y: bb.emit(R.add(y, const(np.ones(17, "float32")))))
    text = roundtrip(IRModule({"main": g}))
    assert 'R.add(x, metadata["relax.expr.Constant"][0])' in text


def test_shared_constant_is_one_metadata_entry():
    big = const(np.ones((5, 5), "float32"))
    x = Var("x", T(5, 5))
    f = one([x], lambda bb, x: bb.emit(R.add(bb.emit(R.add(x, big)), big)))
    text = roundtrip(IRModule({"main": f}))
    assert text.count("R.const(") == 1 and text.count('metadata["relax.expr.Constant"][0]') == 2


def test_decorator_flags_attrs_and_empty_module():
    x = Var("x", T(2))
    f = one([x], lambda bb, x: x, private=True, is_pure=False, attrs={"k": [1, 2]})
    text = roundtrip(IRModule({"main": f}, attrs={"m": "v"}))
    assert "    I.module_attrs({\"m\": \"v\"})\n" in text
    assert "    @R.function(private=True, pure=False)\n" in text
    assert '        R.func_attr({"k": [1, 2]})\n' in text
    empty = print_module(IRModule({}))
    assert empty.endswith("class Module:\n    pass\n") and len(parse(empty)) == 0


def test_print_function_and_expr():
    x = Var("x", T(2))
    f = one([x], lambda bb, x: bb.emit(R.exp(x), "y"))
    text = print_function(f, "helper")
    assert text.splitlines()[3:5] == ["@R.function", 'def helper(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):']
    assert_structural_equal(parse(text)["helper"], f)
    assert print_expr(R.sum(x, axis=[0])) == "R.sum(x, axis=[0], keepdims=False)"
    assert print_expr(Tuple([x, StringImm("a\"b")])) == '(x, R.str("a\\"b"))'
    assert print_expr(f).startswith("# from tvm.script import ir as I")


def test_module_script_and_str_use_the_printer():
    x = Var("x", T(2))
    mod = IRModule({"main": one([x], lambda bb, x: bb.emit(R.exp(x)))})
    assert mod.script() == str(mod) == print_module(mod)


@pytest.mark.parametrize(("sinfo", "text"), [
    (T(3, "n"), 'R.Tensor((3, n), dtype="float32")'),
    (T(dtype="int8"), 'R.Tensor((), dtype="int8")'),
    (TensorStructInfo(None, "float16", 3), 'R.Tensor(dtype="float16", ndim=3)'),
    (TensorStructInfo(None, "", -1), "R.Tensor"),
    (TensorStructInfo((5,), ""), "R.Tensor((5,))"),
    (PrimStructInfo("int64", 3), 'R.Prim("int64")'),
    (FuncStructInfo([T(2)], T(2), False), 'R.Callable([R.Tensor((2,), dtype="float32")], R.Tensor((2,), dtype="float32"), purity=False)'),
])
def test_format_sinfo(sinfo, text):
    assert format_sinfo(sinfo) == text


def test_printing_is_deterministic_and_independent_of_var_identity():
    def make():
        x = Var("x", T(2))
        return IRModule({"main": one([x], lambda bb, x: bb.emit(R.add(bb.emit(R.exp(x)), bb.emit(R.exp(x)))))})

    assert print_module(make()) == print_module(make())


def test_dataflow_vars_do_not_escape_in_text():
    x = Var("x", T(2))

    def emit(bb, x):
        bb.begin_block(dataflow=True)
        a = bb.emit(R.exp(x), "a")
        out = bb.emit_output(R.exp(a), "out")
        bb.end_block()
        return out

    mod = IRModule({"main": one([x], emit)})
    back = parse(roundtrip(mod))
    (block,) = back["main"].body.blocks
    assert [type(b.var) for b in block.bindings] == [DataflowVar, Var]


def test_rank_zero_shapes_and_tensors_print_and_read_back():
    text = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=0), s: R.Shape(ndim=0)) -> R.Tensor(dtype="float32", ndim=0):
        return x
"""
    mod = retrograd.parse(text)
    printed = mod.script()
    assert "R.Shape(ndim=0)" in printed or "R.Shape([])" in printed
    assert 'R.Tensor((), dtype="float32")' in printed
    again = retrograd.parse(printed)
    retrograd.assert_structural_equal(again, mod)
    assert again["main"].params[1].struct_info.ndim == 0
