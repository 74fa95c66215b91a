"""IR Function -> checkpoint Problem, read off the function's Plan (retrograd.analysis.plan): one node per
top-level binding, its instruction's reads as deps, sized and costed from struct info."""

from __future__ import annotations

import attrs

from retrograd.analysis.layout import Fresh, Layout, Same, c_layout, results
from retrograd.analysis.plan import Plan, fold_source, plan_function
from retrograd.errors import PassError, UnsupportedError
from retrograd.ir.expr import Function, Tuple
from retrograd.ir.nested import fold, tuple_leaves
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, tuple_fields
from retrograd.ir.text import format_sinfo
from retrograd.ops.cost import DEFAULT as DEFAULT_COST
from retrograd.passes.checkpoint.problem import Problem


def buffer_of(sinfo, what: str, span=None) -> tuple:
    """(bytes, C-ordered layout(s)) of a new value with static struct info (tuples nest to any depth: fold)."""
    if isinstance(sinfo, TupleStructInfo):
        return fold(sinfo, tuple_fields, lambda s, kids: (sum(k[0] for k in kids), tuple(k[1] for k in kids))
                    if isinstance(s, TupleStructInfo) else buffer_of(s, what, span))
    if not isinstance(sinfo, TensorStructInfo):
        return 0, None
    if not sinfo.is_static or not sinfo.dtype:
        raise PassError(f"checkpoint: {what} has struct info {format_sinfo(sinfo, brief=True)}; planning "
                        "needs static shapes and dtypes", span)
    return c_layout(tuple(sinfo.shape), sinfo.dtype)


@attrs.frozen(eq=False)
class Extraction:
    """The Problem and how its nodes map back to the function (node i: its plan's top-level binding i):
    node_of[r]: the node filling register r (None: none); transparent: bindings without an instruction
    (aliases, tuples: their readers read the sources themselves); opaque: the Ifs and calls of other functions."""

    problem: Problem
    plan: Plan
    node_of: list
    transparent: frozenset
    opaque: frozenset
    params: dict  # register -> parameter Var

    def expr(self, src, node_var, param_var=None):
        """The expression a source stands for: node registers through node_var, parameters through
        param_var (or as themselves), constants as themselves; tuples rebuilt bottom-up (any depth)."""

        def leaf(r):
            if self.node_of[r] is not None:
                return node_var(self.node_of[r])
            if r in self.plan.consts:
                return self.plan.consts[r]
            return self.params[r] if param_var is None else param_var(self.params[r])

        return fold_source(src, leaf,
                           lambda kids: Tuple(kids, TupleStructInfo(tuple(k.struct_info for k in kids))))


def nodes_of(srcs, node_of: list) -> list[int]:
    """The nodes the sources (registers or nested tuples of them) refer to, in order, once each."""
    out = []
    for s in srcs:
        out.extend(node_of[r] for r in ((s,) if type(s) is int else tuple_leaves(s)) if node_of[r] is not None)
    return list(dict.fromkeys(out)) if len(out) > 1 else out


def extract(func: Function) -> Extraction:
    """Nodes, sizes, costs, deps, aliases (by the memory model's rules: _shared_layouts) and in-place rights."""
    pinned = sum(buffer_of(p.struct_info, f"parameter '{p.name_hint}'", p.span)[0] for p in func.params)
    try:
        plan = plan_function("checkpoint", func)
    except UnsupportedError as err:
        raise PassError(err.message, err.span) from None
    n = len(plan.names)
    node_of = [None] * plan.nregs  # by register: a list, not a dict (one entry a binding, held to the end)
    sinfo_of = {reg: x.struct_info for reg, x in [*plan.params, *plan.consts.items()]}
    sizes, costs, deps, alias_of, inplace = [0] * n, [0.0] * n, [()] * n, [None] * n, [()] * n
    recomputable, kinds, fields, field = [True] * n, ["view"] * n, [()] * n, [None] * n
    # layouts: register -> Layout (a tuple of them for a tuple; None: not an array; parameters' and constants':
    # C order); new: struct info -> (bytes, C-ordered layout(s)); owns[i]: node i's buffer may be reused.
    layouts, new, owns, opaque = {}, {}, [False] * n, set()
    layout_of = lambda r: layouts[r] if r in layouts else buffer_of(sinfo_of.get(r), "")[1]  # noqa: E731
    for ins in plan.block.ins:
        i, var, sinfo = ins.binding, ins.var, ins.var.struct_info
        what, span = f"binding '{var.name_hint}'", ins.span
        if sinfo not in new:
            new[sinfo] = buffer_of(sinfo, what, span)
        (size, layout), root, part, kind, rec = new[sinfo], None, None, "other", True
        cost = float(size)
        srcs = [ins.srcs[0], *sorted(ins.reads)] if ins.kind == "if" else ins.srcs
        deps[i] = tuple(nodes_of(srcs, node_of))
        if ins.kind == "item":
            kind, cost, size, root = "view", 0.0, 0, node_of[ins.srcs[0]]
            if root is not None:
                parts = layouts[ins.srcs[0]]
                layout = parts[ins.index] if type(parts) is tuple else None
                part = ins.index if fields[root] else field[root]
        elif ins.kind == "op":
            call = ins.call
            op_cost = getattr(call.op, "cost", DEFAULT_COST)  # the op's own declaration (ops/cost.py)
            kind, cost = op_cost.kind, op_cost(call, sinfo)
            # Without a variable to read, a recomputation could not be told apart from the original (CSE).
            rec = bool(getattr(call.op, "pure", True)) and bool(ins.reads)
            args = [fold_source(s, layout_of, tuple) for s in ins.srcs] if 0 in ins.aliases else None
            shared = _shared_layouts(call, sinfo, args) if args is not None else None
            if shared is not None:
                size, layout = 0, shared
                root = node_of[ins.srcs[0]] if type(ins.srcs[0]) is int else None
                part = None if root is None else field[root]
            else:  # positions in deps whose buffer the executor may reuse (runtime/inplace.py), each once
                ok = []
                for p in (p for p in ins.inplace if ins.srcs[p] not in plan.consts):
                    if (node := node_of[ins.srcs[p]]) is None or not owns[node]:
                        # The executor tries only the first candidate dying here; a parameter, or a value of an
                        # If or a call, may fail that try. The Problem cannot say when such a value dies, so the
                        # later candidates are dropped (the model can only over-estimate).
                        break
                    ok.append(deps[i].index(node))
                inplace[i] = tuple(dict.fromkeys(ok))
        else:
            rec = False  # an If, a call of another function
            opaque.add(i)
            for d in deps[i]:
                owns[d] = False  # its result may be a value it reads (a branch returning it): never written over
        sizes[i], costs[i], recomputable[i], alias_of[i], kinds[i], field[i] = size, cost, rec, root, kind, part
        layouts[ins.out] = layout
        node_of[ins.out] = i  # set here: an instruction reads earlier registers only
        # An op's fresh result may be written over, and so may a view of one (a field of its tuple
        # included) when nothing else holds the buffer: the memory model's rule.
        fresh = size > 0 and root is None and ins.kind == "op"
        owns[i] = fresh or (root is not None and owns[root] and (not isinstance(layout, Layout) or layout.writeable))
        if root is None and size > 0 and isinstance(sinfo, TupleStructInfo):
            fields[i] = tuple(buffer_of(f, what, span)[0] for f in sinfo.fields)
    problem = Problem(sizes=sizes, costs=costs, deps=deps, recomputable=recomputable, pinned_bytes=pinned,
                      alias_of=alias_of, outputs=nodes_of([plan.block.result], node_of), inplace=inplace,
                      kinds=kinds, names=plan.names, fields=fields, field=field)
    transparent = frozenset(set(range(n)) - {ins.binding for ins in plan.block.ins})
    return Extraction(problem, plan, node_of, transparent, frozenset(opaque), dict(plan.params))


def _shared_layouts(call, out_sinfo, args):
    """The layout(s) of the call's result when it is its first argument itself or views its buffer (the
    memory model's rules, retrograd.analysis.layout), else None (a fresh buffer)."""
    fields = out_sinfo.fields if isinstance(out_sinfo, TupleStructInfo) else (out_sinfo,)
    shapes = [tuple(f.shape) if isinstance(f, TensorStructInfo) and f.shape is not None else () for f in fields]
    rule = results(call.op, call.attrs, [a if isinstance(a, Layout) else None for a in args], shapes)
    if any(isinstance(r, Fresh) for r in rule):
        return None
    if len(rule) == 1 and isinstance(rule[0], Same):
        return args[rule[0].arg]  # the argument itself, a tuple included (a marker on a tuple)
    outs = tuple(args[r.arg] if isinstance(r, Same) else r.layout for r in rule)
    return outs if isinstance(out_sinfo, TupleStructInfo) else outs[0]
