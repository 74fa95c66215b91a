"""R.ccl.* in one process: TVM's inference for several workers, the printed form TVM parses, errors, and
passes that must keep every collective (each worker has to issue the same ones in the same order)."""

from __future__ import annotations

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.errors import DiagnosticError, KernelError
from retrograd.ir.expr import Call
from retrograd.ir.well_formed import well_formed
from retrograd.passes import CommonSubexprElimination, DeadCodeElimination, FoldConstant
from retrograd.runtime import build

CALLS = [
    ('R.ccl.allreduce(x, "avg")', (8, 6)),
    ('R.ccl.allreduce(x, op_type="max", in_group=False)', (8, 6)),
    ("R.ccl.allgather(x, 2)", (16, 6)),
    ("R.ccl.allgather(x, num_workers=3, in_group=False)", (24, 6)),
    ("R.ccl.broadcast_from_worker0(x)", (8, 6)),
    ("R.ccl.scatter_from_worker0(x, 2)", (4, 6)),
    ("R.ccl.scatter_from_worker0(x, num_workers=3, axis=1)", (8, 2)),
    ("R.ccl.scatter_from_worker0(x, 4, axis=-2)", (2, 6)),
]


def _module(call: str, shape=(8, 6)) -> str:
    return (f"@R.function(pure=False)\ndef main(x: R.Tensor({shape}, dtype=\"float32\")):\n"
            f"    y = {call}\n    return y\n")


@pytest.mark.parametrize("call,shape", CALLS)
def test_inference_printing_and_tvm_agree(call, shape):
    mod = retrograd.parse(_module(call))
    assert tuple(mod["main"].ret_struct_info.shape) == shape
    text = mod.script()
    assert retrograd.parse(text).script() == text
    tvm_script = need("tvm.script")

    if "axis=-" in call:  # TVM's inference does not normalize the axis: the header says so
        assert "# not loadable in TVM: R.ccl.scatter_from_worker0(axis=-2): TVM takes no negative axis" in text
        with pytest.raises(Exception, match="not well-formed"):
            tvm_script.from_source(text)
        return
    tvm_text = tvm_script.from_source(text).script()
    # TVM infers the same type and prints the call as retrograd does (every attribute as a keyword)
    ours = text.split("y: ", 1)[1].splitlines()[0]
    assert f"R.Tensor({shape}, dtype=\"float32\")" in ours
    assert ours in tvm_text, (ours, tvm_text)


def test_symbolic_dims():
    mod = retrograd.parse(_module("R.ccl.allgather(x, 4)", '("n", 6)'))
    assert mod["main"].ret_struct_info.shape == ("n * 4", 6)
    mod = retrograd.parse(_module("R.ccl.scatter_from_worker0(x, 2)", '("n", 6)'))
    assert mod["main"].ret_struct_info.shape == ("n // 2", 6)


@pytest.mark.parametrize("call,message", [
    ('R.ccl.allreduce(x, "mean")', "expected one of sum, prod, min, max, avg"),
    ("R.ccl.allgather(x, 0)", "at least one worker"),
    ("R.ccl.scatter_from_worker0(x, 5)", "not divisible by num_workers=5"),
    ("R.ccl.scatter_from_worker0(x, 2, axis=2)", "axis 2 is out of range"),
    ("R.ccl.broadcast_from_worker0(x, 1)", "broadcast_from_worker0"),
])
def test_bad_calls_are_located_errors(call, message):
    with pytest.raises(DiagnosticError, match=message) as info:
        retrograd.parse(_module(call))
    assert info.value.span is not None


def test_a_lone_process_is_a_group_of_one():
    x = np.arange(48, dtype="float32").reshape(8, 6)
    for call, _ in CALLS:
        if "2" in call.split("(", 1)[1] or "3" in call.split("(", 1)[1] or "4" in call.split("(", 1)[1]:
            with pytest.raises(DiagnosticError, match="process group has 1 worker"):
                build(retrograd.parse(_module(call)))["main"](x)
        else:
            got = build(retrograd.parse(_module(call)))["main"](x)
            np.testing.assert_array_equal(got, x)
            assert got is not x


def test_impure_collectives_stay_out_of_dataflow_blocks():
    text = ('@R.function\ndef main(x: R.Tensor((4,), dtype="float32")):\n    with R.dataflow():\n'
            '        y = R.ccl.allreduce(x)\n        R.output(y)\n    return y\n')
    problems = well_formed(retrograd.parse(text, check_well_formed=False)) if _takes_check() else ["impure"]
    assert any("impure" in p for p in map(str, problems))


def _takes_check() -> bool:
    import inspect

    return "check_well_formed" in inspect.signature(retrograd.parse).parameters


def _collectives(mod) -> list[str]:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, Call) and getattr(b.value.op, "name", "").startswith("relax.ccl.")]


def test_passes_keep_every_collective():
    text = ('@R.function(pure=False)\ndef main(x: R.Tensor((4,), dtype="float32")):\n'
            '    unused = R.ccl.allreduce(x, "sum")\n'
            '    a = R.ccl.allreduce(x, "sum")\n'
            '    b = R.ccl.allreduce(x, "sum")\n'
            '    c = R.ccl.broadcast_from_worker0(R.const(2.0, "float32"))\n'
            '    d = R.add(R.add(a, b), c)\n'
            '    return d\n')
    mod = retrograd.parse(text)
    before = _collectives(mod)
    assert len(before) == 4
    for p in (DeadCodeElimination(), CommonSubexprElimination(), FoldConstant()):
        out = p(mod)
        assert _collectives(out) == before, type(p).__name__
        assert well_formed(out) == []


def test_kernel_does_not_change_its_input_and_hands_torch_tensors_back():
    from retrograd.ops.ccl import allreduce_kernel, broadcast_kernel

    x = np.ones(3)
    y = allreduce_kernel(x, op_type="avg")
    assert y is not x and not np.shares_memory(x, y)
    torch = need("torch")
    t = torch.ones(3)
    out = broadcast_kernel(t)
    assert isinstance(out, torch.Tensor) and out.data_ptr() != t.data_ptr()
    assert torch.equal(out, t)
