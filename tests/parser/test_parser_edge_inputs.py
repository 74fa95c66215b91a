"""Parser inputs at the edges: literals at their dtype's range, dims, string escapes, encodings and byte-order
marks, tabs and odd line breaks, long lines and names, nesting limits. Each reads as Python/TVM reads it
or is a located error: never a crash, an unlocated error or a silently wrong reading."""

from __future__ import annotations

import ast
import sys
import warnings

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError, Span
from retrograd.ir import well_formed
from retrograd.parser import parse
from retrograd.parser.lexer import MAX_INDENTS, indent_width


def fn(body: str, params: str = 'x: R.Tensor((4, 8), dtype="float32")', ret: str = "") -> str:
    return f"@R.function\ndef main({params}){ret}:\n" + "".join("    " + line + "\n" for line in body.split("\n"))


def located(text: str, fragment: str, name: str = "h.py") -> DiagnosticError:
    with pytest.raises(DiagnosticError) as info:
        parse(text, source_name=name)
    err = info.value
    assert err.span is not None and err.span.source_name == name, str(err)
    assert fragment in err.message, err.message
    return err


def roundtrips(mod) -> bool:
    return retrograd.structural_equal(parse(mod.script()), mod)


# -- crashes: raw exceptions become located errors -----------------------------------------------


@pytest.mark.parametrize(
    "text, fragment",
    [
        (fn("y = " + "9" * 5000 + "\nreturn y"), "too large"),
        (fn("y = T.int64(1e999)\nreturn y"), "takes an integer"),
        (fn('y = T.int64("a")\nreturn y'), "takes a number"),
        (fn("y = T.float32((0.5,))\nreturn y"), "takes a number"),
        (fn("return x", params='x: R.Tensor(dtype="float32", ndim=-"a")'), "expected an integer"),
        (fn('R.func_attr({{"a": 1}: 2})\nreturn x'), "dict key"),
        (fn("return x", params='x: R.Tensor(("²",), "float32")'), "cannot read dimension"),
        (fn("return x", params='x: R.Tensor(("٣",), "float32")'), "cannot read dimension"),
        (fn("y = ٣\nreturn y"), "unexpected character"),
        (fn('y = R.str("\\x")\nreturn y'), "truncated \\x escape"),
        (fn('y = R.str("\\N{NO SUCH NAME}")\nreturn y'), "Unicode character name"),
        (fn("return x", params='x: R.Tensor((4, 8), "float32"), f: R.Callable([R.Object], R.Object, purity="a")'), "expected"),
    ],
)
def test_crash_classes_are_located_errors(text, fragment):
    located(text, fragment)


@pytest.mark.parametrize(
    "expr, dtype, fragment",
    [("T.int8(1000)", "int8", "out of range"), ("T.uint8(-1)", "uint8", "out of range"),
     ("T.int64(2.5)", "int64", "takes an integer"), ("T.float16(1e6)", "float16", "out of range"),
     ("T.bool(2)", "bool", "True, False"), (str(2**63), "int64", "out of range")],
)
def test_prim_values_out_of_their_dtype_range_are_refused(expr, dtype, fragment):
    located(fn(f"y = {expr}\nreturn y"), fragment)


@pytest.mark.parametrize(
    "expr, dtype, ref",
    [("T.int8(-128)", "int8", -128), ("T.uint8(255)", "uint8", 255), ("T.int64(3.0)", "int64", 3),
     (str(2**63 - 1), "int64", 2**63 - 1), ("T.uint64(18446744073709551615)", "uint64", 2**64 - 1)],
)
def test_prim_values_at_the_range_limits_are_kept(expr, dtype, ref):
    mod = parse(fn(f"y = R.prim_value({expr})\nreturn y"))
    binding = mod["main"].body.blocks[0].bindings[0]
    assert binding.value.dtype == dtype and binding.value.value == ref
    assert roundtrips(mod)


# -- silently wrong readings -------------------------------------------------------------------


@pytest.mark.parametrize("dim, value", [("T.int64(5)", 5), ('"5"', 5), ("2 * 3", 6), ("T.int32(2) + 1", 3), ('"7 - 2"', 5)])
def test_integer_dims_are_numbers_not_symbols(dim, value):
    mod = parse(fn("return x", params=f'x: R.Tensor(({dim}, 2), "float32")'))
    assert mod["main"].params[0].struct_info.shape == (value, 2)
    out = retrograd.build(mod)["main"](np.ones((value, 2), "float32"))
    assert out.shape == (value, 2)
    assert roundtrips(mod)


@pytest.mark.parametrize("dim", ["-1", "T.int64(-1)", '"-1"', "1 - 2"])
def test_negative_annotation_dims_are_refused(dim):
    located(fn("return x", params=f'x: R.Tensor(({dim}, 3), "float32")'), "non-negative")


def test_reshape_keeps_its_inferred_minus_one():
    mod = parse(fn("y = R.reshape(x, R.shape([-1, 4]))\nreturn y"))
    assert mod["main"].ret_struct_info.shape == (8, 4)


@pytest.mark.parametrize(
    "literal",
    [r'"\¹\8\9"', r'"\101\a\U0001F600"', r'"\x41\u00e9\N{BULLET}\0\7\777"', r'"a\qb"', r"'\''", r'"\t\v\f\b\r"'],
)
def test_string_escapes_read_as_python_reads_them(literal):
    mod = parse(fn(f"y = R.str({literal})\nreturn y"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python warns of the unknown escapes it keeps
        ref = ast.literal_eval(literal)
    assert mod["main"].body.blocks[0].bindings[0].value.value == ref
    assert roundtrips(mod)


def test_printed_strings_escape_what_is_not_printable():
    value = "a\x07\u2028\x85\"\\\n😀\x00"
    mod = parse(fn(f"y = R.str({value!r})\nreturn y"))
    text = mod.script()
    line = next(line for line in text.splitlines() if "R.str(" in line)
    assert "\u2028" not in line and "\x85" not in line and "\x07" not in line
    assert roundtrips(mod)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    text = fn("return x")
    assert retrograd.structural_equal(parse("\ufeff" + text), parse(text))
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert retrograd.structural_equal(retrograd.parse_file(path), parse(text))


@pytest.mark.parametrize("data, fragment", [(b"\xff\xfea\x00b\x00", "UTF-16"), (b'x = "\xe9"\n', "not UTF-8")])
def test_files_that_are_not_utf8_are_located_errors(tmp_path, data, fragment):
    path = tmp_path / "bad.py"
    path.write_bytes(data)
    with pytest.raises(DiagnosticError, match=fragment) as info:
        retrograd.parse_file(path)
    assert info.value.span.source_name == str(path)


@pytest.mark.parametrize("prefix", ["\t", " \t", "   \t", "       \t", "        \t", "\t \t", " \t  \t   "])
def test_tabs_advance_to_the_next_multiple_of_eight_as_in_python(prefix):
    assert indent_width(prefix) == len(prefix.expandtabs(8))


def test_tab_indented_bodies_parse():
    text = '@R.function\ndef main(x: R.Tensor((2,), "float32"), c: R.Tensor((), "bool")):\n\tif c:\n\t\ty = x\n\telse:\n\t\ty = x\n\treturn y\n'
    compile(text.replace("@R.function\n", ""), "ref", "exec")  # Python reads the same indentation
    assert len(parse(text)["main"].body.blocks[0].bindings) == 1


# -- the parser and well_formed agree -----------------------------------------------------------


@pytest.mark.parametrize(
    "params, body, ret",
    [
        ('x: R.Tensor(("n",), "float32")', "return x", ' -> R.Tensor((3,), "float32")'),
        ('x: R.Tensor(("n",), "float32")', 'y: R.Tensor((2,), "float32") = R.add(x, x)\nreturn y', ""),
        ('x: R.Tensor(("n", 2), "float32")', 'y: R.Tensor((2, 2), "float32") = x\nreturn y', ""),
    ],
)
def test_narrowing_annotations_are_refused_by_the_parser_as_by_well_formed(params, body, ret):
    err = located(fn(body, params=params, ret=ret), "does not match")
    assert "match_cast" in err.message
    # The same function built without the check is rejected by well_formed: the two agree.
    loose = parse(fn(body.replace('R.Tensor((2,), "float32")', 'R.Tensor(("n",), "float32")')
                     .replace('R.Tensor((2, 2), "float32")', 'R.Tensor(("n", 2), "float32")'), params=params))
    assert well_formed(loose) == []


# -- errors: located, quoting the right line, trimmed ----------------------------------------


def test_empty_script_error_names_the_file():
    err = located("", "defines no module", name="empty.py")
    assert str(err).startswith("empty.py:1:1:")


@pytest.mark.parametrize("brk", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"])
def test_odd_line_breaks_in_comments_do_not_shift_quoted_lines(brk):
    text = fn(f"# a comment{brk}with a break\ny = R.nope(x)\nreturn y")
    err = located(text, "unknown op")
    assert err.span.line == 4
    assert "y = R.nope(x)" in str(err).splitlines()[1]


def test_long_lines_are_trimmed_around_the_caret():
    params = ", ".join(f'p{i}: R.Tensor((2,), "float32")' for i in range(25000))
    text = f"@R.function\ndef main({params}, bad: R.Tensor((2,), \"nope\")):\n    return bad\n"
    err = located(text, "unknown dtype")
    rendered = str(err)
    assert len(rendered) < 2000
    quoted, caret = rendered.splitlines()[1:3]
    assert quoted[caret.index("^") : caret.index("^") + 6] == '"nope"'


def test_a_long_name_in_a_message_and_its_note_is_cut():
    # The undefined-dim error quotes the name in its message and twice in its note: each is cut.
    name = "d" * 10000
    err = located(fn("return x", params=f'x: R.Tensor(({name}, 3), dtype="float32")'), "Undefined variable")
    rendered = str(err)
    assert len(rendered) < 13000
    assert rendered.startswith("h.py:2:")
    note, where = (n.rstrip("\n") for n in rendered.split("  note: ")[1:])
    assert len(note) <= 2000 and note.startswith("declare a symbolic dim with `ddd") and " ... " in note
    assert where == "in the annotation of parameter 'x'"


def test_source_line_counts_only_newlines():
    span = Span("f", 2, 1, source="a\x0cb\u2028c\nsecond\r\nthird")
    assert span.source_line() == "second"
    assert Span("f", 3, 1, source="a\nb").source_line() is None


def test_flat_sums_parse_and_compute():
    n = 2000
    mod = parse(fn("y = " + " + ".join(["x"] * n) + "\nreturn y"))
    x = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    np.testing.assert_allclose(retrograd.build(mod)["main"](x), n * x.astype("float64"), rtol=1e-4)
    assert roundtrips(mod)


@pytest.mark.parametrize(
    "expr, fragment",
    [
        ("R.exp(" * 300 + "x" + ")" * 300, "nested too deeply"),
        ("[" * 150 + "x" + "]" * 150, "nested too deeply"),
        ("-" * 300 + "x", "nested too deeply"),
        ("R.const(" + "[" * 150 + "1" + "]" * 150 + ")", "nested too deeply"),
    ],
)
def test_deep_nesting_is_a_located_error(expr, fragment):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        err = located(fn(f"y = {expr}\nreturn y"), fragment)
    finally:
        sys.setrecursionlimit(old)
    assert err.span.line == 3


def test_nesting_up_to_the_limit_parses_and_roundtrips():
    d = 99
    for expr in ["R.exp(" * d + "x" + ")" * d, "(" * d + "x" + ",)" * d, "-" * d + "x"]:
        mod = parse(fn(f"y = {expr}\nreturn y"))
        assert roundtrips(mod)


def test_indentation_deeper_than_the_limit_is_refused():
    # One space a level keeps the text small; the error points at the first token of the line too deep.
    depth = MAX_INDENTS + 5
    lines = ['@R.function', 'def main(x: R.Tensor((2,), "float32"), c: R.Tensor((), "bool")):']
    lines += [" " * (i + 1) + "if c:" for i in range(depth)]
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        err = located("\n".join(lines) + "\n", f"too many levels of indentation (at most {MAX_INDENTS})")
    finally:
        sys.setrecursionlimit(old)
    assert (err.span.line, err.span.col) == (2 + MAX_INDENTS, MAX_INDENTS + 1)


@pytest.mark.parametrize("dim", ['-"m"', '--"m"', '"m" + 1', '2 * "m"', 'T.min("m", 3)'])
def test_a_string_dim_inside_an_expression_is_refused(dim):
    # Python (hence TVM) refuses -"m" and "m" + 1; read as -m they named a dim nothing declares, and
    # the printed module did not parse back.
    err = located(fn("return x", params=f'x: R.Tensor(({dim}, 3), dtype="float32")'), "a string dim cannot take part")
    assert err.span.line == 2 and str(err).splitlines()[2].strip() == "^^^"


def test_string_dims_stay_names_and_expressions_of_them():
    mod = parse(fn("return x", params='x: R.Tensor(("m", "m * 2 - 1", 3), dtype="float32")'))
    assert mod["main"].params[0].struct_info.shape == ("m", "m * 2 - 1", 3)
    assert roundtrips(mod)
