"""build checks every function and lowers each on its first call (runtime/precheck.py): a module that
cannot run still fails to build, with the planner's and the lowering's own messages."""

import numpy as np
import pytest
from runtime.helpers import T, function, module, signature

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.ir import Function, GlobalVar, If, Var
from retrograd.ir.block import BindingBlock, VarBinding
from retrograd.ir.expr import Call, SeqExpr, Tuple
from retrograd.ops.api import R
from retrograd.ops.registry import Arg, OpDef
from retrograd.runtime.precheck import lowers_plainly

no_kernel_op = OpDef("relax.test_lazy_nokernel", (Arg("x"),), (), infer=lambda c: c.tensor(0))


def _exp_function():
    return function([("x", T((3,)))], lambda bb, x: bb.emit(R.exp(x), "y"))


def _hand_made(bindings, result, params):
    """A function built without the BlockBuilder, which would refuse what these tests need."""
    return Function(tuple(params), SeqExpr((BindingBlock(tuple(VarBinding(v, e) for v, e in bindings)),), result))


def test_an_uncalled_function_without_a_kernel_fails_the_build():
    bad = function([("x", T((3,)))], lambda bb, x: bb.emit(no_kernel_op(x), "lv"))
    with pytest.raises(DiagnosticError, match=r"helper: op R\.test_lazy_nokernel has no kernel \(binding 'lv'\)"):
        retrograd.build(module(main=_exp_function(), helper=bad))


def test_a_variable_used_before_it_is_bound_fails_the_build():
    x, a, b = Var("x", T((3,))), Var("a", T((3,))), Var("b", T((3,)))
    func = _hand_made([(a, R.exp(b)), (b, R.exp(x))], a, [x])
    assert not lowers_plainly(func, {"main"})
    with pytest.raises(DiagnosticError, match=r"main: variable 'b' is used before it is bound"):
        retrograd.build(module(main=func))


def test_a_call_of_a_missing_function_fails_the_build():
    x, y = Var("x", T((3,))), Var("y", T((3,)))
    func = _hand_made([(y, Call(GlobalVar("nope"), (x,)))], y, [x])
    assert not lowers_plainly(func, {"main"})
    with pytest.raises(DiagnosticError, match=r"main: binding 'y' calls 'nope', which is not a function of the module"):
        retrograd.build(module(main=func))


def test_an_if_on_a_tuple_fails_the_build():
    c, t, r = Var("c", T((), "bool")), Var("t", None), Var("r", T((3,)))
    x = Var("x", T((3,)))
    branch = SeqExpr((), x)
    func = _hand_made([(t, Tuple((c, c))), (r, If(t, branch, branch))], r, [c, x])
    assert not lowers_plainly(func, {"main"})
    with pytest.raises(DiagnosticError, match=r"main: the condition of If binding 'r' is a tuple"):
        retrograd.build(module(main=func))


def test_functions_are_lowered_on_first_use_and_run_as_before():
    def main_body(bb, x):
        return bb.emit(Call(GlobalVar("double"), (bb.emit(R.exp(x), "e"),)), "d")

    sig = {"double": signature([("x", T((3,)))], T((3,)))}
    double = function([("x", T((3,)))], lambda bb, x: bb.emit(R.add(x, x), "y"))
    mod = module(main=function([("x", T((3,)))], main_body, sig), double=double, unused=_exp_function())
    for name in ("main", "double", "unused"):
        assert lowers_plainly(mod[name], {"main", "double", "unused"})
    ex = retrograd.build(mod)
    assert all(p.block is None for p in ex._programs.values())
    x = np.array([0.0, 1.0, -2.0], "float32")
    np.testing.assert_allclose(ex["main"](x), 2 * np.exp(x), rtol=1e-6)
    assert ex._programs["double"].block is not None  # lowered with its caller
    assert ex._programs["unused"].block is None
    np.testing.assert_allclose(ex["unused"](x), np.exp(x), rtol=1e-6)


def test_the_benchmark_adjoint_is_cleared_by_the_quick_check():
    from retrograd.passes import Gradient

    text = """
@R.function
def main(x: R.Tensor((4, 8), dtype="float32"), w: R.Tensor((8, 8), dtype="float32")):
    with R.dataflow():
        h = R.nn.relu(R.matmul(x, w))
        s = R.sin(h)
        gv = R.sum(s, axis=None, keepdims=False)
        R.output(gv)
    return gv
"""
    adj = Gradient("main")(retrograd.parse(text))
    names = {"main", "main_adjoint"}
    assert lowers_plainly(adj["main"], names) and lowers_plainly(adj["main_adjoint"], names)
