"""Error messages of the command, through a subprocess: located pipeline errors of every kind, did-you-mean,
exit codes (1: the input or a value is wrong, 2: the command line is malformed), no internal reprs."""

from __future__ import annotations

import re

import numpy as np
import pytest
from cli.helpers import CORPUS, MLP, cli

# Every kind of pipeline error, with the text each one's caret must underline.
PIPELINE_ERRORS = [
    ("dce $", "$"),  # a character no token starts with
    ("dce,", ""),  # a pass name is missing (the caret is at the end)
    ("dce(", ""),
    ("dce)", ")"),
    ("gradient(func=main", ""),
    ("dcee", "dcee"),  # unknown pass
    ("gradient(fnuc=main)", "fnuc=main"),  # unknown option
    ("gradient(func=main, func=main)", "func"),  # option given twice
    ("gradient(func=main, func_name=main)", "func_name=main"),  # the same option through its alias
    ("gradient(func=main, 0)", "0"),  # positional after keyword
    ("dce(true, 1)", "1"),  # too many positional options
    ("gradient", "gradient"),  # a required option is missing
    ("gradient(func=main, target_index=1.5)", "target_index=1.5"),  # ill-typed value
    ('gradient(func="\\x")', "\\x"),  # bad escape in a string
    ("gradient(func=" + "[" * 60 + ")", "["),  # nested too deeply
    ("checkpoint(func=main, policy=nope)", "policy=nope"),  # rejected by the pass's constructor
    ("checkpoint(func=main, budget=fast)", "budget=fast"),
    ("gradient(func=mian)", "gradient(func=mian)"),  # unknown function, found when the pass runs
    ("gradient(func=main, require_grads=[zz])", "require_grads=[zz]"),  # option values checked when it runs
    ("gradient(func=main, target_index=3)", "target_index=3"),
    ("gradient(func=main, seeds=fast)", "seeds=fast"),
    ("gradient(func=main), checkpoint(func=main_adjoint, budget=10)", "budget=10"),  # infeasible budget
    ("checkpoint(func=mian)", "func=mian"),
]


@pytest.mark.parametrize("pipeline, underlined", PIPELINE_ERRORS, ids=[p for p, _ in PIPELINE_ERRORS])
def test_every_pipeline_error_points_into_the_pipeline_text(pipeline, underlined):
    proc = cli("opt", MLP, "-p", pipeline)
    assert proc.returncode == 1, proc.err
    head, quoted, caret = proc.err.splitlines()[:3]
    m = re.match(r"<pipeline>:1:(\d+): ", head)
    assert m, proc.err
    assert quoted == "  " + pipeline
    col = caret.index("^")
    assert col == int(m.group(1)) + 1
    if underlined:
        assert quoted[col:].startswith(underlined) and caret.strip() == "^" * max(1, len(caret.strip()))
    else:
        assert col == len(quoted)


def test_the_second_p_option_is_named_in_its_errors():
    proc = cli("opt", MLP, "-p", "dce", "-p", "gradient(func=mian)")
    assert proc.returncode == 1 and proc.err.startswith("<pipeline 2>:1:1:")
    assert "did you mean 'main'?" in proc.err


@pytest.mark.parametrize(
    "argv, suggestion",
    [
        (["run", MLP, "--func", "mian"], "'main'"),
        (["dot", MLP, "--func", "mian"], "'main'"),
        (["opt", MLP, "-p", "gradiant(func=main)"], "'gradient'"),
        (["opt", MLP, "-p", "gradient(fnuc=main)"], "'func'"),
        (["opt", MLP, "-p", "gradient(func=main, targt_index=0)"], "'target_index'"),
        (["opt", MLP, "-p", "dce(remove_unused_function=false)"], "'remove_unused_functions'"),
        (["opt", MLP, "-p", "gradient(func=mian)"], "'main'"),
        (["opt", MLP, "--print-ir-before=cs", "-p", "cse"], "'cse'"),
        (["run", str(CORPUS / "c06_symbolic_strings.py"), "--dim", "nn=4"], "'n'"),
        (["ops", "nn.reluu"], "'R.nn.relu'"),
    ],
)
def test_did_you_mean(argv, suggestion):
    proc = cli(*argv)
    assert proc.returncode == 1 and f"did you mean {suggestion}" in proc.err, proc.err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["bogus"],
        ["opt"],
        ["run", MLP, "--repeat", "many"],
        ["run", MLP, "--seed"],
        ["dot", MLP, "--svg", "--png"],
        ["opt", MLP, "--no-such-option"],
        ["ops", "a", "b"],
    ],
)
def test_malformed_command_lines_exit_with_2_and_usage(argv):
    proc = cli(*argv)
    assert proc.returncode == 2 and "usage: retrograd" in proc.err


def test_traceback_only_on_request(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('@R.function\ndef main(x: R.Tensor((3,), "float32")):\n    y = R.foo(x)\n    return y\n')
    quiet = cli("check", str(bad))
    assert quiet.returncode == 1 and f"{bad}:3:" in quiet.err
    for argv in (["--traceback", "check", str(bad)], ["check", str(bad), "--traceback"]):
        loud = cli(*argv)
        assert loud.returncode == 1 and "Traceback" in loud.err and f"{bad}:3:" in loud.err


# Text that only a Python repr of an internal object would put in a message.
REPR_MARKS = ("<retrograd.", "object at 0x", "Var(", "StructInfo(", "Span(", "<class ", "<function ", "PassInfo",
              "IRModule(", "Call(", "OpDef(", "<Op ", "dtype('", "array(")


def bad_invocations(tmp_path) -> list[list[str]]:
    ndim = tmp_path / "ndim.py"
    ndim.write_text('@R.function\ndef main(x: R.Tensor(ndim=2, dtype="float32")):\n    return x\n')
    shape = tmp_path / "shape.py"
    shape.write_text('@R.function\ndef main(s: R.Shape([2, 3]), x: R.Tensor((2, 3), "float32")):\n    return x\n')
    obj = tmp_path / "obj.npz"
    np.savez(obj, x=np.array([{"a": 1}], dtype=object))
    f64 = tmp_path / "f64.npz"
    np.savez(f64, x=np.zeros((8, 16)))
    wrong_shape = tmp_path / "shape.npz"
    np.savez(wrong_shape, x=np.zeros((3, 3), "float32"))
    bad = tmp_path / "bad.py"
    bad.write_text('@R.function\ndef main(x: R.Tensor((3,), "float32")):\n    y = R.add(x, R.nn.relu(x, axis=1))\n    return y\n')
    ill = tmp_path / "ill.py"
    ill.write_text('@R.function\ndef main(x: R.Tensor((3,), "float32")):\n    y = R.add(x, zz)\n    return y\n')
    c06 = str(CORPUS / "c06_symbolic_strings.py")
    return [
        ["run", str(ndim)], ["run", str(shape)], ["run", MLP, "--inputs", str(obj)], ["run", MLP, "--inputs", str(f64)],
        ["run", MLP, "--inputs", str(wrong_shape)], ["run", MLP, "--inputs", str(tmp_path)], ["check", str(bad)],
        ["check", str(ill)], ["run", c06], ["run", c06, "--dim", "n=x"], ["run", MLP, "--func", "nope"],
        ["dot", MLP, "--func", "nope"], ["opt", MLP, "-p", "gradient(func=main, require_grads=[1.5])"],
        ["opt", MLP, "-p", "gradient(func=main, seeds=[[1]])"], ["opt", MLP, "-p", "gradient(func=main, target_index=[0, 0])"],
        ["opt", MLP, "-p", "gradient(func=main, sparse_grads=[x])"], ["opt", MLP, "-p", "checkpoint(func=main, budget=-3)"],
        ["opt", MLP, "-p", "dce(remove_unused_functions=[1])"], ["opt", MLP, "-p", "fold-constant(grow=none)"],
        ["opt", MLP, "--print-ir-after", "nope"], ["ops", "zzzz"], ["lower", str(tmp_path / "missing.py")],
        ["run", MLP, "--save", str(tmp_path)], ["run", MLP, "--repeat", "-1"],
    ]


def test_error_messages_show_no_internal_reprs(tmp_path):
    for argv in bad_invocations(tmp_path):
        proc = cli(*argv)
        assert proc.returncode == 1, (argv, proc.err)
        assert proc.err.strip() and "internal error" not in proc.err, (argv, proc.err)
        for mark in REPR_MARKS:
            assert mark not in proc.err, (argv, mark, proc.err)


def test_a_bug_is_one_line_and_its_traceback_is_shown_on_request(tmp_path):
    plugin = tmp_path / "buggy.py"
    plugin.write_text(
        "from retrograd.passes import module_pass\n\n\n@module_pass\nclass Buggy:\n"
        '    """Divides by zero."""\n\n    def transform_module(self, mod, ctx):\n        return 1 // 0\n'
    )
    quiet = cli("--load", str(plugin), "opt", MLP, "-p", "buggy")
    assert quiet.returncode == 1
    assert quiet.err.splitlines() == ["internal error: ZeroDivisionError: integer division or modulo by zero; "
                                      "rerun with --traceback and report it"]
    loud = cli("--load", str(plugin), "opt", MLP, "-p", "buggy", "--traceback")
    assert loud.returncode == 1 and "Traceback" in loud.err and "return 1 // 0" in loud.err


@pytest.mark.parametrize("text, where", [("x = 1\ndef f(:\n", ":2:7: "), ("x = 1\0\n", ":1:1: ")])
def test_a_plugin_with_a_syntax_error_is_located_in_it(tmp_path, text, where):
    # Python gives no position for a null byte: the file's start, never line 0, column 0.
    plugin = tmp_path / "plugin.py"
    plugin.write_bytes(text.encode())
    proc = cli("--load", str(plugin), "check", MLP)
    assert proc.returncode == 1
    assert proc.err.startswith(f"{plugin}{where}error: the plugin loaded with --load has a syntax error: "), proc.err
