"""Bad scripts and the error each must raise: (id, source, error kind, line, column, message fragment), read by
the parser's error tests and by its lark-fallback tests."""

from __future__ import annotations

from retrograd.errors import (
    NameError_,
    OpError,
    ParseError,
    TypeInferenceError,
    UnsupportedError,
)

# Lines 1-4; statements of `body(...)` start on line 5, column 9.
HEAD = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3, 4), "float32"), k: R.Tensor((2, 3), "int32"), c: R.Tensor((), "bool")):
"""


def body(*lines: str) -> str:
    return HEAD + "".join("        " + line + "\n" for line in lines)


def module(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


# (id, source, error kind, line, column, message fragment)
CASES = [
    # -- syntax ----------------------------------------------------------------------------------
    ("missing_colon", module("@R.function", 'def main(x: R.Tensor((2,), "float32"))', "    return x"),
     ParseError, 2, 39, 'expected one of: "->", ":"'),
    ("unclosed_paren", body("a = R.add(x, x", "return a"), ParseError, 6, 9, 'unexpected "return"'),
    ("bad_dedent", body("a = R.exp(x)", "if c:", "    b = x", "  else:", "    b = a", "return b"),
     ParseError, 8, 1, "unindent does not match"),
    ("unexpected_indent", body("a = R.exp(x)", "    return a"), ParseError, 6, 13, "unexpected indentation"),
    ("bad_character", body("a = R.exp(x) $", "return a"), ParseError, 5, 22, "unexpected character '$'"),
    ("unterminated_string", body('a = R.str("abc)', "return a"), ParseError, 5, 19, "unexpected character '\"'"),
    ("unexpected_eof", module("@I.ir_module", "class Module:"), ParseError, 2, 14, "unexpected end of input"),
    ("unmatched_bracket", body("a = R.exp(x))", "return a"), ParseError, 5, 21, "unmatched ')'"),
    ("missing_operand", body("a = x +", "return a"), ParseError, 5, 16, "unexpected end of line"),
    ("positional_after_keyword", body("a = R.sum(x, axis=[0], True)", "return a"), ParseError, 5, 32,
     "positional argument after keyword"),
    # -- ops -------------------------------------------------------------------------------------
    ("unknown_op", body("a = R.frobnicate(x)", "return a"), OpError, 5, 13, "unknown op R.frobnicate"),
    ("unknown_nn_op", body("a = R.nn.frobnicate(x)", "return a"), OpError, 5, 13, "unknown op R.nn.frobnicate"),
    ("unknown_attribute", body("a = R.sum(x, axes=[1])", "return a"), OpError, 5, 13, "no attribute 'axes'"),
    ("missing_argument", body("a = R.add(x)", "return a"), OpError, 5, 13, "missing argument 'x2'"),
    ("too_many_arguments", body("a = R.exp(x, x)", "return a"), OpError, 5, 13, "takes at most 1 arguments"),
    ("bad_attribute_value", body("a = R.sum(x, keepdims=1)", "return a"), OpError, 5, 13, "expected True or False"),
    ("non_literal_attribute", body("a = R.sum(x, axis=x)", "return a"), OpError, 5, 27, "must be a literal"),
    ("keyword_twice", body("a = R.sum(x, axis=[0], axis=[1])", "return a"), OpError, 5, 32, "'axis' given twice"),
    ("ragged_constant", body("a = R.const([[1, 2], [3]])", "return a"), OpError, 5, 21, "ragged"),
    ("constant_bad_dtype", body('a = R.const(1, "float31")', "return a"), OpError, 5, 13, "unknown dtype 'float31'"),
    # -- inference -------------------------------------------------------------------------------
    ("shape_mismatch", body("a = R.add(x, y)", "return a"), TypeInferenceError, 5, 13, "cannot be broadcast"),
    ("dtype_mismatch", body("a = R.add(x, k)", "return a"), TypeInferenceError, 5, 13, "float32 and int32"),
    ("nested_shape_mismatch", body("a = R.exp(R.add(x, y))", "return a"), TypeInferenceError, 5, 19, "cannot be broadcast"),
    ("operator_shape_mismatch", body("a = x * y", "return a"), TypeInferenceError, 5, 13, "R.multiply"),
    ("matmul_mismatch", body("a = R.matmul(x, x)", "return a"), TypeInferenceError, 5, 13, "R.matmul"),
    ("reshape_size", body("a = R.reshape(x, [5])", "return a"), TypeInferenceError, 5, 13, "R.reshape"),
    ("annotation_shape", body('a: R.Tensor((3, 3), "float32") = R.exp(x)', "return a"), TypeInferenceError, 5, 12,
     "does not match the inferred R.Tensor((2, 3)"),
    ("annotation_dtype", body('a: R.Tensor((2, 3), "int32") = R.exp(x)', "return a"), TypeInferenceError, 5, 12,
     'annotation R.Tensor((2, 3), dtype="int32")'),
    ("return_annotation", module("@R.function", 'def main(x: R.Tensor((2,), "float32")) -> R.Tensor((3,), "float32"):',
                                 "    return x"), TypeInferenceError, 2, 43, "does not match"),
    ("unknown_dtype", body('a: R.Tensor((2, 3), "float33") = R.exp(x)', "return a"), TypeInferenceError, 5, 29,
     "unknown dtype 'float33'"),
    ("float_dim", module("@R.function", 'def main(x: R.Tensor((2.5,), "float32")):', "    return x"),
     TypeInferenceError, 2, 23, "dimension"),
    ("unreadable_string_dim", module("@R.function", 'def main(x: R.Tensor(("n +",), "float32")):', "    return x"),
     TypeInferenceError, 2, 23, "cannot read dimension 'n +'"),
    ("tuple_index_range", body("t = (x, y)", "a = t[2]", "return a"), TypeInferenceError, 6, 13, "out of range"),
    ("index_non_tuple", body("a = x[0]", "return a"), TypeInferenceError, 5, 13, "non-tuple"),
    ("if_condition", body("if x:", "    a = x", "else:", "    a = x", "return a"), TypeInferenceError, 5, 12,
     "scalar bool tensor"),
    ("missing_param_annotation", module("@R.function", 'def main(x, y: R.Tensor((2,), "float32")):', "    return y"),
     TypeInferenceError, 2, 10, "needs a struct info annotation"),
    ("call_arity", module(
        "@I.ir_module", "class Module:", "    @R.function",
        '    def f(a: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):', "        return a",
        "    @R.function", '    def main(x: R.Tensor((2,), "float32")):', "        cls = Module",
        "        b = cls.f(x, x)", "        return b"), TypeInferenceError, 9, 13, "takes 1 arguments, got 2"),
    ("recursion_without_annotation", module(
        "@I.ir_module", "class Module:", "    @R.function", '    def main(x: R.Tensor((2,), "float32")):',
        "        cls = Module", "        a = cls.main(x)", "        return a"), TypeInferenceError, 6, 13,
     "annotate its return"),
    # -- names -----------------------------------------------------------------------------------
    ("undefined_variable", body("a = R.exp(q)", "return a"), NameError_, 5, 19, "undefined variable 'q'"),
    ("dataflow_var_escapes", body("with R.dataflow():", "    lv = R.exp(x)", "    gv = R.exp(lv)", "    R.output(gv)",
                                  "b = R.add(lv, gv)", "return b"), NameError_, 9, 19, "'lv' is a dataflow variable"),
    ("output_unbound", body("with R.dataflow():", "    lv = R.exp(x)", "    R.output(gv)", "return lv"), NameError_, 7, 22,
     "R.output lists 'gv', which is not defined"),
    ("output_bound_outside", body("a = R.exp(x)", "with R.dataflow():", "    lv = R.exp(x)", "    R.output(a)", "return a"),
     NameError_, 8, 22, "not bound in this dataflow block"),
    ("duplicate_function", HEAD + "        return x\n    @R.function\n    def main(x: R.Tensor((2,), \"float32\")):\n"
     "        return x\n", NameError_, 7, 5, "function 'main' is defined twice"),
    ("duplicate_parameter", module("@R.function", 'def main(x: R.Tensor((2,), "float32"), x: R.Tensor((2,), "float32")):',
                                   "    return x"), NameError_, 2, 40, "parameter 'x' is defined twice"),
    ("if_branches_differ", body("if c:", "    a = R.exp(x)", "else:", "    b = R.exp(x)", "return x"), NameError_, 8, 13,
     "same variable, got 'a' and 'b'"),
    ("unknown_module_function", body("cls = Module", "a = cls.g(x)", "return a"), NameError_, 6, 13,
     "no function 'g'"),
    ("module_function_without_cls", body("a = main(x)", "return a"), NameError_, 5, 13, "cls.main(...)"),
    ("unknown_function", body("a = foo(x)", "return a"), NameError_, 5, 13, "unknown function 'foo'"),
    ("metadata_without_section", body('a = metadata["relax.expr.Constant"][0]', "return a"), NameError_, 5, 13,
     "no metadata section"),
    # -- structure and unsupported constructs ----------------------------------------------------
    # A TIR function loads as opaque text (tests/parser/test_tvm_text.py); running one is what fails.
    ("tir_prim_func_called", module("@I.ir_module", "class Module:", "    @T.prim_func", '    def f(A: T.Buffer((2,), "float32")):',
                                    "        for i in range(2):", "            A[i] = 0.0", "    @R.function",
                                    '    def main(x: R.Tensor((2,), "float32")):', "        cls = Module",
                                    '        a = R.call_tir(cls.f, (x,), out_sinfo=R.Tensor((2,), "float32"))', "        return a"),
     UnsupportedError, 10, 13, "'f' is a TIR function"),
    ("tir_prim_func_outside_def", module("@T.prim_func", "x = 1"), ParseError, 1, 1, "must decorate a def"),
    ("call_tir", body('a = R.call_tir(cls.f, (x,), out_sinfo=R.Tensor((2, 3), "float32"))', "return a"), UnsupportedError,
     5, 13, "R.call_tir is not supported"),
    ("if_without_else", body("if c:", "    a = R.exp(x)", "return x"), UnsupportedError, 5, 9, "needs an else branch"),
    ("if_inside_dataflow", body("with R.dataflow():", "    if c:", "        a = R.exp(x)", "    else:", "        a = x",
                                "    R.output(a)", "return a"), UnsupportedError, 6, 13, "inside a dataflow block"),
    ("unknown_decorator", module("@I.ir_module", "class Module:", "    @R.macro", '    def main(x: R.Tensor((2,), "float32")):',
                                 "        return x"), UnsupportedError, 3, 6, "not @R.macro"),
    ("top_level_statement", module("x = 3", "@R.function", 'def main(x: R.Tensor((2,), "float32")):', "    return x"),
     UnsupportedError, 1, 1, "top-level assignment to 'x'"),
    ("two_modules", module("@I.ir_module", "class A:", "    pass", "@I.ir_module", "class B:", "    pass"),
     UnsupportedError, 5, 7, "one module"),
    ("missing_return", body("a = R.exp(x)"), ParseError, 5, 9, "must end with a return"),
    ("return_not_last", body("return x", "a = R.exp(x)", "return a"), ParseError, 5, 9, "last statement"),
    ("nested_dataflow", body("with R.dataflow():", "    with R.dataflow():", "        a = R.exp(x)", "        R.output(a)",
                             "    R.output(a)", "return a"), ParseError, 6, 13, "cannot be nested"),
    ("output_outside_dataflow", body("R.output(x)", "return x"), ParseError, 5, 9, "may only end"),
    ("annotation_as_value", body('a = R.Tensor((2,), "float32")', "return a"), ParseError, 5, 13,
     "is a struct info annotation"),
    ("non_literal_index", body("t = (x, y)", "a = t[x]", "return a"), ParseError, 6, 15, "integer literal"),
]
