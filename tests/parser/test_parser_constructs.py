"""What each construct means: parsed modules compared with modules built directly through BlockBuilder."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.ir import (
    BlockBuilder,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    Tuple,
    TupleGetItem,
    Var,
    const,
    shape_expr,
)
from retrograd.ir.block import DataflowBlock
from retrograd.ir.expr import Call, Constant, PrimValue, ShapeExpr, StringImm
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from retrograd.ir.structural import assert_structural_equal
from retrograd.ops.api import R
from retrograd.parser import parse, parse_file, print_module

F32 = "float32"


def T(*shape, dtype=F32):
    return TensorStructInfo(tuple(shape), dtype)


def build(params, emit, dataflow=False):
    """A one-function module built without the parser: emit(bb, *params) returns the result."""
    bb = BlockBuilder()
    vs = [Var(n, s) for n, s in params]
    bb.begin_scope()
    if dataflow:
        bb.begin_block(dataflow=True)
    out = emit(bb, *vs)
    if dataflow:
        out = bb.emit_output(out, "gv")
        bb.end_block()
    body = bb.end_scope(out)
    return IRModule({"main": Function(vs, body, body.struct_info)})


def script(sig: str, *lines: str, ret: str = "") -> str:
    ann = f" -> {ret}" if ret else ""
    return "@R.function\ndef main(" + sig + ")" + ann + ":\n" + "".join(f"    {line}\n" for line in lines)


def main_bindings(mod):
    return [b for blk in mod["main"].body.blocks for b in blk.bindings]


# -- values and normal form --------------------------------------------------------------------


def test_python_operators_follow_precedence():
    mod = parse(script('a: R.Tensor((3,), "float32"), b: R.Tensor((3,), "float32"), c: R.Tensor((3,), "float32")',
                       "x = a + b * c", "y = -(a - b) / c", "return x - y - c"))
    want = build([("a", T(3)), ("b", T(3)), ("c", T(3))], lambda bb, a, b, c: R.subtract(
        R.subtract(bb.emit(R.add(a, bb.emit(R.multiply(b, c)))),
                   bb.emit(R.divide(bb.emit(R.negative(bb.emit(R.subtract(a, b)))), c))), c))
    assert_structural_equal(mod, want)


def test_nested_calls_become_bindings_in_order():
    mod = parse(script('x: R.Tensor((2,), "float32"), y: R.Tensor((2,), "float32")',
                       "z = R.add(R.exp(x), R.log(y))", "return z"))
    ops = [b.value.op.name for b in main_bindings(mod)]
    assert ops == ["relax.exp", "relax.log", "relax.add"]
    want = build([("x", T(2)), ("y", T(2))], lambda bb, x, y: bb.emit(R.add(R.exp(x), R.log(y))))
    assert_structural_equal(mod, want)


def test_leaves_stay_inline():
    mod = parse(script('x: R.Tensor((2,), "float32")', "z = R.add(x, R.const(1.5))",
                       "t = (x, R.shape([2]), R.prim_value(3))", "return z"))
    z, t = main_bindings(mod)
    assert isinstance(z.value.args[1], Constant)
    assert [type(f) for f in t.value.fields] == [Var, ShapeExpr, PrimValue]


def test_omitted_attributes_take_defaults_and_lists_become_shapes():
    mod = parse(script('x: R.Tensor((2, 3), "float32")', "s = R.sum(x)", "r = R.reshape(x, [3, 2])",
                       "m = R.sum(x, [1], True)", "return (s, r, m)"))
    s, r, m = main_bindings(mod)
    assert s.value.attrs == R.sum(Var("x", T(2, 3))).attrs == {"axis": None, "keepdims": False}
    assert isinstance(r.value.args[1], ShapeExpr) and r.value.args[1].values == (3, 2)
    assert m.value.attrs == {"axis": (1,), "keepdims": True}
    want = build([("x", T(2, 3))], lambda bb, x: Tuple([
        bb.emit(R.sum(x)), bb.emit(R.reshape(x, shape_expr([3, 2]))), bb.emit(R.sum(x, axis=[1], keepdims=True))]))
    assert_structural_equal(mod, want)


def test_constants_follow_tvm_default_dtypes():
    mod = parse(script('x: R.Tensor((), "float32")', "a = R.const(1)", "b = R.const(1.5)", "c = R.const(True)",
                       'd = R.const(3, "float32")', 'e = R.const([[1, 2], [3, 4]], "float64")', "f = R.const([1, 2])",
                       "g = R.const(-7, dtype=\"int8\")", "return x"))
    got = {b.var.name_hint: b.value.data for b in main_bindings(mod)}
    ref = {"a": np.array(1, np.int32), "b": np.array(1.5, np.float32), "c": np.array(True),
           "d": np.array(3, np.float32), "e": np.array([[1, 2], [3, 4]], np.float64), "f": np.array([1, 2], np.int32),
           "g": np.array(-7, np.int8)}
    for k, v in ref.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and np.array_equal(got[k], v), k


def test_special_float_constants_roundtrip():
    mod = parse(script('x: R.Tensor((3,), "float32")', 'c = R.const([float("inf"), -float("inf"), float("nan")], "float32")',
                       "return c"))
    data = main_bindings(mod)[0].value.data
    assert np.isposinf(data[0]) and np.isneginf(data[1]) and np.isnan(data[2])
    back = parse(print_module(mod))
    assert_structural_equal(mod, back)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int64", "uint8", "bool"])
def test_constant_values_print_and_parse_back_exactly(dtype):
    rng = np.random.default_rng(7)
    if dtype == "bool":
        data = rng.random(40) < 0.5
    elif dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        data = rng.integers(info.min, info.max, size=40, endpoint=True, dtype=dtype)
    else:
        info = np.finfo(dtype)
        with np.errstate(over="ignore"):  # float16 overflows to inf on purpose: inf must round-trip too
            wide = (rng.standard_normal(30) * 10.0 ** rng.integers(-8, 8, 30)).astype(dtype)
        data = np.concatenate([
            wide,
            np.array([0.0, -0.0, info.tiny, info.max, -info.max, info.eps, info.smallest_subnormal, 0.1, 1 / 3, 2.5],
                     dtype=dtype),
        ])
    for shape, array in (((8, 5), data.reshape(8, 5)), ((4,), data[:4])):  # metadata section and inline
        mod = IRModule({"main": _const_func(const(array, dtype))})
        back = parse(print_module(mod))
        got = main_bindings(back)[0].value.data
        assert got.dtype == array.dtype and got.shape == shape
        assert got.tobytes() == np.ascontiguousarray(array).tobytes()


def _const_func(c):
    bb = BlockBuilder()
    bb.begin_scope()
    v = bb.emit(c, "c")
    return Function([], bb.end_scope(v), v.struct_info)


def test_metadata_section_holds_large_constants():
    big = np.arange(20, dtype=np.float32).reshape(4, 5) / 8
    small = np.arange(16, dtype=np.float32)
    mod = IRModule({"main": _const_func(const(big, F32)), "other": _const_func(const(small, F32))})
    text = print_module(mod)
    assert text.index("metadata = {") < text.index("@I.ir_module")
    assert 'metadata["relax.expr.Constant"][0]' in text
    assert text.count("R.const(") == 2  # one in the metadata section, one inline
    back = parse(text)
    assert np.array_equal(main_bindings(back)[0].value.data, big)
    assert_structural_equal(mod, back)


def test_strings_and_escapes():
    mod = parse(script('x: R.Tensor((1,), "float32")', r's = R.str("a \"q\" \\ b\n\tz")', "u = R.str('it\\'s')",
                       "return (s, u)"))
    s, u = main_bindings(mod)
    assert s.value.value == 'a "q" \\ b\n\tz' and u.value.value == "it's"
    assert isinstance(s.value, StringImm) and isinstance(s.var.struct_info, ObjectStructInfo)
    assert_structural_equal(mod, parse(print_module(mod)))


def test_prim_values():
    mod = parse(script('x: R.Tensor((1,), "float32"), k: R.Prim("int64")', "a = R.prim_value(3)",
                       "b = R.prim_value(T.float32(0.5))", "c: R.Prim(\"int64\") = R.prim_value(-2)", "d = 7",
                       "return (a, b, c, d, k)"))
    a, b, c, d = (x.value for x in main_bindings(mod))
    assert (a.value, a.dtype, b.value, b.dtype, c.value, d.value, d.dtype) == (3, "int64", 0.5, "float32", -2, 7, "int64")
    # An equivalent annotation keeps the inferred struct info, known value included.
    assert main_bindings(mod)[2].var.struct_info == PrimStructInfo("int64", -2)
    assert mod["main"].params[1].struct_info == PrimStructInfo("int64")


# -- annotations --------------------------------------------------------------------------------


def test_annotations_less_specific_than_inference_are_kept():
    mod = parse(script('x: R.Tensor((3, 4), "float32")', 'a: R.Tensor(ndim=2, dtype="float32") = R.exp(x)',
                       'b: R.Tensor(dtype="float32") = R.exp(x)', "c: R.Object = R.exp(x)",
                       'd: R.Tensor((3, 4), "float32") = R.exp(x)', "return d"))
    a, b, c, d = (x.var.struct_info for x in main_bindings(mod))
    assert a == TensorStructInfo(None, F32, 2)
    assert b == TensorStructInfo(None, F32, -1)
    assert c == ObjectStructInfo()
    assert d == T(3, 4)


def test_annotation_forms_are_equivalent():
    forms = ['R.Tensor((3, "n"), "float32")', 'R.Tensor((3, n), dtype="float32")', 'R.Tensor(shape=(3, "n"), dtype="float32")']
    # A bare name is declared first (TVM's parser, and ours, reject an undeclared one).
    mods = [parse(("n = T.int64()\n" if "(3, n)" in f else "") + script(f"x: {f}", "return x")) for f in forms]
    for m in mods:
        assert m["main"].params[0].struct_info == T(3, "n")
        assert_structural_equal(m, mods[0])
    assert parse(script('x: R.Tensor("float32", ndim=1)', "return x"))["main"].params[0].struct_info == \
        TensorStructInfo(None, F32, 1)


def test_struct_info_annotations():
    mod = parse(script('t: R.Tuple(R.Tensor((2,), "float32"), R.Tuple(R.Shape([2, 3]), R.Prim("bool"))), '
                       's: R.Shape(ndim=3), u: R.Shape, o: R.Object, e: R.Tuple, z: R.Tensor', "return t"))
    t, s, u, o, e, z = (p.struct_info for p in mod["main"].params)
    assert t == TupleStructInfo([T(2), TupleStructInfo([ShapeStructInfo((2, 3)), PrimStructInfo("bool")])])
    assert s == ShapeStructInfo(None, 3) and u == ShapeStructInfo(None, -1)
    assert o == ObjectStructInfo() and e == TupleStructInfo([]) and z == TensorStructInfo(None, "", -1)


@pytest.mark.parametrize(("written", "canonical"), [
    ("n*4", "n * 4"),
    ("(n + 1) * 2", "(n + 1) * 2"),
    ("n + (m + 1)", "n + (m + 1)"),
    ("(n + m) + 1", "n + m + 1"),
    ("n - (m - 1)", "n - (m - 1)"),
    ("n // 2 % 3", "n // 2 % 3"),
    ("T.min(3, n) - T.min(1, n)", "T.min(3, n) - T.min(1, n)"),
    ("-n + 4", "-n + 4"),
])
@pytest.mark.parametrize("quoted", [False, True])
def test_symbolic_dims_are_canonical(written, canonical, quoted):
    dim = f'"{written}"' if quoted else written
    mod = parse(script(f'x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(({dim},), "float32")', "return y"))
    assert mod["main"].params[1].struct_info.shape == (canonical,)
    assert_structural_equal(mod, parse(print_module(mod)))


def test_symbolic_declarations_are_accepted():
    typevar = parse('n = TypeVar("n")\n' + script('x: R.Tensor((n, 2), "float32")', "return x"))
    in_body = parse(script('x: R.Tensor(("n", 2), "float32")', "n = T.int64()", "y: R.Tensor((n, 2), \"float32\") = x",
                           "return y"))
    assert typevar["main"].params[0].struct_info == T("n", 2)
    assert main_bindings(in_body)[0].var.struct_info == T("n", 2)


# -- blocks, scopes, control flow -----------------------------------------------------------------


def test_dataflow_outputs_are_vars_others_dataflow_vars():
    mod = parse(script('x: R.Tensor((2,), "float32")', "with R.dataflow():", "    a = R.exp(x)", "    b = R.exp(a)",
                       "    c = R.exp(b)", "    R.output(a, c)", "d = R.add(a, c)", "return d"))
    blocks = mod["main"].body.blocks
    assert isinstance(blocks[0], DataflowBlock) and not isinstance(blocks[1], DataflowBlock)
    kinds = {b.var.name_hint: type(b.var) for b in blocks[0].bindings}
    assert kinds == {"a": Var, "b": DataflowVar, "c": Var}


def test_rebinding_a_name_in_a_dataflow_block_outputs_the_last():
    mod = parse(script('x: R.Tensor((2,), "float32")', "with R.dataflow():", "    a = R.exp(x)", "    a = R.sin(a)",
                       "    R.output(a)", "return a"))
    first, second = mod["main"].body.blocks[0].bindings
    assert type(first.var) is DataflowVar and type(second.var) is Var
    assert second.value.args[0] is first.var and mod["main"].body.body is second.var


def test_if_builds_an_if_binding_with_branch_scopes():
    mod = parse(script('c: R.Tensor((), "bool"), x: R.Tensor((2,), "float32")', "if c:", "    t = R.exp(x)",
                       "    y = R.add(t, x)", "else:", "    y = x", "return y"))
    (b,) = main_bindings(mod)
    assert isinstance(b.value, If) and b.var.name_hint == "y"
    tb, fb = b.value.true_branch, b.value.false_branch
    assert [x.var.name_hint for blk in tb.blocks for x in blk.bindings] == ["t", "y"]
    assert fb.blocks == () and fb.body is mod["main"].params[1]
    want_c, want_x = Var("c", T(dtype="bool")), Var("x", T(2))
    bb = BlockBuilder()
    bb.begin_scope()
    bb.begin_scope()
    t = bb.emit(R.exp(want_x), "t")
    tb2 = bb.end_scope(bb.emit(R.add(t, want_x), "y"))
    bb.begin_scope()
    fb2 = bb.end_scope(want_x)
    y = bb.emit(If(want_c, tb2, fb2), "y")
    want = IRModule({"main": Function([want_c, want_x], bb.end_scope(y), y.struct_info)})
    assert_structural_equal(mod, want)


def test_branch_variables_do_not_leak():
    src = script('c: R.Tensor((), "bool"), x: R.Tensor((2,), "float32")', "if c:", "    t = R.exp(x)", "    y = t",
                 "else:", "    y = x", "return t")
    with pytest.raises(Exception, match="undefined variable 't'"):
        parse(src)


def test_module_functions_any_order_and_both_spellings():
    src = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        cls = Module
        a = cls.g(x)
        b = Module.g(a)
        return b

    @R.function(private=True)
    def g(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        return x
"""
    mod = parse(src)
    assert list(mod.keys()) == ["main", "g"] and mod["g"].private
    a, b = main_bindings(mod)
    assert isinstance(a.value.op, GlobalVar) and a.value.op.name_hint == "g"
    assert a.value.op.struct_info == FuncStructInfo([T("n")], T("n"))
    assert a.var.struct_info == T(2)  # the callee's symbolic dim bound by the argument
    text = print_module(mod)
    assert "        cls = Module\n" in text and "cls.g(x)" in text and "cls.g(a)" in text
    assert_structural_equal(mod, parse(text))


def test_function_decorator_flags_and_attrs():
    src = """@I.ir_module
class Module:
    I.module_attrs({"a": [1, 2], "b": {"c": "d"}})
    @R.function(pure=False, private=True)
    def main(x: R.Tensor((2,), "float32")):
        R.func_attr({"k": 1.5, "flag": True})
        return x
"""
    mod = parse(src)
    f = mod["main"]
    assert (f.is_pure, f.private, f.attrs) == (False, True, {"k": 1.5, "flag": True})
    assert mod.attrs == {"a": (1, 2), "b": {"c": "d"}}
    assert_structural_equal(mod, parse(print_module(mod)))


def test_single_function_script_and_parse_file(tmp_path):
    p = tmp_path / "one.py"
    p.write_text(script('x: R.Tensor((2,), "float32")', "y = R.exp(x)", "return y"))
    mod = parse_file(p)
    assert list(mod.keys()) == ["main"]
    with pytest.raises(Exception) as info:
        parse_file(_write(tmp_path / "bad.py", script('x: R.Tensor((2,), "float32")', "return q")))
    assert str(info.value).startswith(f"{tmp_path / 'bad.py'}:3:12: name error:")


def _write(path, text):
    path.write_text(text)
    return path


def test_tabs_and_continuations():
    src = "@R.function\ndef main(x: R.Tensor((2,), \"float32\")):\n\ty = R.add(x, \\\n\t\tx)\n\treturn y\n"
    mod = parse(src)
    (b,) = main_bindings(mod)
    assert b.value.op.name == "relax.add" and b.span.line == 3


def test_tuple_syntax_variants():
    mod = parse(script('x: R.Tensor((2,), "float32")', "a = x, x", "b = (x, (x,))", "c = R.tuple(x)", "d = R.tuple()",
                       "e = b[1][0]", "return a, e"))
    a, b, c, d, inner, e = main_bindings(mod)
    assert len(a.value.fields) == 2 and isinstance(b.value.fields[1], Tuple)
    assert len(c.value.fields) == 1 and d.value.fields == () and d.var.struct_info == TupleStructInfo([])
    assert isinstance(inner.value, TupleGetItem) and inner.value.index == 1 and e.value.index == 0
    assert isinstance(mod["main"].body.body, Tuple)


def test_positional_attributes_print_as_tvm_does():
    mod = parse(script('x: R.Tensor((5, 6), "float32")', "a = R.strided_slice(x, axes=[0], begin=[1], end=[3])",
                       "b = R.triu(x, k=1)", "return (a, b)"))
    text = print_module(mod)
    assert "R.strided_slice(x, (0,), (1,), (3,), assume_inbound=False)" in text
    assert "R.triu(x, 1)" in text
    assert_structural_equal(mod, parse(text))


def test_calls_keep_spans_of_their_source():
    src = script('x: R.Tensor((2,), "float32")', "y = R.exp(R.sin(x))", "return y")
    mod = parse(src, source_name="s.py")
    inner, outer = main_bindings(mod)
    assert (inner.value.span.line, inner.value.span.col, inner.value.span.end_col) == (3, 15, 23)
    assert (outer.value.span.line, outer.value.span.col, outer.value.span.end_col) == (3, 9, 24)
    assert outer.var.span.col == 5 and outer.span.source_name == "s.py"


def test_call_argument_from_inside_a_call_of_a_module_function():
    src = """@I.ir_module
class Module:
    @R.function
    def f(a: R.Tensor((2,), "float32"), b: R.Tuple(R.Tensor((2,), "float32"), R.Tensor((2,), "float32"))):
        return a

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        cls = Module
        y = cls.f(R.exp(x), (x, x))
        return y
"""
    mod = parse(src)
    e, y = main_bindings(mod)
    assert e.value.op.name == "relax.exp" and y.value.args[0] is e.var and isinstance(y.value.args[1], Tuple)
    assert isinstance(y.value, Call)
