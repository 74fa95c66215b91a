"""ir/vars.py and ir/copy.py: variable analyses and copying, checked against naive walks written here."""

import numpy as np

import retrograd
from retrograd.ir import ExprVisitor
from retrograd.ir.vars import bound_vars, free_vars, use_counts, used_vars
from retrograd.ir.copy import copy_expr, substitute
from retrograd.ir.expr import Call, Constant, If, Var, const

TEXT = """
@R.function
def main(x: R.Tensor((3,), "float32"), c: R.Tensor((), "bool")):
    a = R.exp(x)
    b = R.add(a, x)
    if c:
        d = R.multiply(a, b)
        e = R.add(d, x)
        r = e
    else:
        r = R.negative(a)
    s = R.add(r, a)
    return s
"""


class _Reads(ExprVisitor):
    """Every read of a variable, one count per occurrence (definitions are not reads)."""

    def __init__(self):
        super().__init__()
        self.count = {}

    def visit_var(self, var):
        self.count[var] = self.count.get(var, 0) + 1


class _Defs(ExprVisitor):
    def __init__(self):
        super().__init__()
        self.defs = []

    def visit_var_def(self, var):
        self.defs.append(var)


def test_use_counts_and_free_vars_match_naive_walks():
    func = retrograd.parse(TEXT)["main"]
    naive = _Reads()
    naive.visit_expr(func.body)
    assert use_counts(func) == naive.count
    names = {v.name_hint: v for v in _all_vars(func)}
    branch = next(b.value for blk in func.body.blocks for b in blk.bindings if isinstance(b.value, If))
    # The true branch reads a, b and x from outside; the false branch only a.
    assert free_vars(branch.true_branch) == [names["a"], names["b"], names["x"]]
    assert free_vars(branch.false_branch) == [names["a"]]
    assert free_vars(func.body) == [names["x"], names["c"]]
    assert used_vars(branch) == {names["a"], names["b"], names["x"], names["c"]}
    assert [v.name_hint for v in bound_vars(func.body)] == ["a", "b", "r", "s"]


def _all_vars(func):
    d = _Defs()
    d.visit_expr(func)
    return d.defs


def test_copy_gives_fresh_variables_and_the_same_program():
    mod = retrograd.parse(TEXT)
    func = mod["main"]
    copy = copy_expr(func, {})
    assert not set(map(id, _all_vars(copy))) & set(map(id, _all_vars(func)))
    retrograd.assert_structural_equal(copy, func)
    x = np.array([0.5, -1.0, 2.0], dtype="float32")
    for flag in (True, False):
        want = retrograd.build(mod)["main"](x, np.array(flag))
        got = retrograd.build(mod.with_function("main", copy))["main"](x, np.array(flag))
        np.testing.assert_array_equal(got, want)


def test_substitute_replaces_reads_and_keeps_struct_info():
    func = retrograd.parse(TEXT)["main"]
    b = func.body.blocks[0].bindings[1]
    x = func.params[0]
    three = const(np.array([1.0, 2.0, 3.0], dtype="float32"))
    new = substitute(b.value, {x: three})
    assert isinstance(new, Call) and new.args[1] is three and new.args[0] is b.value.args[0]
    assert new.struct_info is b.value.struct_info
    assert substitute(b.value, {}) is b.value
    assert isinstance(substitute(x, {x: three}), Constant)
    assert isinstance(substitute(b.value.args[0], {}), Var)
