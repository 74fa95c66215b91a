"""Builders for executor tests: small functions and modules made through BlockBuilder."""

from __future__ import annotations

from retrograd.ir import BlockBuilder, Function, IRModule, If, Var
from retrograd.ir.struct_info import FuncStructInfo, TensorStructInfo, TupleStructInfo


def T(shape, dtype="float32"):
    return TensorStructInfo(tuple(shape), dtype)


def Tup(*fields):
    return TupleStructInfo(tuple(fields))


def function(params, body, signatures=None, dataflow=False):
    """params: [(name, struct info)]; body(bb, *vars) emits bindings and returns the result expression.

    signatures: name -> FuncStructInfo of module functions the body calls (itself included, for recursion).
    """
    bb = BlockBuilder(global_sinfo=signatures or {})
    vs = [Var(n, s) for n, s in params]
    bb.begin_scope()
    if dataflow:
        bb.begin_block(dataflow=True)
    result = body(bb, *vs)
    seq = bb.end_scope(result)
    return Function(tuple(vs), seq)


def branch(bb, make):
    """A SeqExpr for one If branch: make(bb) emits bindings and returns the branch result."""
    bb.begin_scope()
    return bb.end_scope(make(bb))


def emit_if(bb, cond, make_true, make_false, name="r"):
    return bb.emit(If(cond, branch(bb, make_true), branch(bb, make_false)), name)


def module(**functions):
    return IRModule(functions)


def signature(params, ret):
    return FuncStructInfo(tuple(s for _, s in params), ret)
