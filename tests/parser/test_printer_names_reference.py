"""The printer's names in large functions of repeated and clashing hints, against a naive naming written
here (first come keeps its hint made a name, later ones take the smallest free `base_k`, parameters
first, a var read before its binding named when read), and the text read back. Kept as the reference
for any faster naming scheme (benchmarks/RESULTS.md, "Printing at 1M bindings, names in bulk")."""

from __future__ import annotations

import random
import re

import pytest
from parser.helpers import PlainNames

from retrograd.ir import BlockBuilder, Function, IRModule, Var, const
from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.expr import Call, DataflowVar, SeqExpr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.structural import assert_structural_equal
from retrograd.ops.api import R
from retrograd.parser import parse, print_module

T = TensorStructInfo((2,), "float32")
# Hints that repeat, that equal another's generated name, that are not names, or are reserved.
POOL = ["lv", "lv", "lv", "x", "x_1", "lv_1", "lv_2", "h", "gv", "R", "if", "a.b", "9x", "\u00e9t\u00e9", "_", "v"]


def naive_names(func: Function) -> list[str]:
    """The name of each binding's var, in order, by the rule as stated (parameters named first)."""
    name = PlainNames()
    for p in func.params:
        name(p)
    out = []
    for block in func.body.blocks:
        for b in block.bindings:
            for a in b.value.args:
                if isinstance(a, Var):
                    name(a)
            out.append(name(b.var))
    return out


def printed_names(text: str) -> list[str]:
    return re.findall(r"^\s+(\w+): R\.Tensor", text, re.M)


def random_function(rng: random.Random, n: int, pool=POOL, far: bool = True) -> Function:
    """`n` bindings over two blocks, hints drawn from `pool`, each reading one or two earlier vars
    (near and far)."""
    x = Var(rng.choice(pool), T)
    bb = BlockBuilder()
    bb.begin_scope()
    seen, visible = [x], [x]  # visible: what the block after the dataflow block may read
    for dataflow in (True, False):
        bb.begin_block(dataflow=dataflow)
        if not dataflow:
            seen = list(visible)
        for i in range(n // 2):
            a = seen[-1] if rng.random() < 0.5 or not far else rng.choice(seen)
            if rng.random() < 0.4:
                value = R.add(a, rng.choice(seen))
            elif rng.random() < 0.2:
                value = R.multiply(a, const(1.5))
            else:
                value = R.exp(a)
            if dataflow and (i == n // 2 - 1 or rng.random() < 0.2):
                seen.append(bb.emit_output(value, rng.choice(pool)))
                visible.append(seen[-1])
            else:
                seen.append(bb.emit(value, rng.choice(pool)))
        bb.end_block()
    body = bb.end_scope(seen[-1])
    return Function([x], body, body.struct_info)


@pytest.mark.parametrize("seed", range(6))
def test_random_large_functions_match_the_naive_rule_and_read_back(seed):
    rng = random.Random(seed)
    func = random_function(rng, 700)
    mod = IRModule({"main": func})
    text = print_module(mod)
    assert printed_names(text) == naive_names(func)
    assert_structural_equal(mod, parse(text))


def test_identifier_hints_repeated_close_together_match():
    # A gradient's `lv` every few bindings, among unique hints and hints equal to generated names.
    rng = random.Random(7)
    func = random_function(rng, 900, pool=["lv", "lv", "h", "lv_9x", "w", "w", "lv_b"] + [f"u{i}" for i in range(200)])
    mod = IRModule({"main": func})
    text = print_module(mod)
    assert printed_names(text) == naive_names(func)
    assert_structural_equal(mod, parse(text))


def test_a_gradient_adjoint_matches_the_naive_rule():
    from retrograd.passes import Gradient

    lines = ['x: R.Tensor((4, 8), dtype="float32")'] + [
        f'h{i}: R.Tensor((4, 8), dtype="float32") = R.sin({"x" if i == 0 else f"h{i - 1}"})' for i in range(300)
    ]
    src = "@I.ir_module\nclass Module:\n    @R.function\n    def main(" + lines[0] + ") -> R.Tensor((), dtype=\"float32\"):\n"
    src += "".join(f"        {line}\n" for line in lines[1:])
    src += '        gv: R.Tensor((), dtype="float32") = R.sum(h299, axis=None, keepdims=False)\n        return gv\n'
    adj = Gradient("main")(parse(src))
    text = print_module(adj)
    body = text.split("def main_adjoint", 1)[1]
    assert printed_names(body) == naive_names(adj["main_adjoint"])
    assert_structural_equal(adj, parse(text))


def _chain(n: int, hints) -> tuple[Var, list]:
    x = Var("x", T)
    bindings, cur = [], x
    for i in range(n):
        v = Var(hints[i % len(hints)], T)
        bindings.append(VarBinding(v, R.exp(cur)))
        cur = v
    return x, bindings


@pytest.mark.parametrize("case", ["free_var", "read_before_binding_shared", "read_before_binding_unique",
                                  "bound_twice", "param_rebound"])
def test_ill_formed_and_unusual_large_functions_match_the_naive_rule(case):
    x, bindings = _chain(400, ["lv", "a", "lv", "b"] + [f"u{i}" for i in range(600)])
    func = Function([x], SeqExpr((BindingBlock(tuple(bindings)),), bindings[-1].var, struct_info=T), T)
    late_lv = Var("lv", T)
    if case == "free_var":  # never bound, its hint that of a bound var
        bindings[200] = VarBinding(bindings[200].var, R.add(bindings[199].var, Var("u3", T)))
    elif case == "read_before_binding_shared":  # read, then another `lv` bound, then it
        bindings[1] = VarBinding(bindings[1].var, R.add(bindings[0].var, late_lv))
        bindings.insert(300, VarBinding(late_lv, R.exp(x)))
    elif case == "read_before_binding_unique":
        late = Var("late", T)
        bindings[5] = VarBinding(bindings[5].var, R.add(bindings[4].var, late))
        bindings.insert(390, VarBinding(late, R.exp(x)))
    elif case == "bound_twice":
        bindings.insert(350, VarBinding(bindings[100].var, R.exp(x)))
    else:
        bindings.insert(10, VarBinding(x, R.exp(bindings[3].var)))
    func = Function(func.params, SeqExpr((BindingBlock(tuple(bindings)),), bindings[-1].var, struct_info=T), T)
    mod = IRModule({"main": func})
    assert printed_names(print_module(mod)) == naive_names(func)


def test_dataflow_outputs_and_params_with_shared_hints():
    # Parameters share a hint with each other and with bindings; outputs list the names given.
    ps = [Var("w", T), Var("w", T), Var("lv", T)]
    bindings, cur = [], ps[0]
    for i in range(500):
        v = (Var if i % 7 == 0 or i == 499 else DataflowVar)(["w", "lv", "lv_1", f"k{i}"][i % 4], T)
        bindings.append(VarBinding(v, R.add(cur, ps[i % 3])))
        cur = v
    tail = Var("out", T)
    body = SeqExpr((DataflowBlock(tuple(bindings)), BindingBlock((VarBinding(tail, R.exp(cur)),))), tail, struct_info=T)
    func = Function(ps, body, T)
    mod = IRModule({"main": func})
    text = print_module(mod)
    assert printed_names(text) == naive_names(func)
    assert_structural_equal(mod, parse(text))
    outputs = re.search(r"R\.output\((.*)\)", text).group(1).split(", ")
    assert outputs == [n for n, b in zip(printed_names(text), bindings) if type(b.var) is Var]
