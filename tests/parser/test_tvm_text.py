"""What TVM 0.27 and its PyTorch frontend print, read by retrograd: metadata-referring attributes,
TIR functions, special float constants, R.match_cast, Python operators, declared symbolic dims,
typed attribute values, and did-you-mean messages. TVM (and PyTorch) are the oracle where installed."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError, ExecutionError, NameError_, OpError, ScriptWarning, UnsupportedError
from retrograd.ir import well_formed
from retrograd.ir.expr import Call, Constant
from retrograd.parser import parse, print_module
from optional import need  # noqa: E402


def module(*body: str, sig: str = 'x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")', head: str = "") -> str:
    lines = [head, "@I.ir_module", "class Module:", "    @R.function", f"    def main({sig}):"]
    return "\n".join(lines + ["        " + b for b in body]) + "\n"


def bindings(mod, name="main"):
    return [b for blk in mod[name].body.blocks for b in blk.bindings]


def quiet_parse(text, source_name="<string>"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScriptWarning)
        return parse(text, source_name)


def tvm_reads(text: str):
    """TVM's module for `text` (skipped without TVM)."""
    tvm_script = need("tvm.script")
    return tvm_script.from_source(text)


def assert_round_trip(mod):
    """Printed text parses back equal (a fixpoint) and verifies; returns the text."""
    assert well_formed(mod) == []
    text = print_module(mod)
    back = quiet_parse(text, "printed")
    assert well_formed(back) == []
    retrograd.assert_structural_equal(mod, back)
    assert print_module(back) == text
    return text


# -- 1. attributes referring to metadata ------------------------------------------------------


def test_function_attribute_referring_to_metadata_is_dropped_with_a_warning_naming_it():
    text = module('R.func_attr({"num_input": 1, "params": [metadata["ffi.Tensor"][0], metadata["ffi.Tensor"][1]]})',
                  "return x")
    with pytest.warns(ScriptWarning, match=r"<string>:6:9: dropped attribute 'params' of function 'main'") as record:
        mod = parse(text)
    assert record[0].filename == __file__  # shown at the caller's line, not inside retrograd
    assert dict(mod["main"].attrs) == {"num_input": 1}
    printed = assert_round_trip(mod)
    assert "metadata" not in printed and 'R.func_attr({"num_input": 1})' in printed


def test_module_attributes_and_global_infos_with_metadata():
    text = ('@I.ir_module\nclass Module:\n    I.module_attrs({"a": 1, "w": metadata["ffi.Tensor"][0]})\n'
            '    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})\n'
            '    @R.function\n    def main(x: R.Tensor((2,), "float32")):\n        return x\n')
    with pytest.warns(ScriptWarning) as record:
        mod = parse(text)
    messages = [str(r.message) for r in record]
    assert any("dropped attribute 'w' of the module" in m for m in messages)
    assert any("'vdevice'" in m and "virtual devices" in m for m in messages)
    assert dict(mod.attrs) == {"a": 1}
    assert_round_trip(mod)


def test_a_metadata_reference_among_values_is_still_a_located_error():
    text = module('a = R.add(x, metadata["ir.GenericConst"][0])', "return a")
    with pytest.raises(NameError_, match="no metadata section") as info:
        parse(text)
    assert (info.value.span.line, info.value.span.col) == (6, 22)


# -- 2. TIR functions -------------------------------------------------------------------------

_TIR_MODULE = '''@I.ir_module
class Module:
    @T.prim_func(private=True, s_tir=True)
    def add(x: T.Buffer((T.int64(4),), "float32"), T_add: T.Buffer((T.int64(4),), "float32")):
        T.func_attr({"tirx.noalias": True})
        # with T.sblock("root"):
        for ax0 in range(T.int64(4)):
            with T.sblock("T_add"):
                v_ax0 = T.axis.spatial(T.int64(4), ax0)
                T.reads(x[v_ax0])
                T.writes(T_add[v_ax0])
                T_add[v_ax0] = x[v_ax0] + x[v_ax0]

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        y: R.Tensor((4,), dtype="float32") = R.nn.relu(x)
        return y
'''


def test_tir_functions_load_as_opaque_text_with_one_warning():
    with pytest.warns(ScriptWarning, match=r"<string>:3:5: TIR function\(s\) 'add' kept as opaque text") as record:
        mod = parse(_TIR_MODULE)
    assert len([r for r in record if issubclass(r.category, ScriptWarning)]) == 1
    assert list(mod.keys()) == ["main"] and list(mod.tir) == ["add"]
    assert mod.tir["add"].startswith("@T.prim_func(private=True, s_tir=True)\ndef add(")
    assert mod.tir["add"].rstrip().endswith("T_add[v_ax0] = x[v_ax0] + x[v_ax0]")
    text = assert_round_trip(mod)
    assert "    @T.prim_func(private=True, s_tir=True)\n    def add(" in text
    out = retrograd.build(mod)["main"](np.array([-1, 2, -3, 4], dtype="float32"))
    np.testing.assert_array_equal(out, [0, 2, 0, 4])
    # Passes keep them (functional updates carry them), and a different body is a difference.
    assert retrograd.passes.parse_pipeline("dce")(mod).tir == mod.tir
    changed = quiet_parse(_TIR_MODULE.replace("x[v_ax0] + x[v_ax0]", "x[v_ax0] * x[v_ax0]"))
    assert not retrograd.structural_equal(mod, changed)


def test_a_call_of_a_tir_function_is_a_located_error():
    text = _TIR_MODULE.replace(
        "        y: R.Tensor((4,), dtype=\"float32\") = R.nn.relu(x)",
        "        cls = Module\n        y = R.call_tir(cls.add, (x,), out_sinfo=R.Tensor((4,), dtype=\"float32\"))",
    )
    with pytest.raises(UnsupportedError, match="'add' is a TIR function, kept as text only") as info:
        quiet_parse(text, "m.py")
    assert (info.value.span.line, info.value.span.col) == (17, 13)
    assert "m.py:3:5" in str(info.value)
    misspelt = text.replace("R.call_tir(cls.add,", "R.call_tir(cls.ad,")
    with pytest.raises(NameError_, match="no function 'ad'; did you mean 'add'"):
        quiet_parse(misspelt)
    direct = text.replace('R.call_tir(cls.add, (x,), out_sinfo=R.Tensor((4,), dtype="float32"))', "cls.add(x)")
    with pytest.raises(UnsupportedError, match="'add' is a TIR function"):
        quiet_parse(direct)


def test_tvm_reads_the_printed_tir_back_equal():
    tvm = need("tvm")
    relax = need("tvm.relax")

    relax_mod = tvm_reads(module("a = R.add(x, y)", "b = R.nn.relu(a)", "return b"))
    legal = relax.transform.LegalizeOps()(relax_mod)  # TIR functions and R.call_tir, as TVM prints them
    legal_text = legal.script()
    with pytest.raises(UnsupportedError, match="is a TIR function"):
        quiet_parse(legal_text)
    # The same TIR functions beside a Relax main that does not call them: the module loads.
    legal["main"] = relax_mod["main"]
    with pytest.warns(ScriptWarning, match="'add', 'relu'"):
        ours = parse(legal.script())
    assert set(ours.tir) == {"add", "relu"}
    theirs = tvm_reads(assert_round_trip(ours))
    for name in ("add", "relu"):
        tvm.ir.assert_structural_equal(theirs[name], legal[name])


# -- 3. special float constants ---------------------------------------------------------------


@pytest.mark.parametrize(("text", "check"), [
    ('"-inf"', np.isneginf), ('"inf"', np.isposinf), ('"nan"', np.isnan),
])
def test_special_float_constants_as_tvm_prints_them(text, check):
    mod = parse(module(f'c = R.const({text}, "float32")', "a = R.add(x, c)", "return a"))
    c = bindings(mod)[0].value
    assert isinstance(c, Constant) and c.data.dtype == np.float32 and check(c.data)
    out = retrograd.build(mod)["main"](np.ones((2, 3), "float32"), np.ones((2, 3), "float32"))
    assert check(out).all()


def test_special_float_string_needs_a_float_dtype():
    with pytest.raises(OpError, match="special float"):
        parse(module('c = R.const("-inf", "int32")', "return c"))
    with pytest.raises(OpError, match="R.const takes a number"):
        parse(module('c = R.const("infinity-ish", "float32")', "return c"))


@pytest.mark.parametrize("size", [1, 3, 40])  # a scalar, an inline array, the metadata section
def test_special_floats_round_trip_through_tvm(size):
    data = np.arange(size, dtype="float32")
    data[0] = -np.inf
    if size > 1:
        data[1], data[2] = np.inf, np.nan
    values = ", ".join({-np.inf: 'float("-inf")', np.inf: 'float("inf")'}.get(v, repr(float(v))) if not np.isnan(v)
                       else 'float("nan")' for v in data.tolist())
    const = f'R.const({values if size == 1 else "[" + values + "]"}, "float32")'
    mod = parse(module(f"c = {const}", "return c", sig='x: R.Tensor((2,), "float32")'))
    text = assert_round_trip(mod)
    theirs = tvm_reads(text)
    (binding,) = [b for blk in theirs["main"].body.blocks for b in blk.bindings]
    np.testing.assert_array_equal(binding.value.value.numpy(), data.reshape(() if size == 1 else (size,)))
    # TVM's own printing of a special scalar is the string form, which retrograd reads.
    if size == 1:
        assert 'R.const("-inf", "float32")' in theirs.script()
        retrograd.assert_structural_equal(mod, parse(theirs.script()))


# -- 4. R.match_cast --------------------------------------------------------------------------

_MATCH_CAST = module("n = T.int64()", 'y = R.match_cast(x, R.Tensor((n, 4), "float32"))', "z = R.nn.relu(y)",
                     "w = R.sum(z, axis=[0])", "return (z, w)", sig='x: R.Tensor("float32", ndim=2)')


def test_match_cast_binds_new_dims_and_checks_at_run_time():
    mod = parse(_MATCH_CAST)
    y = bindings(mod)[0].var
    assert y.struct_info == retrograd.ir.struct_info.TensorStructInfo(("n", 4), "float32")
    assert bindings(mod)[2].var.struct_info.shape == (4,)
    text = assert_round_trip(mod)
    assert "n = T.int64()" in text
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype("float32")
    z, w = retrograd.build(mod)["main"](x)
    np.testing.assert_allclose(z, np.maximum(x, 0))
    np.testing.assert_allclose(w, np.maximum(x, 0).sum(0), rtol=1e-6)
    with pytest.raises(ExecutionError) as info:
        retrograd.build(mod)["main"](np.zeros((3, 5), "float32"))
    message = str(info.value)
    assert "dim 1 does not match 4" in message and ":7:" in message
    assert "StructInfo(" not in message and " object at " not in message
    with pytest.raises(ExecutionError, match="int32"):
        retrograd.build(mod)["main"](np.zeros((3, 4), "int32"))


def test_match_cast_is_read_by_tvm_and_tvm_text_reads_back():
    theirs = tvm_reads(print_module(parse(_MATCH_CAST)))
    retrograd.assert_structural_equal(parse(_MATCH_CAST), parse(theirs.script()))


def test_match_cast_errors():
    with pytest.raises(NameError_, match="Undefined variable: k"):
        parse(module('y = R.match_cast(x, R.Tensor((k, 3), "float32"))', "return y"))
    with pytest.raises(retrograd.errors.TypeInferenceError, match="never 4"):
        parse(module('y = R.match_cast(x, R.Tensor((2, 4), "float32"))', "return y"))
    with pytest.raises(UnsupportedError, match="tensor struct info"):
        parse(module("y = R.match_cast(x, R.Shape([2, 3]))", "return y"))


def test_match_cast_gradient_flows_through():
    # A static target: dims bound only by R.match_cast cannot size run-time shapes (R.shape) yet.
    mod = parse(module('y = R.match_cast(x, R.Tensor((2, 3), "float32"))', "s = R.sum(R.multiply(y, y))",
                       "return s", sig='x: R.Tensor("float32", ndim=2)'))
    grad = retrograd.passes.Gradient("main")(mod)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    value, (gx,) = retrograd.build(grad)["main_adjoint"](x)
    np.testing.assert_allclose(value, (x * x).sum())
    np.testing.assert_allclose(gx, 2 * x)


# -- 5. Python operators ----------------------------------------------------------------------

_OPS = {">": "greater", "<": "less", ">=": "greater_equal", "<=": "less_equal", "==": "equal", "!=": "not_equal",
        "**": "power", "//": "floor_divide", "%": "mod", "+": "add", "-": "subtract", "*": "multiply", "/": "divide"}


@pytest.mark.parametrize("op", list(_OPS))
def test_operator_maps_to_the_op_tvm_maps_it_to(op):
    text = module(f"a = x {op} y", "return a")
    mine = bindings(parse(text))[0].value
    assert mine.op.name == f"relax.{_OPS[op]}"
    if op in ("==", "!="):
        # TVM compares Relax values by identity for == and !=: its parser refuses them (retrograd reads them).
        with pytest.raises(Exception, match="Operand should be a Expr"):
            tvm_reads(text)
        return
    theirs = tvm_reads(text).script()
    assert f"R.{_OPS[op]}(x, y)" in theirs


def test_operators_follow_pythons_precedence():
    expr = "-x ** y + x * y // y % x > x - y / x"
    text = module(f"a = {expr}", "return a")
    mod = parse(text)
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0.5, 2.0, (2, 3)).astype("float32"), rng.uniform(0.5, 2.0, (2, 3)).astype("float32")
    got = retrograd.build(mod)["main"](x, y)
    # % on positive values: TVM's mod and Python's floor mod agree.
    np.testing.assert_array_equal(got, -x ** y + x * y // y % x > x - y / x)
    theirs = tvm_reads(text)  # TVM reads the same precedence
    retrograd.assert_structural_equal(mod, parse(theirs.script()))


def test_chained_comparison_is_a_located_error():
    with pytest.raises(UnsupportedError, match="chained comparisons") as info:
        parse(module("a = x < y < x", "return a"))
    assert (info.value.span.line, info.value.span.col) == (6, 13)


def test_comparison_in_an_if_condition():
    mod = parse(module("s = R.sum(x)", "if s > R.const(0, \"float32\"):", "    r = x", "else:", "    r = y", "return r"))
    run = retrograd.build(mod)["main"]
    ones = np.ones((2, 3), "float32")
    np.testing.assert_array_equal(run(ones, 2 * ones), ones)
    np.testing.assert_array_equal(run(-ones, 2 * ones), 2 * ones)


# -- 6. undeclared symbolic dims --------------------------------------------------------------


@pytest.mark.parametrize(("text", "where"), [
    (module("return x", sig='x: R.Tensor((m, 16), "float32")'), (5, 27)),
    (module('y: R.Tensor((m,), "float32") = R.reshape(x, R.shape([6]))', "return y"), (6, 22)),
    (module("y = R.reshape(x, R.shape([z, 3]))", "return y"), (6, 35)),
    (module("return x", sig='x: R.Tensor(("m + 1", 16), "float32")'), (5, 27)),
])
def test_an_undeclared_dim_name_is_tvms_error_located(text, where):
    with pytest.raises(NameError_, match=r"Undefined variable: [mz]\b") as info:
        parse(text)
    assert (info.value.span.line, info.value.span.col) == where
    assert "T.int64()" in str(info.value)
    try:
        tvm_reads(text)
    except pytest.skip.Exception:
        raise
    except Exception as err:  # noqa: BLE001 - TVM's own error type
        assert re.search(r"Undefined variable: [mz]\b|name '[mz]' is not defined", str(err))
    else:  # pragma: no cover - TVM accepted it
        pytest.fail("TVM accepts an undeclared dim name")


@pytest.mark.parametrize("text", [
    "m = T.int64()\n" + module("return x", sig='x: R.Tensor((m, 16), "float32")'),
    'm = TypeVar("m")\n' + module("return x", sig='x: R.Tensor((m, 16), "float32")'),
    module('y: R.Tensor((m, 16), "float32") = x', "return y", sig='x: R.Tensor(("m", 16), "float32")'),
    module("m = T.int64()", 'y = R.match_cast(x, R.Tensor((m, 3), "float32"))', "return y"),
])
def test_declared_dims_are_accepted_as_by_tvm(text):
    mod = parse(text)
    assert_round_trip(mod)
    tvm_reads(text)


# -- 7. typed attribute values ----------------------------------------------------------------


def test_typed_attribute_values():
    mod = parse(module("a = R.nn.leakyrelu(x, alpha=T.float32(0.25))", "b = R.clip(a, T.float64(-0.1), R.prim_value(T.float64(0.5)))",
                       "return b"))
    assert bindings(mod)[0].value.attrs["alpha"] == 0.25
    x = np.linspace(-2, 2, 6, dtype="float32").reshape(2, 3)
    got = retrograd.build(mod)["main"](x, x)
    np.testing.assert_allclose(got, np.clip(np.where(x > 0, x, 0.25 * x), -0.1, 0.5), rtol=1e-6)
    assert_round_trip(mod)
    with pytest.raises(OpError, match="takes an integer"):
        parse(module("a = R.sum(x, axis=T.int64(1.5))", "return a"))


# -- 8. did-you-mean --------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "kind", "fragment"), [
    ("a = R.nn.relux(x)", OpError, "unknown op R.nn.relux; did you mean 'R.nn.relu'"),
    ("a = R.nn.softmax(x, axsi=0)", OpError, "has no attribute 'axsi'; did you mean 'axis'?"),
    ("a = cls.mian(x, y)", NameError_, "the module has no function 'mian'; did you mean 'main'?"),
    ("a = R.add(xx, y)", NameError_, "undefined variable 'xx'; did you mean 'x'"),
    ("a = mian(x, y)", NameError_, "unknown function 'mian'; did you mean 'main'?"),
])
def test_did_you_mean(line, kind, fragment):
    with pytest.raises(kind) as info:
        parse(module("cls = Module", line, "return a"))
    message = str(info.value)
    assert fragment in message and " object at " not in message
    assert info.value.span.line == 7


def test_the_pass_registry_shares_the_helper():
    with pytest.raises(DiagnosticError, match="unknown pass 'dec'; did you mean 'dce'"):
        retrograd.passes.parse_pipeline("dec")


# -- real models through TVM's PyTorch frontend ------------------------------------------------


def _models():
    torch = need("torch")
    nn = torch.nn

    class LinearLayerNormGelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.l, self.n, self.g = nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU()

        def forward(self, x):
            return self.g(self.n(self.l(x)))

    class CausalScores(nn.Module):
        def forward(self, q, k):
            a = q @ k.transpose(-1, -2)
            mask = torch.triu(torch.ones(a.shape[-1], a.shape[-1], dtype=torch.bool), 1)
            return torch.softmax(a.masked_fill(mask, float("-inf")), -1)

    class ConvBatchNorm(nn.Module):
        def __init__(self, stats_as_parameters: bool):
            super().__init__()
            self.c, self.b = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)
            with torch.no_grad():
                self.b.running_mean.uniform_(-0.5, 0.5)
                self.b.running_var.uniform_(0.5, 2.0)
            if stats_as_parameters:  # TVM's frontend binds buffers as constants, which no text holds
                for name in ("running_mean", "running_var"):
                    value = self.b._buffers.pop(name)
                    setattr(self.b, name, nn.Parameter(value, requires_grad=False))

        def forward(self, x):
            return torch.relu(self.b(self.c(x)))

    class EmbeddingSum(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = nn.Embedding(10, 4)

        def forward(self, i):
            return self.e(i).sum(1)

    torch.manual_seed(0)
    return {
        "linear_layernorm_gelu": (LinearLayerNormGelu(), (torch.randn(2, 8),)),
        "causal_masked_fill": (CausalScores(), (torch.randn(2, 4, 8), torch.randn(2, 4, 8))),
        "conv_batchnorm": (ConvBatchNorm(True).eval(), (torch.randn(1, 3, 6, 6),)),
        "embedding": (EmbeddingSum(), (torch.randint(0, 10, (2, 3)),)),
        "conv_batchnorm_buffers": (ConvBatchNorm(False).eval(), (torch.randn(1, 3, 6, 6),)),
    }


@pytest.fixture(scope="module")
def exported():
    """name -> (TVM's printed text, torch module, example inputs): TVM's frontend run at test time."""
    torch = need("torch")
    need("tvm")
    from_exported_program = need("tvm.relax.frontend.torch").from_exported_program

    out = {}
    for name, (model, inputs) in _models().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.export.export(model, inputs)
        mod = from_exported_program(program, keep_params_as_input=True)
        out[name] = (mod.script(), model, inputs)  # not show_meta=True: it crashes in TVM 0.27
    return out


@pytest.mark.parametrize("name", ["linear_layernorm_gelu", "causal_masked_fill", "conv_batchnorm", "embedding"])
def test_tvm_frontend_text_parses_verifies_runs_and_goes_back_to_tvm(exported, name):
    torch = need("torch")

    text, model, inputs = exported[name]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        mod = parse(text, f"{name}.py")
    dropped = [str(r.message) for r in record if issubclass(r.category, ScriptWarning)]
    assert all("'params'" in m for m in dropped) and ("metadata[" not in text or dropped)
    assert well_formed(mod) == []
    printed = assert_round_trip(mod)
    theirs = tvm_reads(printed)  # TVM reads our text back ...
    retrograd.assert_structural_equal(mod, quiet_parse(theirs.script()))  # ... to the same module
    # Forward values against PyTorch: the parameters are the function's trailing inputs, by name.
    params = {"p_" + n.replace(".", "_"): p.detach().numpy() for n, p in model.named_parameters()}
    args = [t.numpy() for t in inputs] + [params[p.name_hint] for p in mod["main"].params[len(inputs):]]
    (got,) = retrograd.build(mod)["main"](*args)
    with torch.no_grad():
        want = model(*inputs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if name == "causal_masked_fill":
        assert 'R.const("-inf", "float32")' in text and np.isneginf(
            [c.data for b in bindings(mod) if isinstance(c := b.value, Constant) and c.data.ndim == 0][-1])
        assert any(isinstance(b.value, Call) and b.value.op.name == "relax.where" for b in bindings(mod))


def test_tvm_frontend_buffers_bound_as_metadata_are_a_located_error(exported):
    text, _, _ = exported["conv_batchnorm_buffers"]
    assert 'metadata["ir.GenericConst"]' in text
    with pytest.raises(NameError_, match="no metadata section") as info:
        quiet_parse(text, "bn.py")
    line = text.splitlines()[info.value.span.line - 1]
    assert line[info.value.span.col - 1 :].startswith('metadata["ir.GenericConst"]')
