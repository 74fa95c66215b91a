"""Pass infrastructure: decorators, Sequential, PassContext (config, instruments, verify), registry, pipelines."""

from __future__ import annotations

import io
from typing import Literal

import pytest
from passes.helpers import add_exp

from retrograd.errors import PassError
from retrograd.ir import (
    BindingBlock,
    BlockBuilder,
    Call,
    Function,
    IRModule,
    SeqExpr,
    Var,
    VarBinding,
)
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R
from retrograd.passes import (
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PrintBeforeAfter,
    PrintChanged,
    Sequential,
    Timing,
    VerifyAfterEach,
    function_pass,
    get_pass,
    list_passes,
    module_pass,
    parse_pipeline,
    pass_options,
    register_pass,
)
from retrograd.passes.infra import kebab_case, unregister_pass


def T(*shape):
    return TensorStructInfo(tuple(shape), "float32")


def make_func(n_exps=1):
    bb = BlockBuilder()
    x = Var("x", T(3))
    bb.begin_scope()
    with bb.dataflow():
        a = x
        for _ in range(n_exps):
            a = bb.emit(R.exp(a))
        out = bb.emit_output(a)
    body = bb.end_scope(out)
    return Function([x], body, body.struct_info)


def make_mod(**sizes):
    return IRModule({name: make_func(n) for name, n in (sizes or {"main": 1}).items()})


def n_bindings(func):
    return sum(len(b.bindings) for b in func.body.blocks)


@pytest.fixture
def registry():
    """Names registered by a test are removed afterwards."""
    added = []

    def reg(name, factory, **kw):
        register_pass(name, factory, **kw)
        added.append(name)
        return factory

    yield reg
    for name in added:
        unregister_pass(name)


# -- decorators ---------------------------------------------------------------------


def test_kebab_case():
    assert kebab_case("DeadCodeElimination") == "dead-code-elimination"
    assert kebab_case("fold_constant") == "fold-constant"
    assert kebab_case("CSE") == "cse"
    assert kebab_case("ToANFPass") == "to-anf-pass"


def test_module_pass_decorator_on_function_bare_and_with_arguments():
    @module_pass
    def append_exp(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    @module_pass(name="named", opt_level=3, required=("x",))
    def other(mod, ctx):
        return mod

    assert isinstance(append_exp, ModulePass) and append_exp.name == "append-exp" and append_exp.opt_level == 0
    assert (other.name, other.opt_level, other.required) == ("named", 3, ("x",))
    mod = make_mod()
    main_before = mod["main"]
    count = n_bindings(main_before)
    out = append_exp(mod)
    assert n_bindings(out["main"]) == count + 1
    assert mod["main"] is main_before and n_bindings(mod["main"]) == count  # the input is untouched


def test_function_pass_applies_to_every_function_and_keeps_unchanged_ones():
    seen = []

    @function_pass(opt_level=1)
    def grow_f(func, mod, ctx):
        seen.append(func)
        return add_exp(func) if n_bindings(func) == n_bindings(mod["f"]) else func

    mod = make_mod(f=2, g=1)
    out = grow_f(mod)
    assert isinstance(grow_f, FunctionPass) and grow_f.name == "grow-f"
    assert len(seen) == 2
    assert n_bindings(out["f"]) == n_bindings(mod["f"]) + 1
    assert out["g"] is mod["g"]


def test_class_passes_take_typed_options():
    @module_pass(opt_level=2)
    class DropFunctions:
        """Remove functions not listed."""

        def __init__(self, keep: list[str], verbose: bool = False):
            self.keep = keep

        def transform_module(self, mod, ctx):
            out = mod
            for name in list(mod.keys()):
                if name not in self.keep:
                    out = out.without(name)
            return out

    p = DropFunctions(keep=["f"])
    assert isinstance(p, Pass) and isinstance(p, ModulePass)
    assert p.name == "drop-functions" and p.opt_level == 2
    assert p.info.options == {"keep": ["f"]}
    assert list(p(make_mod(f=1, g=1)).keys()) == ["f"]
    with pytest.raises(PassError, match="drop-functions"):
        DropFunctions(nonsense=1)

    @function_pass
    class Grow:
        def transform_function(self, func, mod, ctx):
            return add_exp(func)

    mod = make_mod(f=1, g=2)
    out = Grow()(mod)
    assert [n_bindings(out[k]) for k in "fg"] == [n_bindings(mod[k]) + 1 for k in "fg"]


# -- Sequential and PassContext --------------------------------------------------------


def recorder(log, name, opt_level=0):
    @module_pass(name=name, opt_level=opt_level)
    def p(mod, ctx):
        log.append(name)
        return mod

    return p


def test_sequential_runs_in_order_and_respects_opt_level_required_disabled():
    log = []
    seq = Sequential([recorder(log, "a"), recorder(log, "b", opt_level=3), recorder(log, "c")], name="s")
    mod = make_mod()
    assert seq(mod) is mod
    assert log == ["a", "c"]  # default opt_level 2 skips b
    log.clear()
    with PassContext(opt_level=3):
        seq(mod)
    assert log == ["a", "b", "c"]
    log.clear()
    with PassContext(required_pass=["b"], disabled_pass=["c"]):
        seq(mod)
    assert log == ["a", "b"]


def test_sequential_composes_real_rewrites():
    @module_pass
    def grow(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    mod = make_mod()
    out = Sequential([grow, grow, Sequential([grow])])(mod)
    assert n_bindings(out["main"]) == n_bindings(mod["main"]) + 3


def test_sequential_rejects_non_passes():
    with pytest.raises(PassError, match="not a Pass"):
        Sequential([lambda m: m])


def test_pass_context_current_nesting_and_config():
    default = PassContext.current()
    seen = {}

    @module_pass
    def read_config(mod, ctx):
        seen["limit"] = ctx.config.get("read-config.limit", 0)
        seen["ctx"] = ctx
        return mod

    with PassContext(opt_level=1, config={"read-config.limit": 7}) as outer:
        assert PassContext.current() is outer
        with PassContext(opt_level=3) as inner:
            assert PassContext.current() is inner
        assert PassContext.current() is outer
        read_config(make_mod())
    assert seen == {"limit": 7, "ctx": outer}
    assert PassContext.current() is default


class Hooks:
    def __init__(self, log, skip=()):
        self.log, self.skip = log, skip

    def enter_pass_ctx(self):
        self.log.append("enter")

    def exit_pass_ctx(self):
        self.log.append("exit")

    def should_run(self, mod, info):
        return info.name not in self.skip

    def run_before_pass(self, mod, info):
        self.log.append(f"before {info.name}")

    def run_after_pass(self, mod, info):
        self.log.append(f"after {info.name}")


def test_instrument_hooks_order_and_should_run():
    log = []
    passes = Sequential([recorder(log, "a"), recorder(log, "b")])
    with PassContext(instruments=[Hooks(log, skip=("b",))]):
        passes(make_mod())
    assert log == ["enter", "before a", "a", "after a", "exit"]


def test_verify_catches_a_broken_pass():
    @module_pass
    def break_scoping(mod, ctx):
        f = mod["main"]
        ghost = Var("ghost", T(3))
        y = Var("y", T(3))
        body = SeqExpr([BindingBlock([VarBinding(y, Call(R.exp, [ghost], {}, T(3)))])], y, T(3))
        return mod.with_function("main", Function(f.params, body, T(3)))

    mod = make_mod()
    assert break_scoping(mod) is not mod  # without verify nothing complains
    with PassContext(verify=True):
        with pytest.raises(PassError) as info:
            break_scoping(mod)
    msg = str(info.value)
    assert "pass 'break-scoping' produced an ill-formed module" in msg
    assert "undefined variable 'ghost'" in msg
    with PassContext(instruments=[VerifyAfterEach()]):
        with pytest.raises(PassError, match="break-scoping"):
            Sequential([break_scoping])(mod)


def test_mutating_the_input_module_is_detected():
    @module_pass
    def mutate(mod, ctx):
        mod._functions["main"] = add_exp(mod["main"])  # what a pass must never do
        return mod

    with pytest.raises(PassError, match="mutated its input module"):
        mutate(make_mod())


def test_pass_must_return_a_module():
    @module_pass
    def bad(mod, ctx):
        return None

    with pytest.raises(PassError, match="returned NoneType"):
        bad(make_mod())
    with pytest.raises(PassError, match="expects an IRModule"):
        bad(make_func())


# -- registry and pipelines -------------------------------------------------------------


def gradient_like(func_name: str, require_grads: list[int | str] | None = None, target_index: int = 0) -> Pass:
    @module_pass(name="gradient-like")
    class _G:
        def __init__(self, **opts):
            self.opts = opts

        def transform_module(self, mod, ctx):
            return mod

    return _G(func_name=func_name, require_grads=require_grads, target_index=target_index)


@module_pass(opt_level=1)
class ToyDce:
    def __init__(self, entry_functions: list[str] | None = None, aggressive: bool = False,
                 mode: Literal["fast", "full"] = "fast", ratio: float = 0.5):
        self.entry_functions = entry_functions

    def transform_module(self, mod, ctx):
        return mod


def test_register_get_and_list(registry):
    registry("toy-dce", ToyDce)
    registry("gradient-like", gradient_like, aliases={"func": "func_name"})
    assert {"toy-dce", "gradient-like"} <= set(list_passes())
    assert list_passes() == sorted(list_passes())
    p = get_pass("toy-dce", entry_functions=["main"])
    assert isinstance(p, ToyDce) and p.entry_functions == ["main"]
    g = get_pass("gradient-like", func="main")
    assert g.info.options["func_name"] == "main"
    assert set(pass_options("toy-dce")) == {"entry_functions", "aggressive", "mode", "ratio"}
    with pytest.raises(PassError, match="has no option 'bogus'"):
        get_pass("toy-dce", bogus=1)
    with pytest.raises(PassError, match="needs option"):
        get_pass("gradient-like")
    with pytest.raises(ValueError, match="registered twice"):
        register_pass("toy-dce", gradient_like)
    with pytest.raises(ValueError, match="kebab-case"):
        register_pass("Toy_DCE", ToyDce)


def test_register_pass_as_decorator_and_pass_instances(registry):
    @module_pass
    def plain(mod, ctx):
        return mod

    registry("plain-pass", plain)
    assert get_pass("plain-pass") is plain
    with pytest.raises(PassError):
        get_pass("plain-pass", x=1)

    @register_pass("decorated-factory")
    def factory(n: int = 1) -> Pass:
        return plain

    try:
        assert factory(2) is plain  # the decorator returns the factory itself
        assert get_pass("decorated-factory", n=3) is plain
    finally:
        unregister_pass("decorated-factory")


def test_parse_pipeline_converts_option_types(registry):
    registry("toy-dce", ToyDce)
    registry("gradient-like", gradient_like, aliases={"func": "func_name"})
    seq = parse_pipeline(
        'gradient-like(func=main, target_index=1, require_grads=[x, 2, "w b"]), '
        "toy-dce(entry_functions=[main, f], aggressive=true, mode=full, ratio=1), toy-dce"
    )
    assert isinstance(seq, Sequential) and len(seq.passes) == 3
    g, d, d2 = seq.passes
    assert g.info.options == {"func_name": "main", "require_grads": ["x", 2, "w b"], "target_index": 1}
    assert d.info.options == {"entry_functions": ["main", "f"], "aggressive": True, "mode": "full", "ratio": 1.0}
    assert isinstance(d.info.options["ratio"], float)
    assert d2.info.options == {}
    # Positional options bind in signature order; a scalar for a list option becomes a one-item list.
    g2 = parse_pipeline("gradient-like(main, [x])").passes[0]
    assert g2.info.options["require_grads"] == ["x"]
    d3 = parse_pipeline("toy-dce(entry_functions=main)").passes[0]
    assert d3.info.options["entry_functions"] == ["main"]
    assert parse_pipeline("").passes == []


@pytest.mark.parametrize(
    "text, fragment, col",
    [
        ("toy-dcee", "unknown pass 'toy-dcee'; did you mean 'toy-dce'?", 1),
        ("toy-dce, nope(x=1)", "unknown pass 'nope'", 10),
        ("toy-dce(bogus=1)", "pass 'toy-dce' has no option 'bogus'", 9),
        ("toy-dce(aggressive=3)", "option 'aggressive' of pass 'toy-dce' expects bool", 9),
        ("toy-dce(mode=slow)", "expected one of 'fast', 'full'", 9),
        ("toy-dce(ratio=abc)", "expects float", 9),
        ("toy-dce(entry_functions=[main, true])", "expects list[str] | None", 9),
        ("gradient-like(target_index=2)", "needs option(s) 'func_name'", 1),
        ("gradient-like(func=main, target_index=x)", "expects int", 26),
        ("gradient-like(func=main, func_name=f)", "given twice", 26),
        ("toy-dce(", "expected an option value, got the end of the pipeline", 9),
        ("toy-dce(aggressive=true", "expected ')'", 24),
        ("toy-dce toy-dce", "expected ','", 9),
        ("toy-dce, $", "unexpected character '$'", 10),
        ("toy-dce(a=1, 2)", "positional option after keyword options", 14),
    ],
)
def test_parse_pipeline_errors_point_into_the_text(registry, text, fragment, col):
    registry("toy-dce", ToyDce)
    registry("gradient-like", gradient_like, aliases={"func": "func_name"})
    with pytest.raises(PassError) as info:
        parse_pipeline(text)
    err = info.value
    assert fragment in err.message
    assert err.span is not None and err.span.col == col, (err.span, str(err))
    assert str(err).startswith(f"<pipeline>:1:{col}: pass error:")
    assert text in str(err)  # the source line is quoted with a caret under it
    assert "^" in str(err)


def test_parse_pipeline_never_evaluates_python(registry):
    registry("toy-dce", ToyDce)
    with pytest.raises(PassError):
        parse_pipeline("toy-dce(entry_functions=__import__('os').system('true'))")


def test_parsed_pipeline_runs(registry):
    @module_pass
    def grow(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    registry("grow", grow)
    mod = make_mod()
    out = parse_pipeline("grow, grow, grow")(mod)
    assert n_bindings(out["main"]) == n_bindings(mod["main"]) + 3


# -- instruments -------------------------------------------------------------------------


def test_timing_records_every_pass_and_reports():
    @module_pass
    def grow(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    timing = Timing()
    log = []
    with PassContext(instruments=[timing]):
        Sequential([grow, recorder(log, "noop"), grow])(make_mod())
    assert [name for name, _ in timing.records] == ["grow", "noop", "grow"]
    assert all(s >= 0 for _, s in timing.records)
    totals = timing.totals()
    assert set(totals) == {"grow", "noop"}
    assert totals["grow"] == pytest.approx(sum(s for n, s in timing.records if n == "grow"))
    report = timing.report()
    assert "grow" in report and "total" in report and "   2  " in report


def _names_printer(mod):
    """A stand-in printer: one line per function with its binding count."""
    return "\n".join(f"{name}: {n_bindings(f)} bindings" for name, f in mod.items()) + "\n"


def test_print_before_after():
    @module_pass
    def grow(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    out = io.StringIO()
    with PassContext(instruments=[PrintBeforeAfter(stream=out, printer=_names_printer)]):
        grow(make_mod())
    text = out.getvalue()
    assert "# IR before pass grow\nmain: 2 bindings" in text
    assert "# IR after pass grow\nmain: 3 bindings" in text


def test_print_changed_diffs_only_changed_passes():
    @module_pass
    def grow(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    @module_pass
    def same(mod, ctx):
        return mod

    out = io.StringIO()
    inst = PrintChanged(file=out, printer=_names_printer)
    with PassContext(instruments=[inst]):
        Sequential([same, grow, same])(make_mod())
    text = out.getvalue()
    assert inst.changed == ["grow"]
    assert "--- before grow" in text and "+++ after grow" in text
    assert "-main: 2 bindings" in text and "+main: 3 bindings" in text
    assert "same" not in text


def test_print_changed_with_the_real_printer():
    import retrograd.parser.printer  # noqa: F401  (our own module: it must import, never skip)

    @module_pass
    def grow(mod, ctx):
        return mod.with_function("main", add_exp(mod["main"]))

    out = io.StringIO()
    with PassContext(instruments=[PrintChanged(file=out)]):
        grow(make_mod())
    diff = out.getvalue()
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert any("R.exp" in line for line in added), diff
