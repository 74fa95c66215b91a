"""Variable analyses of expressions: the variables an expression reads, a scope's free and bound variables, use counts, the functions a module reaches."""

from __future__ import annotations

from retrograd.ir.block import DataflowBlock
from retrograd.ir.expr import Call, DataflowVar, Expr, Function, GlobalVar, If, SeqExpr, Tuple, TupleGetItem, Var, tuple_parts
from retrograd.ir.nested import fold, preorder


def read_vars(expr: Expr, out: list, memo: dict | None = None) -> None:
    """Append the variables `expr` reads (free variables of nested scopes included) to `out`. A caller
    reading many bindings passes a `memo` (kept while the IR is alive): the reads of each tuple are
    kept by id, as bindings may share the levels of one deep tuple nest."""
    if isinstance(expr, Var):
        out.append(expr)
    elif isinstance(expr, Call):
        for a in expr.args:
            if isinstance(a, Var):
                out.append(a)
            else:
                read_vars(a, out)
    elif isinstance(expr, Tuple | TupleGetItem):
        # Tuples nest to any depth: walked with a stack, in order.
        if memo is not None:
            out.extend(fold(expr, tuple_parts, _tuple_reads, memo=memo))
            return
        for e in preorder(expr, tuple_parts):
            if isinstance(e, Var):
                out.append(e)
            elif not isinstance(e, Tuple | TupleGetItem):
                read_vars(e, out)
    elif isinstance(expr, If):
        read_vars(expr.cond, out)
        out.extend(free_vars(expr.true_branch))
        out.extend(free_vars(expr.false_branch))
    elif isinstance(expr, SeqExpr):
        out.extend(free_vars(expr))
    elif isinstance(expr, Function):
        bound = set(expr.params)
        out.extend(v for v in free_vars(expr.body) if v not in bound)


def _tuple_reads(e, kids) -> list:
    if isinstance(e, Tuple | TupleGetItem):
        return [v for k in kids for v in k]
    out: list = []
    read_vars(e, out)
    return out


def used_vars(expr: Expr) -> set:
    """The set of variables `expr` reads."""
    out: list = []
    read_vars(expr, out)
    return set(out)


def use_counts(func: Function) -> dict:
    """How many times each variable is read in `func` (nested If branches included), without recursion."""
    uses: dict = {}
    reads: list = []
    memo: dict = {}
    stack = [func.body]
    while stack:
        seq = stack.pop()
        for block in seq.blocks:
            for b in block.bindings:
                if isinstance(b.value, If):
                    stack.extend((b.value.true_branch, b.value.false_branch))
                    reads.clear()
                    read_vars(b.value.cond, reads)
                else:
                    reads.clear()
                    read_vars(b.value, reads, memo)
                for v in reads:
                    uses[v] = uses.get(v, 0) + 1
        reads.clear()
        read_vars(seq.body, reads)
        for v in reads:
            uses[v] = uses.get(v, 0) + 1
    return uses


def bound_vars(seq: SeqExpr) -> list:
    """Variables bound by the bindings of a SeqExpr (not those of nested scopes), in order."""
    return [b.var for block in seq.blocks for b in block.bindings]


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


def called_functions(func: Function) -> set:
    """Names of module functions a function refers to (calls, or GlobalVars passed as values)."""
    names: set = set()
    stack = [func.body]
    while stack:
        e = stack.pop()
        if isinstance(e, GlobalVar):
            names.add(e.name_hint)
        elif isinstance(e, SeqExpr):
            stack.append(e.body)
            for block in e.blocks:
                stack.extend(b.value for b in block.bindings)
        elif isinstance(e, Call):
            stack.append(e.op)
            stack.extend(e.args)
        elif isinstance(e, If):
            stack.extend((e.true_branch, e.false_branch))
        elif isinstance(e, Function):
            stack.append(e.body)
        elif hasattr(e, "fields"):
            stack.extend(e.fields)
        elif hasattr(e, "tuple_value"):
            stack.append(e.tuple_value)
    return names



def reachable_functions(mod, roots) -> list[str]:
    """The names of `roots` and of every module function they reach through calls, in module order."""
    reached = {r for r in roots if r in mod}
    stack = list(reached)
    while stack:
        f = mod[stack.pop()]
        if not isinstance(f, Function):
            continue
        for callee in called_functions(f):
            if callee in mod and callee not in reached:
                reached.add(callee)
                stack.append(callee)
    return [n for n in mod.keys() if n in reached]