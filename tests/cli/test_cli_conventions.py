"""mlir-opt / opt conventions of the command, through a subprocess: stdin and stdout as '-', print-ir
instruments, -p composing in order, `passes` and `ops` listings, --load plugins, help on every option."""

from __future__ import annotations

import argparse
import inspect
import io
import re

import numpy as np
import pytest
from cli.helpers import CORPUS, MLP, ROOT, cli

import retrograd
from retrograd.passes import Gradient

MLP_TEXT = (ROOT / "examples" / "mlp.py").read_text()


def headers(stderr: str) -> list[str]:
    return re.findall(r"^# IR (before|after) pass ([a-z-]+)", stderr, re.M)


# -- '-' is standard input and standard output ------------------------------------------------


def test_check_reads_standard_input():
    proc = cli("check", "-", input=MLP_TEXT)
    assert proc.returncode == 0 and proc.out.strip() == "<stdin>: ok (1 function(s), 7 binding(s))"


def test_opt_from_stdin_to_stdout_and_to_a_file(tmp_path):
    want = Gradient("main")(retrograd.parse_file(MLP))
    proc = cli("opt", "-", "-p", "gradient(func=main)", "-o", "-", input=MLP_TEXT)
    assert proc.returncode == 0, proc.err
    assert retrograd.structural_equal(retrograd.parse(proc.out), want)
    out = tmp_path / "adj.py"
    proc = cli("opt", MLP, "-p", "gradient(func=main)", "-o", str(out))
    assert proc.returncode == 0 and proc.out == ""
    assert retrograd.structural_equal(retrograd.parse_file(out), want)
    assert not (ROOT / "-").exists()


def test_lower_and_dot_read_stdin_and_write_stdout():
    lowered = cli("lower", "-", "-o", "-", input=MLP_TEXT)
    assert lowered.returncode == 0 and "def main(x, w0, b0, w1, b1, targets):" in lowered.out
    dot = cli("dot", "-", "-o", "-", input=MLP_TEXT)
    assert dot.returncode == 0 and dot.out.lstrip().startswith("digraph")


def test_opt_output_piped_into_lower_computes_the_gradient():
    adj = cli("opt", MLP, "-p", "gradient(func=main)")
    lowered = cli("lower", "-", input=adj.stdout)
    assert lowered.returncode == 0, lowered.err
    scope: dict = {}
    exec(compile(lowered.out, "<lowered>", "exec"), scope)  # the command's own output under test
    rng = np.random.default_rng(0)
    x, w0, b0 = rng.standard_normal((8, 16)), rng.standard_normal((16, 32)), rng.standard_normal(32)
    w1, b1, t = rng.standard_normal((32, 10)), rng.standard_normal(10), rng.integers(0, 10, 8)
    f32 = [a.astype("float32") for a in (x, w0, b0, w1, b1)]
    loss, grads = scope["main_adjoint"](*f32, t)
    # Independent reference, float64: the gradient of mean NLL of log_softmax w.r.t. b1.
    h = np.maximum(x @ w0 + b0, 0)
    logits = h @ w1 + b1
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    onehot = np.eye(10)[t]
    np.testing.assert_allclose(loss, -np.log(p[np.arange(8), t]).mean(), rtol=1e-4)
    np.testing.assert_allclose(grads[4], ((p - onehot) / 8).sum(0), rtol=1e-3, atol=1e-5)


def test_run_reads_the_script_or_the_inputs_from_stdin(tmp_path):
    from_file = cli("run", MLP)
    from_stdin = cli("run", "-", input=MLP_TEXT)
    assert from_file.returncode == 0 and from_stdin.out == from_file.out
    buf = io.BytesIO()
    x = np.linspace(-1, 1, 12, dtype="float32").reshape(3, 4)
    np.savez(buf, x=x)
    script = tmp_path / "exp.py"
    script.write_text('@R.function\ndef main(x: R.Tensor((3, 4), "float32")):\n    y = R.exp(x)\n    return y\n')
    proc = cli("run", str(script), "--inputs", "-", "--save", str(tmp_path / "out.npz"), input=buf.getvalue())
    assert proc.returncode == 0, proc.err
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["result"], np.exp(x.astype("float64")), rtol=1e-6)
    both = cli("run", "-", "--inputs", "-", input=MLP_TEXT)
    assert both.returncode == 1 and "both" in both.err


# -- print-ir instruments and -p composition -----------------------------------------------------


def test_print_ir_before_and_after_all_and_the_old_spelling():
    pipe = "gradient(func=main), dce"
    before = cli("opt", MLP, "-p", pipe, "--print-ir-before-all")
    assert headers(before.err) == [("before", "gradient"), ("before", "dce")]
    after = cli("opt", MLP, "-p", pipe, "--print-ir-after-all")
    assert headers(after.err) == [("after", "gradient"), ("after", "dce")]
    assert cli("opt", MLP, "-p", pipe, "--print-after-all").err == after.err
    # What is printed after gradient is the module with the adjoint, and it parses.
    first = after.err.split("# IR after pass dce")[0].split("\n", 1)[1]
    assert "main_adjoint" in retrograd.parse(first)


def test_print_ir_before_and_after_named_passes():
    proc = cli("opt", MLP, "-p", "gradient(func=main), cse, dce", "--print-ir-after=gradient", "--print-ir-before", "dce,cse")
    assert proc.returncode == 0, proc.err
    assert headers(proc.err) == [("after", "gradient"), ("before", "cse"), ("before", "dce")]
    unknown = cli("opt", MLP, "-p", "dce", "--print-ir-after=gradiant")
    assert unknown.returncode == 1 and "did you mean 'gradient'" in unknown.err


@pytest.mark.parametrize("order", [["gradient(func=main)", "cse", "dce"], ["dce", "cse", "gradient(func=main)"]])
def test_several_p_options_run_in_the_order_given(order):
    args = [a for p in order for a in ("-p", p)]
    proc = cli("opt", MLP, *args, "--print-ir-before-all")
    assert proc.returncode == 0, proc.err
    assert [name for _, name in headers(proc.err)] == [p.split("(")[0] for p in order]
    single = cli("opt", MLP, "-p", ", ".join(order))
    assert proc.out == single.out


# -- listings --------------------------------------------------------------------------------------


def test_passes_lists_descriptions_and_typed_options_with_defaults():
    from retrograd.passes import pass_factory

    proc = cli("passes")
    assert proc.returncode == 0
    entries = re.split(r"\n(?=\S)", proc.out.strip())
    names = [e.split()[0] for e in entries]
    # (This process's registry may also hold passes other tests registered.)
    assert names == sorted(names) and names == ["cast-floats", "checkpoint", "cse", "dce", "fold-constant", "gradient", "simplify"]
    for e in entries:
        doc = inspect.getdoc(pass_factory(e.split()[0])).splitlines()[0]
        assert e.splitlines()[0].endswith(doc)
    text = {e.split()[0]: e for e in entries}
    # The options are the pass classes' annotated attributes and constructor parameters.
    assert "    remove_unused_functions: bool, default true" in text["dce"].splitlines()
    assert "    grow: bool, default false" in text["fold-constant"].splitlines()
    lines = text["gradient"].splitlines()
    assert "    func_name (or func): str, required" in lines and "    cleanup: bool, default true" in lines
    assert "    target_index: int | list[int] | None, default 0" in lines
    assert "    budget: int | str | None, default none" in text["checkpoint"].splitlines()


def test_ops_lists_every_op_with_attributes_kernel_and_gradient():
    from retrograd.ops.registry import all_ops

    proc = cli("ops")
    heads = [line for line in proc.out.splitlines() if not line.startswith(" ")]
    assert sorted(h.split("(")[0] for h in heads) == sorted(op.script_name for op in all_ops())
    conv = cli("ops", "nn.conv2d").out.splitlines()
    assert conv[0] == "R.nn.conv2d(data, weight)  kernel: yes  gradient: yes"
    assert conv[1].startswith("    attributes: strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1,")
    # every op's gradient column agrees with the registry (no built-in op lacks a rule today)
    by_name = {op.script_name: op for op in all_ops()}
    for head in heads:
        op = by_name[head.split("(")[0]]
        assert head.endswith("gradient: no") == (op.grad is None), head
    assert cli("ops", "R.greater").out.splitlines()[0].endswith("gradient: none needed")
    pools = [h.split("(")[0] for h in cli("ops", "nn.*pool2d").out.splitlines() if not h.startswith(" ")]
    assert pools == ["R.nn.adaptive_avg_pool2d", "R.nn.avg_pool2d", "R.nn.max_pool2d"]
    bad = cli("ops", "convd2")
    assert bad.returncode == 1 and "R.nn.conv2d" in bad.err


# -- plugins -------------------------------------------------------------------------------------

PLUGIN = '''
"""A plugin: a pass dropping functions by suffix, and an op squaring its argument."""
import numpy as np
from retrograd.ir import IRModule
from retrograd.ops.registry import register
from retrograd.ops.elementwise import infer_unary as infer
from retrograd.passes import module_pass


@module_pass
class StripSuffix:
    """Remove the functions whose name ends with the suffix."""

    suffix: str = "_adjoint"

    def transform_module(self, mod, ctx):
        return IRModule({n: f for n, f in mod.items() if not n.endswith(self.suffix)}, attrs=mod.attrs)


register("relax.plugin_square", ("x",), infer=infer, kernel=lambda x: np.square(x))
'''


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "plugin.py"
    path.write_text(PLUGIN)
    return str(path)


def test_a_loaded_plugin_registers_a_pass_used_in_a_pipeline(plugin):
    proc = cli("--load", plugin, "opt", MLP, "-p", "gradient(func=main), strip-suffix(suffix=_adjoint)")
    assert proc.returncode == 0, proc.err
    assert list(retrograd.parse(proc.out).keys()) == ["main"]
    kept = cli("opt", MLP, "--load", plugin, "-p", "gradient(func=main), strip-suffix(suffix=nothing)")
    assert list(retrograd.parse(kept.out).keys()) == ["main", "main_adjoint"]
    listing = cli("passes", "--load", plugin).out
    assert "strip-suffix  Remove the functions whose name ends with the suffix.\n    suffix: str, default _adjoint" in listing
    assert cli("opt", MLP, "-p", "strip-suffix").returncode == 1  # not loaded: unknown


def test_a_loaded_plugin_registers_an_op_scripts_can_run(plugin, tmp_path):
    script = tmp_path / "sq.py"
    script.write_text('@R.function\ndef main(x: R.Tensor((5,), "float32")):\n    y = R.plugin_square(x)\n    return y\n')
    x = np.arange(5, dtype="float32") - 2
    np.save(tmp_path / "x.npy", x)
    proc = cli("--load", plugin, "run", str(script), "--inputs", str(tmp_path / "x.npy"), "--save", str(tmp_path / "o.npz"))
    assert proc.returncode == 0, proc.err
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["result"], x * x)
    assert cli("--load", plugin, "ops", "plugin_square").out.startswith("R.plugin_square(x)  kernel: yes  gradient: no")


@pytest.mark.parametrize(
    "source, fragment",
    [("def broken(:\n", "syntax error"), ("raise RuntimeError('no license')\n", "RuntimeError: no license")],
)
def test_a_failing_plugin_is_a_one_line_error_and_a_traceback_on_request(tmp_path, source, fragment):
    path = tmp_path / "bad_plugin.py"
    path.write_text(source)
    proc = cli("--load", str(path), "passes")
    assert proc.returncode == 1 and fragment in proc.err and str(path) in proc.err
    loud = cli("--traceback", "--load", str(path), "passes")
    assert loud.returncode == 1 and "Traceback" in loud.err
    missing = cli("--load", str(tmp_path / "nope.py"), "passes")
    assert missing.returncode == 1 and "no such file" in missing.err


# -- help ------------------------------------------------------------------------------------------


def _parsers(parser, path):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_of_every_command_has_help():
    from retrograd.cli import build_parser

    seen = 0
    for path, parser in _parsers(build_parser(), "retrograd"):
        for action in parser._actions:
            seen += 1
            assert action.help, f"{path}: {action.option_strings or action.dest} has no help"
    assert seen > 60


@pytest.mark.parametrize("command", ["check", "opt", "run", "lower", "dot", "passes", "ops", "train"])
def test_help_of_each_command(command):
    proc = cli(command, "--help")
    assert proc.returncode == 0 and proc.out.startswith("usage: retrograd " + command)


def test_corpus_files_check_from_stdin():
    for path in sorted(CORPUS.glob("c0*.py"))[:5]:
        proc = cli("check", "-", input=path.read_bytes())
        assert proc.returncode == 0 and proc.out.startswith("<stdin>: ok"), proc.err


def test_script_warnings_are_plain_located_lines(tmp_path):
    src = tmp_path / "attrs.py"
    src.write_text(
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):\n'
        '        R.func_attr({"num_input": 1, "params": [metadata["ffi.Tensor"][0]]})\n'
        "        y = R.add(x, x)\n        return y\n"
    )
    proc = cli("check", str(src))
    assert proc.returncode == 0
    lines = [line for line in proc.err.splitlines() if line.strip()]
    assert lines == [f"warning: {src}:5:9: dropped attribute 'params' of function 'main': "
                     "the text does not hold the metadata they refer to"], proc.err


def test_train_reads_its_script_from_stdin(tmp_path):
    # least squares: the trained weights must reach the generating ones (an independent closed form)
    script = (
        "@R.function\n"
        'def main(x: R.Tensor(("n", 3), dtype="float64"), w: R.Tensor((3,), dtype="float64"), '
        'y: R.Tensor(("n",), dtype="float64")) -> R.Tensor((), dtype="float64"):\n'
        "    r = R.subtract(R.matmul(x, w), y)\n"
        "    return R.mean(R.multiply(r, r))\n"
    )
    rng = np.random.default_rng(1)
    x = rng.normal(size=(64, 3))
    truth = np.linalg.lstsq(x, x @ np.array([0.5, 2.0, -1.0]), rcond=None)[0]
    np.savez(tmp_path / "d.npz", x=x, y=x @ np.array([0.5, 2.0, -1.0]))
    proc = cli("train", "-", "--data", str(tmp_path / "d.npz"), "--epochs", "100", "--lr", "0.05",
               "--optimizer", "momentum", "--init", "zeros", "--out", str(tmp_path), input=script)
    assert proc.returncode == 0, proc.err
    with np.load(tmp_path / "params.npz", allow_pickle=False) as data:
        np.testing.assert_allclose(data["w"], truth, atol=1e-3)
    bad = cli("train", "-", "--data", str(tmp_path / "d.npz"), input="@R.function\ndef main(:\n")
    assert bad.returncode == 1 and "<stdin>:2:" in bad.err
