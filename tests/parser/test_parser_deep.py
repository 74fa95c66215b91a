"""Long binding chains parse, print and round-trip without recursion (the benchmark times 100,000)."""

from __future__ import annotations

import sys

import pytest

from retrograd.errors import DiagnosticError
from retrograd.ir import BlockBuilder, Function, IRModule, Var
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.structural import structural_equal
from retrograd.ops.api import R
from retrograd.parser import parse, print_module

N = 20_000


@pytest.fixture
def low_recursion_limit():
    """Default-sized stack: anything recursing per binding fails here."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    yield
    sys.setrecursionlimit(old)


def chain_text(n: int) -> str:
    ops = ("R.exp", "R.sin", "R.negative")
    lines = ["@I.ir_module", "class Module:", "    @R.function",
             '    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):', "        with R.dataflow():"]
    prev = "x"
    for i in range(n):
        lines.append(f"            v{i} = {ops[i % 3]}({prev})")
        prev = f"v{i}"
    lines += [f"            R.output({prev})", "        y = R.add(" + prev + ", x)", "        return y"]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_long_chain_parses_prints_and_roundtrips(low_recursion_limit):
    mod = parse(chain_text(N))
    (dataflow, plain) = mod["main"].body.blocks
    assert len(dataflow.bindings) == N and len(plain.bindings) == 1
    # Each binding uses the previous one: the chain really is a chain.
    bindings = dataflow.bindings
    assert all(bindings[i].value.args[0] is bindings[i - 1].var for i in range(1, N))
    text = print_module(mod)
    back = parse(text)
    assert structural_equal(mod, back)
    assert print_module(back) == text


@pytest.mark.slow
def test_long_chain_built_by_blockbuilder_prints(low_recursion_limit):
    x = Var("x", TensorStructInfo((3,), "float32"))
    bb = BlockBuilder()
    bb.begin_scope()
    v = x
    for _ in range(N):
        v = bb.emit(R.tanh(v))
    body = bb.end_scope(v)
    mod = IRModule({"main": Function([x], body, body.struct_info)})
    text = print_module(mod)
    assert text.count(" = R.tanh(") == N
    assert structural_equal(parse(text), mod)


def test_many_functions_and_a_wide_signature(low_recursion_limit):
    params = ", ".join(f'p{i}: R.Tensor((2,), "float32")' for i in range(3000))
    funcs = "".join(
        f"    @R.function\n    def f{i}({params}) -> R.Tensor((2,), \"float32\"):\n        return p{i}\n" for i in range(3)
    )
    mod = parse("@I.ir_module\nclass Module:\n" + funcs)
    assert [len(f.params) for f in mod.functions().values()] == [3000, 3000, 3000]
    assert structural_equal(parse(print_module(mod)), mod)


def test_absurd_nesting_is_a_diagnostic_not_a_crash(low_recursion_limit):
    depth = 2000
    expr = "R.exp(" * depth + "x" + ")" * depth
    with pytest.raises(DiagnosticError, match="nested too deeply"):
        parse(f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = {expr}\n    return y\n')
