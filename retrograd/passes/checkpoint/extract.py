"""IR Function -> checkpoint Problem: one node per top-level binding, sized and costed from struct info."""

from __future__ import annotations

from math import prod

import attrs
import numpy as np

from retrograd.analysis.layout import Fresh, Layout, Same, results
from retrograd.analysis.liveness import inplace_positions
from retrograd.analysis.plan import c_layout
from retrograd.errors import PassError
from retrograd.ir.dtypes import itemsize
from retrograd.ir.expr import (
    Call,
    Constant,
    Function,
    GlobalVar,
    If,
    Op,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    tuple_fields_of,
)
from retrograd.ir.nested import fold
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, tuple_fields
from retrograd.ir.text import format_sinfo
from retrograd.ops.cost import DEFAULT as DEFAULT_COST
from retrograd.passes.checkpoint.problem import Problem
from retrograd.ir.vars import read_vars

_LEAVES = (Constant, PrimValue, ShapeExpr, StringImm)


def static_bytes(sinfo, what: str, span=None) -> int:
    """Bytes of a value with static struct info (prod(shape) * itemsize; tuples add up; non-tensors 0)."""
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None or not all(isinstance(d, int) for d in sinfo.shape) or not sinfo.dtype:
            raise PassError(
                f"checkpoint: {what} has struct info {format_sinfo(sinfo, brief=True)}; planning needs static shapes and dtypes",
                span,
            )
        return prod(sinfo.shape) * (1 if sinfo.dtype == "bool" else itemsize(sinfo.dtype))
    if isinstance(sinfo, TupleStructInfo):
        # Bottom-up with a stack: tuples nest to any depth.
        return fold(sinfo, tuple_fields, lambda s, sizes: sum(sizes) if isinstance(s, TupleStructInfo) else static_bytes(s, what, span))
    return 0


@attrs.frozen(eq=False)
class Extraction:
    """The Problem and how its nodes map back to the function.

    bindings[i]: node i's binding; block_of[i]: index of its block; node_of: var -> node for the vars
    of real nodes (alias_of names the node a view reads, not the buffer's owner); expand: var -> structure for transparent bindings (aliases, tuples, leaves), which
    the executor does not run: a structure is a node id, a leaf expression, a param Var, or a tuple
    of structures.
    """

    problem: Problem
    func: Function
    bindings: tuple
    block_of: tuple
    node_of: dict
    expand: dict
    transparent: frozenset

    @property
    def opaque(self) -> bool:
        """An If or a call of another function: the Problem leaves out what they hold inside them."""
        return any(isinstance(b.value, If) or (isinstance(b.value, Call) and isinstance(b.value.op, GlobalVar)) for b in self.bindings)


def struct_nodes_of(struct, out: list) -> list:
    """The node ids a structure refers to, in order."""
    stack = [struct]
    while stack:
        s = stack.pop()
        if isinstance(s, int):
            out.append(s)
        elif isinstance(s, tuple):
            stack.extend(reversed(s))
    return out


def extract(func: Function) -> Extraction:
    """Nodes, sizes, costs, dependencies, aliases and in-place rights of `func`'s top-level bindings.

    Whether a result shares an argument's buffer, and with which strides, is retrograd.analysis.layout's
    (the memory model's own rules), replayed here on each node's layout over its buffer."""
    pinned = sum(static_bytes(p.struct_info, f"parameter '{p.name_hint}'", p.span) for p in func.params)
    node_of: dict = {}
    expand: dict = {}
    layouts: list = []  # node -> Layout (a tuple of them for a tuple result; None: not an array)
    owns: list[bool] = []  # node's value is a fresh buffer of its own (in-place reuse is possible)
    sizes, costs, deps, recomputable, alias_of, inplace, kinds, names = ([] for _ in range(8))
    fields: list[tuple] = []  # a tuple node's own buffer: each field's bytes (see Problem.fields)
    field: list = []  # an alias of a tuple node: the field it holds
    bindings, block_of, transparent = [], [], set()

    def var_struct(var):
        if var in node_of:
            return node_of[var]
        return expand.get(var, var)  # a parameter stays itself

    # Tuples nest to any depth: structures are built bottom-up with a stack, kept per tuple node (the
    # function keeps them alive) as bindings may share the levels of one nest.
    tuple_structs: dict = {}
    struct_nodes: dict = {}  # id -> the node ids a (tuple) structure refers to

    def struct_of(expr):
        if isinstance(expr, Var):
            return var_struct(expr)
        if isinstance(expr, Tuple):
            return fold(expr, tuple_fields_of, _struct_step, memo=tuple_structs)
        return expr

    def _struct_step(e, fields):
        if isinstance(e, Tuple):
            return tuple(fields)
        return var_struct(e) if isinstance(e, Var) else e

    def layout_of(struct):
        if isinstance(struct, int):
            return layouts[struct]
        if type(struct) is tuple:
            return fold(struct, struct_fields, lambda s, kids: tuple(kids) if type(s) is tuple else layout_of(s), shared=False)
        return _fresh_layout(getattr(struct, "struct_info", None))  # parameters and constants: C order

    for bi, block in enumerate(func.body.blocks):
        for b in block.bindings:
            i = len(bindings)
            bindings.append(b)
            block_of.append(bi)
            var, value = b.var, b.value
            names.append(var.name_hint)
            read: list = []
            read_vars(value, read)
            dep_nodes: list[int] = []
            for v in read:
                struct = struct_of(v)
                if type(struct) is tuple:
                    # Kept per structure: the bindings of a getitem chain read the levels of one nest.
                    dep_nodes.extend(fold(struct, struct_fields, _nodes_step, memo=struct_nodes))
                else:
                    struct_nodes_of(struct, dep_nodes)
            dep_tuple = tuple(dict.fromkeys(dep_nodes))
            where = f"binding '{var.name_hint}'"
            # Transparent bindings: the executor reads their sources directly (no instruction).
            static_item = (
                isinstance(value, TupleGetItem)
                and isinstance(value.tuple_value, Var)
                and isinstance(struct_of(value.tuple_value), tuple)
            )
            if isinstance(value, (Var, Tuple, *_LEAVES)) or static_item:
                transparent.add(i)
                expand[var] = struct_of(value.tuple_value)[value.index] if static_item else struct_of(value)
                sizes.append(0)
                costs.append(0.0)
                # Not a read at run time: the readers of `var` read the sources themselves.
                deps.append(())
                recomputable.append(True)
                alias_of.append(None)
                inplace.append(())
                kinds.append("view")
                layouts.append(None)
                owns.append(False)
                fields.append(())
                field.append(None)
                continue
            node_of[var] = i
            size = static_bytes(var.struct_info, where, b.span)
            root = None
            layout = _fresh_layout(var.struct_info)
            rec = True
            kind, cost = "other", float(size)
            ins: tuple = ()
            part = None
            if isinstance(value, TupleGetItem):
                src = struct_of(value.tuple_value)
                kind, cost = "view", 0.0
                if isinstance(src, int):
                    root = src
                    parts = layouts[src]
                    layout = parts[value.index] if type(parts) is tuple else None
                    part = value.index if fields[src] else field[src]
                size = 0
            elif isinstance(value, Call) and isinstance(value.op, Op):
                op_cost = getattr(value.op, "cost", DEFAULT_COST)  # the op's own declaration (ops/cost.py)
                kind, cost = op_cost.kind, op_cost(value, var.struct_info)
                # Without a variable to read, a recomputation could not be told apart from the original (CSE).
                rec = bool(getattr(value.op, "pure", True)) and bool(read)
                shared = _shared_layouts(value, var.struct_info, lambda a: layout_of(struct_of(a)))
                if shared is not None:
                    size = 0
                    layout = shared
                    first = struct_of(value.args[0])
                    if isinstance(first, int):
                        root = first
                        part = field[first]
                else:
                    ins = _inplace_positions(value, var, dep_tuple, struct_of, owns)
            elif isinstance(value, Call) and isinstance(value.op, GlobalVar):
                rec = False
            elif isinstance(value, If):
                rec = False
            else:
                raise PassError(f"checkpoint: {where} holds a {type(value).__name__}, which cannot be planned", b.span)
            sizes.append(size)
            costs.append(cost)
            deps.append(dep_tuple)
            recomputable.append(rec)
            alias_of.append(root)
            inplace.append(ins)
            kinds.append(kind)
            layouts.append(layout)
            # An op's fresh result may be written over, and so may a view of one (a field of its tuple
            # included) when nothing else holds the buffer: the memory model's rule.
            fresh = size > 0 and root is None and isinstance(value, Call) and isinstance(value.op, Op)
            view = root is not None and owns[root] and (not isinstance(layout, Layout) or layout.writeable)
            owns.append(fresh or view)
            own_fields = ()
            if root is None and size > 0 and isinstance(var.struct_info, TupleStructInfo):
                own_fields = tuple(static_bytes(f, where, b.span) for f in var.struct_info.fields)
            fields.append(own_fields)
            field.append(part)
    outputs = tuple(dict.fromkeys(struct_nodes_of(struct_of(func.body.body), [])))
    problem = Problem(
        sizes=tuple(sizes),
        costs=tuple(costs),
        deps=tuple(deps),
        recomputable=tuple(recomputable),
        outputs=outputs,
        pinned_bytes=pinned,
        alias_of=tuple(alias_of),
        inplace=tuple(inplace),
        kinds=tuple(kinds),
        names=tuple(names),
        fields=tuple(fields),
        field=tuple(field),
    )
    return Extraction(problem, func, tuple(bindings), tuple(block_of), node_of, expand, frozenset(transparent))


def _fresh_layout(sinfo):
    """The C-ordered layout(s) of a new value with this struct info (None for non-tensors)."""
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and sinfo.dtype:
        return c_layout(tuple(sinfo.shape), sinfo.dtype)[1]
    if isinstance(sinfo, TupleStructInfo):
        return fold(sinfo, tuple_fields, lambda s, kids: tuple(kids) if isinstance(s, TupleStructInfo) else _fresh_layout(s))
    return None


def _nodes_step(struct, fields) -> list:
    if type(struct) is tuple:
        return [n for f in fields for n in f]
    return [struct] if isinstance(struct, int) else []


def struct_fields(struct) -> tuple:
    """The parts of a structure (a node id, a leaf expression, a parameter, or a tuple of structures)."""
    return struct if type(struct) is tuple else ()


def _shared_layouts(call: Call, out_sinfo, arg_layout):
    """The layout(s) of the call's result when it is its first argument itself or views its buffer (the
    memory model's rules, retrograd.analysis.layout), else None (a fresh buffer)."""
    if 0 not in getattr(call.op, "aliases", ()):
        return None
    args = [arg_layout(a) for a in call.args]
    fields = out_sinfo.fields if isinstance(out_sinfo, TupleStructInfo) else (out_sinfo,)
    shapes = [tuple(f.shape) if isinstance(f, TensorStructInfo) and f.shape is not None else () for f in fields]
    rule = results(call.op, call.attrs, [a if isinstance(a, Layout) else None for a in args], shapes)
    if any(isinstance(r, Fresh) for r in rule):
        return None
    if len(rule) == 1 and isinstance(rule[0], Same):
        return args[rule[0].arg]  # the argument itself, a tuple included (a marker on a tuple)
    outs = tuple(args[r.arg] if isinstance(r, Same) else r.layout for r in rule)
    return outs if isinstance(out_sinfo, TupleStructInfo) else outs[0]


def _inplace_positions(call: Call, var: Var, dep_tuple, struct_of, owns) -> tuple:
    """Positions in dep_tuple whose buffer the executor may reuse for the result (see runtime/inplace.py)."""
    structs = [struct_of(a) for a in call.args]
    # The lowering's rule (analysis.liveness): every argument in one register, none a tuple of them.
    registers = [s if type(s) is tuple else 0 for s in structs]
    positions = inplace_positions(call, registers, var.struct_info)
    out = []
    for p in positions:
        s = structs[p]
        if isinstance(s, int) and owns[s]:
            k = dep_tuple.index(s)
            if k not in out:
                out.append(k)
        elif isinstance(s, Var | int):
            # The executor tries only the first candidate dying here; a parameter, or a value of an If
            # or a call, may fail that try. The Problem cannot say when such a value dies, so the later
            # candidates are dropped (the model can only over-estimate).
            break
    return tuple(out)
