"""The quick check `build` runs on every function, which is then lowered only on first use.

Lowering a function (plan, kernel binding: runtime/program.py) costs tens of microseconds a binding;
a module of hundreds of thousands of bindings would take seconds to build, most of it for functions
never called. Yet a module that cannot run must fail to build, naming the binding. So `build` runs
this walk, a few checks a binding and no objects made: it clears a function when planning and
lowering it cannot fail (every variable bound before use, every call of an op with a kernel or of a
function of the module, no storage dtype, no symbolic R.shape, no If on a tuple). A function it does
not clear is lowered at once, whose errors are then the build's, with their usual messages; a cleared
one is lowered on its first call.
"""

from __future__ import annotations

from retrograd.analysis.liveness import storage_of
from retrograd.ir.expr import (
    Call,
    Constant,
    GlobalVar,
    If,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)

_LEAVES = Constant | PrimValue | StringImm


def lowers_plainly(func, functions) -> bool:
    """Whether `func` surely plans and lowers without error (False: maybe not; lower it to know).
    `functions`: the names of the module's functions. Recurses once per nested If."""
    bound = set(func.params)  # as the planner's: a variable stays bound after its branch
    tuples: set = set()  # variables bound to a tuple written out (no register: an If on one is an error)
    return _seq(func.body, bound, tuples, functions)


def _source(expr, bound: set) -> bool:
    cls = expr.__class__
    if cls is Var or isinstance(expr, Var):
        return expr in bound
    if isinstance(expr, _LEAVES):
        return True
    if cls is ShapeExpr:
        return all(isinstance(v, int) for v in expr.values)  # symbolic dims: lowering checks them
    if cls is Tuple:
        stack = list(expr.fields)
        while stack:
            e = stack.pop()
            if e.__class__ is Tuple:
                stack.extend(e.fields)
            elif not _source(e, bound):
                return False
        return True
    return False


def _seq(seq, bound: set, tuples: set, functions) -> bool:
    if not isinstance(seq, SeqExpr):
        return False
    for block in seq.blocks:
        for binding in block.bindings:
            var, value = binding.var, binding.value
            cls = value.__class__
            if cls is Call:
                op = value.op
                args = value.args
                for a in args:
                    if not (a in bound if a.__class__ is Var else _source(a, bound)):
                        return False
                if isinstance(op, Op):
                    if getattr(op, "kernel", None) is None:
                        return False
                    if storage_of(op, var.struct_info, [getattr(a, "struct_info", None) for a in args]) is not None:
                        return False
                elif not (isinstance(op, GlobalVar) and op.name_hint in functions):
                    return False
            elif isinstance(value, Var):
                if value not in bound:
                    return False
                if value in tuples:
                    tuples.add(var)
            elif cls is TupleGetItem:
                tup = value.tuple_value
                if tup in tuples or not isinstance(tup, Var) or tup not in bound:
                    return False  # a field of a tuple written out (its index checked by the planner)
            elif cls is If:
                cond = value.cond
                if not isinstance(cond, Var) or cond not in bound or cond in tuples:
                    return False
                if not (_seq(value.true_branch, bound, tuples, functions) and _seq(value.false_branch, bound, tuples, functions)):
                    return False
            elif cls is Tuple:
                if not _source(value, bound):
                    return False
                tuples.add(var)
            elif isinstance(value, _LEAVES | ShapeExpr):
                if not _source(value, bound):
                    return False
            else:
                return False
            bound.add(var)
    return _source(seq.body, bound)
