"""Copying expressions and bindings with fresh variables, and substituting variables."""

from __future__ import annotations

import attrs

from retrograd.ir.block import BindingBlock, VarBinding, new_binding
from retrograd.ir.expr import Call, Expr, Function, If, SeqExpr, Tuple, TupleGetItem, Var, map_tuple_nest, new_call, new_var


def fresh_var(var: Var, promote: bool = False) -> Var:
    """A new variable with the same name and struct info; `promote` turns DataflowVars into Vars."""
    return new_var(Var if promote else var.__class__, var.name_hint, var.struct_info, var.span)


def copy_expr(expr: Expr, vmap: dict, promote: bool = False, memo: dict | None = None) -> Expr:
    """`expr` with variables renamed by vmap; nested scopes get fresh variables. Struct info is kept as is.
    `memo` (see substitute) keeps the copies of tuple nests by id across calls."""
    if isinstance(expr, Var):
        return vmap.get(expr, expr)
    if isinstance(expr, Call):
        # Hot in every pass that renames: most calls read only leaves, most of them unrenamed, and a
        # direct constructor call is several times cheaper than attrs.evolve here.
        new_args = None
        for i, a in enumerate(expr.args):
            b = vmap.get(a, a) if isinstance(a, Var) else copy_expr(a, vmap, promote) if isinstance(a, Tuple) else a
            if b is not a:
                if new_args is None:
                    new_args = list(expr.args)
                new_args[i] = b
        if new_args is None:
            return expr
        return new_call(expr.op, tuple(new_args), expr.attrs, expr.struct_info, expr.span)
    if isinstance(expr, Tuple | TupleGetItem):
        return map_tuple_nest(expr, lambda e: copy_expr(e, vmap, promote), rebuild_keeping_sinfo, memo)
    if isinstance(expr, If):
        return attrs.evolve(
            expr,
            cond=copy_expr(expr.cond, vmap, promote),
            true_branch=copy_seq(expr.true_branch, vmap, promote),
            false_branch=copy_seq(expr.false_branch, vmap, promote),
        )
    if isinstance(expr, SeqExpr):
        return copy_seq(expr, vmap, promote)
    if isinstance(expr, Function):
        params = tuple(fresh_var(p) for p in expr.params)
        vmap.update(zip(expr.params, params))
        return attrs.evolve(expr, params=params, body=copy_seq(expr.body, vmap, False), attrs=dict(expr.attrs))
    return expr


def rebuild_keeping_sinfo(node: Tuple | TupleGetItem, kids) -> Expr:
    if isinstance(node, Tuple):
        return attrs.evolve(node, fields=kids)
    return attrs.evolve(node, tuple_value=kids[0])


def substitute(expr: Expr, vmap: dict, memo: dict | None = None) -> Expr:
    """A leaf, tuple, TupleGetItem or call with variables replaced by vmap (nested scopes are left alone).
    A caller substituting many bindings with one unchanged vmap may pass a `memo` (kept while the IR is
    alive): bindings may share the levels of one deep tuple nest, each substituted once."""
    if isinstance(expr, Var):
        return vmap.get(expr, expr)
    if isinstance(expr, Call | Tuple | TupleGetItem):
        return copy_expr(expr, vmap, memo=memo)
    return expr


def copy_binding(binding: VarBinding, vmap: dict, promote: bool = False) -> VarBinding:
    value = copy_expr(binding.value, vmap, promote)
    var = fresh_var(binding.var, promote)
    vmap[binding.var] = var
    return new_binding(var, value, binding.span)


def copy_seq(seq: SeqExpr, vmap: dict, promote: bool = False) -> SeqExpr:
    blocks = []
    for block in seq.blocks:
        # A list comprehension, not tuple(generator): consuming a generator from C costs C stack
        # per nested If (copying 300 levels needed ~200 KB of it).
        bindings = tuple([copy_binding(b, vmap, promote) for b in block.bindings])
        cls = BindingBlock if promote else type(block)
        blocks.append(cls(bindings, span=block.span))
    return attrs.evolve(seq, blocks=tuple(blocks), body=copy_expr(seq.body, vmap, promote))
