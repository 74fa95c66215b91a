"""Copying bindings with fresh variables, and the variables an expression reads (helpers of the Gradient pass)."""

from __future__ import annotations

from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.expr import Call, DataflowVar, Expr, Function, If, SeqExpr, Tuple, TupleGetItem, Var


def fresh_var(var: Var, promote: bool = False) -> Var:
    """A new variable with the same name and struct info; `promote` turns DataflowVars into Vars."""
    cls = Var if promote else type(var)
    return cls(var.name_hint, var.struct_info, span=var.span)


def copy_expr(expr: Expr, vmap: dict, promote: bool = False) -> Expr:
    """`expr` with variables renamed by vmap; nested scopes get fresh variables. Struct info is kept as is."""
    if isinstance(expr, Var):
        return vmap.get(expr, expr)
    if isinstance(expr, Call):
        # Hot in every pass that renames: most calls read only leaves, most of them unrenamed.
        new_args = None
        for i, a in enumerate(expr.args):
            b = vmap.get(a, a) if isinstance(a, Var) else copy_expr(a, vmap, promote) if isinstance(a, Tuple) else a
            if b is not a:
                if new_args is None:
                    new_args = list(expr.args)
                new_args[i] = b
        if new_args is None:
            return expr
        return Call(expr.op, tuple(new_args), expr.attrs, expr.struct_info, span=expr.span)
    if isinstance(expr, Tuple):
        fields = tuple(copy_expr(f, vmap, promote) for f in expr.fields)
        if all(a is b for a, b in zip(fields, expr.fields)):
            return expr
        return Tuple(fields, expr.struct_info, span=expr.span)
    if isinstance(expr, TupleGetItem):
        tup = copy_expr(expr.tuple_value, vmap, promote)
        if tup is expr.tuple_value:
            return expr
        return TupleGetItem(tup, expr.index, expr.struct_info, span=expr.span)
    if isinstance(expr, If):
        return If(
            copy_expr(expr.cond, vmap, promote),
            copy_seq(expr.true_branch, vmap, promote),
            copy_seq(expr.false_branch, vmap, promote),
            expr.struct_info,
            span=expr.span,
        )
    if isinstance(expr, SeqExpr):
        return copy_seq(expr, vmap, promote)
    if isinstance(expr, Function):
        params = tuple(fresh_var(p) for p in expr.params)
        vmap.update(zip(expr.params, params))
        body = copy_seq(expr.body, vmap, False)
        return Function(
            params, body, expr.ret_struct_info, expr.is_pure, expr.private, dict(expr.attrs), span=expr.span
        )
    return expr


def substitute(expr: Expr, vmap: dict) -> Expr:
    """A leaf, tuple, TupleGetItem or call with variables replaced by vmap (nested scopes are left alone)."""
    if isinstance(expr, Var):
        return vmap.get(expr, expr)
    if isinstance(expr, Call | Tuple | TupleGetItem):
        return copy_expr(expr, vmap)
    return expr


def copy_binding(binding: VarBinding, vmap: dict, promote: bool = False) -> VarBinding:
    value = copy_expr(binding.value, vmap, promote)
    var = fresh_var(binding.var, promote)
    vmap[binding.var] = var
    return VarBinding(var, value, span=binding.span)


def copy_seq(seq: SeqExpr, vmap: dict, promote: bool = False) -> SeqExpr:
    blocks = []
    for block in seq.blocks:
        bindings = tuple(copy_binding(b, vmap, promote) for b in block.bindings)
        cls = BindingBlock if promote else type(block)
        blocks.append(cls(bindings, span=block.span))
    return SeqExpr(tuple(blocks), copy_expr(seq.body, vmap, promote), seq.struct_info, span=seq.span)


def read_vars(expr: Expr, out: list) -> None:
    """Append the variables `expr` reads (free variables of nested scopes included) to `out`."""
    if isinstance(expr, Var):
        out.append(expr)
    elif isinstance(expr, Call):
        for a in expr.args:
            read_vars(a, out)
    elif isinstance(expr, Tuple):
        for f in expr.fields:
            read_vars(f, out)
    elif isinstance(expr, TupleGetItem):
        read_vars(expr.tuple_value, out)
    elif isinstance(expr, If):
        read_vars(expr.cond, out)
        out.extend(free_vars(expr.true_branch))
        out.extend(free_vars(expr.false_branch))
    elif isinstance(expr, SeqExpr):
        out.extend(free_vars(expr))
    elif isinstance(expr, Function):
        bound = set(expr.params)
        out.extend(v for v in free_vars(expr.body) if v not in bound)


def free_vars(seq: SeqExpr) -> list:
    """Variables a SeqExpr reads but does not bind, in order of first use, without repeats."""
    bound: set = set()
    used: list = []
    for block in seq.blocks:
        for b in block.bindings:
            read_vars(b.value, used)
            bound.add(b.var)
    read_vars(seq.body, used)
    seen: set = set()
    out = []
    # A var read before its binding in this scope cannot happen in a well-formed SeqExpr, so
    # filtering bound vars afterwards is exact.
    for v in used:
        if v not in bound and v not in seen:
            seen.add(v)
            out.append(v)
    return out


def is_dataflow_block(block) -> bool:
    return isinstance(block, DataflowBlock)


def is_dataflow_var(var) -> bool:
    return isinstance(var, DataflowVar)
