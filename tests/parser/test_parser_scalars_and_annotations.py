"""Scalars and annotations across the parser, the printer, well_formed and TVM: empty constants out of passes
print as themselves, the parser and well_formed agree on return annotations, TVM's scalar spellings read,
errors in a binding name it, and a byte-order mark moves no error (classes a fuzzing campaign found)."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError, GradientError
from retrograd.ir import well_formed
from retrograd.ir.expr import Call, Constant
from retrograd.passes import parse_pipeline

DTYPES = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]
EMPTY = [(0,), (0, 0), (2, 0), (0, 5), (1, 0, 2, 2), (1, 4, 0, 0), (3, 0, 1)]


def _error(text, source_name="t.py"):
    with pytest.raises(DiagnosticError) as info:
        retrograd.parse(text, source_name=source_name)
    return info.value


def _round_trip(mod):
    again = retrograd.parse(mod.script())
    assert retrograd.structural_equal(mod, again), mod.script()
    assert well_formed(again) == []
    return again


def _body_value(mod, func="main"):
    body = mod[func].body
    return body.body if not body.blocks else body.blocks[-1].bindings[-1].value


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", EMPTY, ids=str)
def test_an_empty_constant_from_fold_constant_prints_as_itself(shape, dtype):
    text = (f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n'
            f'    y = R.ones({list(shape)}, dtype="{dtype}")\n    return y\n')
    out = parse_pipeline("fold-constant")(retrograd.parse(text))
    const = _body_value(out)
    assert isinstance(const, Constant) and const.data.shape == shape and str(const.data.dtype) == dtype
    again = _round_trip(out)
    back = _body_value(again)
    assert isinstance(back, Constant) and back.data.shape == shape and str(back.data.dtype) == dtype
    assert retrograd.build(again)["main"](np.zeros(2, "float32")).shape == shape


def test_zeros_of_a_symbolic_or_nonempty_shape_stay_calls():
    text = ('@R.function\ndef main(x: R.Tensor(("n",), "float32")):\n    n = T.int64()\n'
            '    a = R.zeros(R.shape([n, 0]), "float32")\n    b = R.zeros(R.shape([2, 3]), "float32")\n'
            '    return (a, b)\n')
    mod = retrograd.parse(text)
    a, b = (bd.value for bd in mod["main"].body.blocks[0].bindings)
    assert isinstance(a, Call) and isinstance(b, Call)


GRADIENT_CASES = {
    "tanh": ('p0: R.Tensor((1, 0, 2, 2), "float32")', "y = R.tanh(p0)\n        z = R.sum(y)", (1, 0, 2, 2)),
    "exp_sum": ('x: R.Tensor((0, 5), "float32")',
                "e = R.exp(R.sum(x, axis=[1], keepdims=True))\n        z = R.sum(e)", (0, 5)),
    "checkpoint": ('x: R.Tensor((1, 4, 0, 0), "float32")',
                   "a = R.grad.start_checkpoint(x)\n        b = R.nn.relu(a)\n        c = R.grad.end_checkpoint(b)\n"
                   "        z = R.sum(R.exp(c))", (1, 4, 0, 0)),
}


@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_the_gradient_of_an_empty_tensor_prints_as_itself_and_runs(case):
    param, body, shape = GRADIENT_CASES[case]
    text = f"@I.ir_module\nclass M:\n    @R.function\n    def main({param}):\n        {body}\n        return z\n"
    adj = parse_pipeline("gradient(func=main)")(retrograd.parse(text))
    if case != "checkpoint":  # the adjoint holds an empty constant, printed as R.zeros of its shape
        assert "R.zeros(R.shape([" in adj.script()
    again = _round_trip(adj)
    loss, (grad,) = retrograd.build(again)["main_adjoint"](np.zeros(shape, "float32"))
    assert float(loss) == 0.0 and grad.shape == shape and grad.dtype == np.float32


def test_a_symbolic_dim_only_in_the_return_annotation_is_accepted_by_both():
    text = '@R.function\ndef main(x: R.Tensor((2,), dtype="float32")) -> R.Tensor(("m",), dtype="float32"):\n    return x\n'
    mod = retrograd.parse(text)
    assert well_formed(mod) == []
    _round_trip(mod)
    np.testing.assert_array_equal(retrograd.build(mod)["main"](np.array([1, 2], "float32")), [1, 2])


@pytest.mark.parametrize("ret", ['R.Tensor((2,), dtype="float32")', 'R.Tensor(("n + 1",), dtype="float32")',
                                 'R.Tensor((3,), dtype="float32")'])
def test_a_return_annotation_that_does_not_hold_is_a_located_parse_error(ret):
    text = f'n = T.int64()\n@R.function\ndef main(x: R.Tensor((n,), dtype="float32")) -> {ret}:\n    return x\n'
    err = _error(text)
    assert (err.span.line, err.span.col) == (3, 49)
    assert "does not match" in str(err)


def test_the_issue_example_with_an_undeclared_dim_is_located_too():
    err = _error('@R.function\ndef main(x: R.Tensor((n,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):\n    return x\n')
    assert (err.span.line, err.span.col) == (2, 23) and "Undefined variable: n" in str(err)


@pytest.mark.parametrize("spelling, value", [
    ('T.float64("inf")', np.inf), ('T.float32("-inf")', -np.inf), ('T.float16("inf")', np.inf),
    ('T.float64("Infinity")', np.inf), ("T.float32(9.9999999999999998e-46)", np.float32(1e-45)),
    ("T.float64(" + str(int(1e300)) + ".0)", 1e300),
])
def test_tvm_scalar_spellings_read_as_the_values_they_name(spelling, value):
    text = f'@R.function\ndef main(x: R.Tensor((5,), "float32")):\n    y = R.clip(x, -1, {spelling})\n    return y\n'
    mod = retrograd.parse(text)
    again = _round_trip(mod)
    x = np.array([-3, -0.5, 0, 2, np.inf], "float32")
    with np.errstate(over="ignore"):
        want = np.maximum(np.minimum(x, np.float32(value)), -1)  # TVM's clip (topi): max(min(x, a_max), a_min)
    np.testing.assert_array_equal(retrograd.build(again)["main"](x), want)


def test_nan_reads_and_prints_as_tvm_spells_it():
    text = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.clip(x, T.float64("-inf"), T.float32("nan"))\n    return y\n'
    mod = retrograd.parse(text)
    script = mod.script()
    assert 'R.prim_value(T.float32("nan"))' in script and 'R.prim_value(T.float64("-inf"))' in script
    lo, hi = _body_value(_round_trip(mod)).args[1:]
    assert lo.value == -np.inf and np.isnan(hi.value)


def test_tvm_printed_scalars_read_back_with_their_values():
    """The spellings come from TVM's own printer (FloatImm.script()) when TVM is installed."""
    from optional import need

    tirx = need("tvm.tirx")
    for dtype in ("float16", "float32", "float64"):
        for v in (np.inf, -np.inf, 0.1, -0.0, 1.5):
            spelled = tirx.FloatImm(dtype, float(v)).script()
            text = f"@R.function\ndef main(x: R.Tensor((3,), \"{dtype}\")):\n    y = R.clip(x, {spelled}, T.float64(\"inf\"))\n    return y\n"
            x = np.array([-2, 0, 2], dtype)
            got = retrograd.build(retrograd.parse(text))["main"](x)
            np.testing.assert_array_equal(got, np.maximum(x, np.array(v, dtype)))


@pytest.mark.parametrize("spelling, message", [('T.float32("x")', 'T.float32(...) takes a number or "inf"'),
                                               ('T.int64("inf")', "T.int64(...) takes a number")])
def test_other_strings_in_a_typed_scalar_are_located_errors(spelling, message):
    err = _error(f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.clip(x, 0, {spelling})\n    return y\n')
    assert (err.span.line, err.span.col) == (3, 22) and message in str(err)


def test_a_huge_shape_value_is_located_and_names_the_binding():
    err = _error('@R.function\ndef main(x: R.Tensor((4,), "float32")):\n'
                 '    y = R.zeros(R.shape([18446744073709551616]), "float32")\n    return y\n')
    assert (err.span.line, err.span.col) == (3, 26)
    assert "beyond the int64 range" in str(err) and "'y'" in str(err)


def test_an_annotation_error_names_the_binding_too():
    err = _error('@R.function\ndef main(x: R.Tensor((4,), "float32")):\n    z: R.Tensor((4,), dtype="nope") = x\n    return z\n')
    assert err.span.line == 3 and "'z'" in str(err)


IF_TAIL = ('@R.function\ndef main(a: R.Tensor((), "bool"), x: R.Tensor((2,), "float32")):\n'
           '    if a:\n        r: R.Tensor((2,), "float32") = R.exp(x)\n    else:\n        {else_}\n    return r\n')


@pytest.mark.parametrize("else_", ['r: R.Tensor((0,), "float32") = x', 'r: R.Tensor((3,), "float32") = R.sin(x)',
                                   'r: R.Tensor((2,), "nope") = x'])
def test_an_annotation_error_on_a_branch_result_names_the_binding(else_):
    # The last binding of an if branch is read apart from the others (a leaf value binds no var).
    err = _error(IF_TAIL.format(else_=else_))
    assert err.span.line == 6 and "'r'" in str(err)


BOM_CASES = [
    '@R.functio\ndef main(x: R.Tensor((4,), "float32")):\n    return x\n',
    '@R.function\ndef main(x: R.Tensor((4,), "float32")) -> R.Tensor((5,), "float32"):\n    return x\n',
    '@R.function\ndef main(x: R.Tensor((4,), "float32")):\n    y = R.add(x, q)\n    return y\n',
    '@R.function $\n',
]


@pytest.mark.parametrize("text", BOM_CASES)
def test_a_byte_order_mark_moves_no_error(text, tmp_path):
    plain = _error(text).span
    marked = _error("\ufeff" + text).span
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    with pytest.raises(DiagnosticError) as info:
        retrograd.parse_file(path)
    assert (plain.line, plain.col) == (marked.line, marked.col) == (info.value.span.line, info.value.span.col)


def test_an_adaptive_pool_gradient_too_large_to_hold_is_a_located_error():
    text = ('@R.function\ndef main(x: R.Tensor((1, 2, 4), "float32")):\n'
            '    y = R.nn.adaptive_avg_pool1d(x, [10000000000])\n    z = R.sum(y)\n    return z\n')
    with pytest.raises(GradientError) as info:
        parse_pipeline("gradient(func=main)")(retrograd.parse(text, source_name="t.py"))
    assert info.value.span.line == 3 and "averaging matrix" in str(info.value)


def test_constants_a_pass_puts_into_a_deep_value_print_as_text_that_parses_back():
    # 99 tuples around a name (100 levels with the return's tuple) parse; fold-constant(grow=True)
    # replaces the name by its constant, which must not count as one more level when read back.
    inner = "z"
    for _ in range(99):
        inner = f"R.tuple({inner})"
    text = (f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n'
            f'    z = R.zeros(R.shape([2, 3]), "float32")\n    return ({inner}, x)\n')
    out = parse_pipeline("fold-constant(grow=True)")(retrograd.parse(text))
    assert "R.const(" in out.script()
    _round_trip(out)
    # One more level of a non-leaf value is still refused, located.
    assert "nested too deeply" in str(_error(text.replace("return (", "return (R.tuple(").replace(", x)\n", "), x)\n")))


def test_an_error_in_a_parameter_annotation_names_the_parameter():
    err = _error('@R.function\ndef main(x: R.Tensor((4,), "float32"),\n'
                 '         w: R.Tensor((3,), dtype="f")) -> R.Tensor((4,), "float32"):\n    return x\n')
    assert err.span.line == 3 and "parameter 'w'" in str(err)
