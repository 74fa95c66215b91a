"""The Plan of a function (analysis/plan.py): on every path through its Ifs, each register a function
owns (parameters, instruction results) is released exactly once, never read after its release, and
released no later than right after its last read on that path."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import retrograd
from retrograd.analysis.liveness import flat_registers
from retrograd.analysis.plan import Plans
from retrograd.errors import NameError_
from retrograd.ir.expr import Function

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "tests" / "corpus").glob("c*.py")) + sorted((ROOT / "examples").glob("*.py"))


def _count_ifs(block) -> int:
    return sum(1 + _count_ifs(ins.branches[0]) + _count_ifs(ins.branches[1]) for ins in block.ins if ins.kind == "if")


def _events(plan, block, choices):
    """[("read" | "free" | "def", register)] of one path, If choices taken from the iterator `choices`.
    An If reads everything its branches read from outside before running one (the other may need it)."""
    out = [("free", r) for r in block.prefree]
    for ins in block.ins:
        out += [("read", r) for r in sorted(ins.reads)]
        if ins.kind == "if":
            out += _events(plan, ins.branches[0 if next(choices) else 1], choices)
        out.append(("def", ins.out))
        out += [("free", r) for r in ins.frees]
    out += [("read", r) for r in flat_registers(block.result, set()) - plan.fixed]
    out += [("free", r) for r in block.endfree]
    return out


def _check_path(plan, choices):
    events = [("param", reg) for reg, _ in plan.params] + _events(plan, plan.block, choices)
    alive: set = set()
    last_use: dict = {}
    for i, (what, r) in enumerate(events):
        assert r not in plan.fixed
        if what in ("def", "param"):
            assert r not in alive and r not in last_use, f"register {r} defined twice"
            alive.add(r)
            last_use[r] = i
        elif what == "read":
            assert r in alive, f"register {r} read while not alive (event {i})"
            last_use[r] = i
        else:
            assert r in alive, f"register {r} released twice or never defined"
            alive.remove(r)
            # Released promptly: after its last read (or its definition) at most the instruction that
            # read it stores its own result before the release.
            defs = sum(1 for what2, _ in events[last_use[r] + 1 : i] if what2 == "def")
            assert defs <= 1, f"register {r} released {defs} instructions after its last use"
    assert not alive, f"registers never released: {sorted(alive)}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_register_is_released_once_on_every_path(path):
    mod = retrograd.parse_file(path)
    plans = Plans(mod)
    for name, func in mod.items():
        if not isinstance(func, Function):
            continue
        plan = plans.get(name)
        n = min(_count_ifs(plan.block), 6)
        for choices in itertools.product((True, False), repeat=n):
            _check_path(plan, itertools.chain(choices, itertools.repeat(True)))


BRANCH = """
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        v = R.exp(y)
        t = (v, x)
        if c:
            z = R.add(x, x)
        else:
            z = R.multiply(t[0], x)
        return z
"""


def test_a_value_read_in_one_branch_is_released_inside_the_other_at_its_start():
    plan = Plans(retrograd.parse(BRANCH)).get("main")
    (c, _), (x, _), (y, _) = plan.params
    exp, cond = plan.block.ins
    assert exp.kind == "op" and exp.op.name == "relax.exp" and exp.frees == (y,)
    assert cond.kind == "if" and cond.frees == () and cond.srcs == (c,)
    true, false = cond.branches
    v = exp.out
    assert set(true.prefree) == {c, v}  # the true branch never reads c again, nor v
    (add,) = true.ins
    assert add.srcs == (x, x) and add.frees == (x,)
    (mul,) = false.ins
    assert mul.srcs == (v, x) and set(mul.frees) == {v, x}  # t[0] is v's register: a tuple costs nothing
    assert [i.kind for i in plan.instructions()] == ["op", "if", "op", "op"]
    assert plan.names == ("v", "t", "z")
    assert exp.binding == 0 and cond.binding == 2 and add.binding is None


def test_use_before_binding_is_a_name_error():
    from retrograd.ir import IRModule
    from retrograd.ir.block import BindingBlock, VarBinding
    from retrograd.ir.expr import Call, SeqExpr, Var
    from retrograd.ir.struct_info import TensorStructInfo
    from retrograd.ops import get

    s = TensorStructInfo((3,), "float32")
    x, ghost, y = Var("x", s), Var("ghost", s), Var("y", s)
    body = SeqExpr([BindingBlock([VarBinding(y, Call(get("relax.exp"), [ghost]))])], y)
    with pytest.raises(NameError_, match="ghost"):
        Plans(IRModule({"main": Function((x,), body)})).get("main")
