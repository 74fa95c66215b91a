"""Executor: kernel failures located at their binding; build-time errors; profiling output."""

import numpy as np
import pytest
from runtime.helpers import T, function, module

import retrograd
from retrograd.errors import DiagnosticError, ExecutionError, KernelError, Span
from retrograd.ir import const
from retrograd.ops.api import R
from retrograd.ops.registry import Arg, Attr, OpDef
from retrograd.ops.attr_types import to_int

SOURCE = "def main(x):\n    lv = R.test_fail(x, limit=2)\n    return lv\n"


def _fail_kernel(x, limit):
    if x.size > limit:
        raise KernelError(f"R.test_fail: size {x.size} exceeds the limit {limit}")
    return x


def _raw_kernel(x, limit):
    return x.reshape(limit, -1)  # NumPy's own ValueError for sizes that do not divide


fail_op = OpDef("relax.test_fail", (Arg("x"),), (Attr("limit", to_int, 1),), infer=lambda c: c.tensor(0), kernel=_fail_kernel)
raw_op = OpDef("relax.test_raw", (Arg("x"),), (Attr("limit", to_int, 1),), infer=lambda c: c.tensor(0), kernel=_raw_kernel)
no_kernel_op = OpDef("relax.test_nokernel", (Arg("x"),), (), infer=lambda c: c.tensor(0))


def _one_op_module(op, **attrs):
    span = Span("model.py", 2, 10, 2, 31, SOURCE)
    return module(main=function([("x", T((3, 2)))], lambda bb, x: bb.emit(op(x, **attrs), "lv", span=span)))


def test_kernel_error_names_function_binding_op_inputs_and_span():
    ex = retrograd.build(_one_op_module(fail_op, limit=2))
    with pytest.raises(ExecutionError) as info:
        ex["main"](np.zeros((3, 2), "float32"))
    err = info.value
    assert err.span is not None and (err.span.line, err.span.col) == (2, 10)
    lines = str(err).splitlines()
    assert lines[0] == (
        "model.py:2:10: execution error: main: binding 'lv' = R.test_fail(x, limit=2) failed: "
        "R.test_fail: size 6 exceeds the limit 2"
    )
    assert lines[1] == "      lv = R.test_fail(x, limit=2)"
    assert lines[2] == "  " + " " * 9 + "^" * 21  # under R.test_fail(...), column 10
    assert lines[3] == "  note: inputs: x: array of shape (3, 2) float32"
    assert err.__cause__ is None and err.__suppress_context__


def test_numpy_error_is_reported_with_its_type_and_message():
    ex = retrograd.build(_one_op_module(raw_op, limit=4))
    with pytest.raises(ExecutionError, match=r"R\.test_raw\(x, limit=4\) failed: ValueError: cannot reshape array of size 6"):
        ex["main"](np.zeros((3, 2), "float32"))


def test_take_out_of_range_index():
    ex = retrograd.build(retrograd.parse('''
@R.function
def main(w: R.Tensor((10, 4), "float32"), t: R.Tensor((3,), "int64")):
    with R.dataflow():
        rows = R.take(w, t, axis=0)
        out = R.exp(rows)
        R.output(out)
    return out
''', "emb.py"))
    w = np.arange(40, dtype="float32").reshape(10, 4) / 40
    np.testing.assert_allclose(ex["main"](w, np.array([0, 9, 3])), np.exp(w[[0, 9, 3]]), rtol=1e-6)
    with pytest.raises(ExecutionError) as info:
        ex["main"](w, np.array([0, 12, 3]))
    lines = str(info.value).splitlines()
    assert lines[0].startswith("emb.py:5:9: execution error: main: binding 'rows' = R.take(w, t, axis=0, mode=\"fast\") failed: ")
    assert "12" in lines[0]
    assert lines[1] == "          rows = R.take(w, t, axis=0)"
    assert lines[3] == "  note: inputs: w: array of shape (10, 4) float32; t: array of shape (3,) int64"


def test_op_without_kernel_is_a_build_error():
    with pytest.raises(DiagnosticError, match=r"main: op R\.test_nokernel has no kernel \(binding 'lv'\)") as info:
        retrograd.build(_one_op_module(no_kernel_op))
    assert info.value.span.line == 2


def test_check_mode_catches_a_kernel_returning_the_wrong_shape():
    liar = OpDef("relax.test_liar", (Arg("x"),), (), infer=lambda c: c.tensor(0), kernel=lambda x: x[:1])
    mod = module(main=function([("x", T((3,)))], lambda bb, x: bb.emit(liar(x), "lv")))
    np.testing.assert_array_equal(retrograd.build(mod)["main"](np.arange(3.0, dtype="float32")), [0.0])
    with pytest.raises(ExecutionError, match=r"failed: its result 'lv' expects Tensor\(\(3,\), float32\), got array of shape \(1,\)"):
        retrograd.build(mod, check=True)["main"](np.arange(3.0, dtype="float32"))


def test_profile_counts_calls_and_keeps_results_and_peak():
    def body(bb, x):
        a = bb.emit(R.exp(x), "a")
        b = bb.emit(R.add(a, x), "b")
        c = bb.emit(R.exp(b), "c")
        return bb.emit(R.multiply(c, const(2.0)), "d")

    mod = module(main=function([("x", T((64,)))], body))
    plain, prof = retrograd.build(mod), retrograd.build(mod, profile=True)
    x = np.linspace(-1, 1, 64, dtype="float32")
    for _ in range(3):
        np.testing.assert_array_equal(plain["main"](x), prof["main"](x))
    assert plain.stats.peak_live_bytes == prof.stats.peak_live_bytes == 3 * x.nbytes
    assert prof.profile["R.exp"][0] == 6 and prof.profile["R.add"][0] == 3 and prof.profile["R.multiply"][0] == 3
    assert prof.profile["R.exp"][2] == 6 * x.nbytes
    report = prof.profile_report()
    header, *rows, total = report.splitlines()
    assert header.split() == ["op", "calls", "total", "ms", "mean", "us", "%", "output"]
    assert {r.split()[0] for r in rows} == {"R.exp", "R.add", "R.multiply"}
    exp_row = next(r for r in rows if r.startswith("R.exp"))
    assert exp_row.split()[1] == "6" and exp_row.endswith(f"{6 * x.nbytes / 1024:.1f} KiB")
    assert total.split()[:2] == ["total", "12"]
    assert "profiling is off" in plain.profile_report()
