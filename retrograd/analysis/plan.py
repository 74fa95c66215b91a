"""A function as the memory model runs it: the lowering's registers and release points, abstract values."""

from __future__ import annotations

import math

import numpy as np

from retrograd.analysis.layout import Layout, c_strides
from retrograd.analysis.liveness import flat_registers, inplace_positions, release_points
from retrograd.errors import UnsupportedError
from retrograd.ir.dtypes import itemsize
from retrograd.ir.expr import (
    Call,
    Constant,
    Function,
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
    tuple_parts,
)
from retrograd.ir.nested import fold, preorder
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, tuple_fields
from retrograd.ir.text import format_sinfo


# -- plans: the lowering's registers and release points, without kernels ------------------------------


class Ins:
    """One instruction of the lowered code: what it reads, the register it fills, what it releases."""

    __slots__ = ("kind", "out", "srcs", "reads", "frees", "call", "var", "branches", "callee", "target", "index", "binding", "fresh")

    def __init__(self, kind, out, srcs, reads, var, binding, **extra):
        self.kind = kind  # "op", "call", "if", "item"
        self.out = out
        self.srcs = srcs
        self.reads = reads
        self.var = var
        self.binding = binding  # position among the top-level bindings, or None
        self.frees = ()
        self.call = extra.get("call")
        self.callee = extra.get("callee")
        self.branches = extra.get("branches")
        self.index = extra.get("index")  # of the tuple element an "item" takes
        self.fresh = extra.get("fresh")  # [(nbytes, C-order layout)] of an op's outputs
        self.target = None  # in-place argument position


class Block:
    """A function body or If branch: instructions, result source, and registers released around them."""

    __slots__ = ("ins", "result", "result_regs", "defined", "outer_reads", "prefree", "endfree")


class Plan:
    """A planned function: parameter registers, the register template (constants filled), its body."""

    __slots__ = ("name", "params", "template", "block", "names")


class Plans:
    """Every function of the module planned once, on demand."""

    def __init__(self, mod):
        self.mod = mod
        self.plans: dict[str, Plan] = {}

    def get(self, name: str) -> Plan:
        plan = self.plans.get(name)
        if plan is None:
            try:
                func = self.mod[name]
            except KeyError:
                func = None
            if not isinstance(func, Function):
                known = ", ".join(n for n, f in self.mod.items() if isinstance(f, Function)) or "none"
                raise UnsupportedError(f"the module has no function '{name}' (functions: {known})")
            plan = self.plans[name] = _Planner(name, func).plan()
        return plan


class _Planner:
    def __init__(self, name: str, func: Function):
        self.name = name
        self.func = func
        self.template: list = [None]
        self.fixed: set[int] = {0}
        self.src_of: dict = {}
        self.consts: dict[int, int] = {}
        self.nest_src: dict = {}  # id -> source of tuples (see source)
        self.top = True
        self.fresh: dict = {}  # struct info -> [(nbytes, C-order layout)]: few distinct ones per function

    def error(self, message, span=None):
        return UnsupportedError(f"{self.name}: {message}", span)

    def new_reg(self, value=None, fixed=False) -> int:
        self.template.append(value)
        if fixed:
            self.fixed.add(len(self.template) - 1)
        return len(self.template) - 1

    def plan(self) -> Plan:
        plan = Plan()
        plan.name = self.name
        params = []
        for p in self.func.params:
            param_value(p.struct_info, f"{self.name}: parameter '{p.name_hint}'", p.span)
            reg = self.new_reg()
            self.src_of[p] = reg
            params.append((reg, p))
        plan.names = tuple(b.var.name_hint for blk in self.func.body.blocks for b in blk.bindings)
        body = self.seq(self.func.body)
        self.assign(body, {reg for reg, _ in params} | body.defined)
        plan.params = params
        plan.template = self.template
        plan.block = body
        return plan

    def source(self, expr, span=None):
        if isinstance(expr, Var):
            src = self.src_of.get(expr)
            if src is None:
                raise self.error(f"variable '{expr.name_hint}' is used before it is bound", expr.span or span)
            return src
        if isinstance(expr, Tuple):
            # As retrograd.runtime.lowering builds them: bottom-up with a stack, kept per tuple node.
            return fold(expr, tuple_parts, lambda e, kids: tuple(kids) if isinstance(e, Tuple) else self.source(e, span), memo=self.nest_src)
        reg = self.consts.get(id(expr))
        if reg is None:
            value = _const_value(expr) if isinstance(expr, Constant) else None
            if not isinstance(expr, Constant | PrimValue | StringImm | ShapeExpr):
                raise self.error(f"{type(expr).__name__} cannot be an argument here", expr.span or span)
            reg = self.consts[id(expr)] = self.new_reg(value, fixed=True)
        return reg

    def seq(self, seq: SeqExpr) -> Block:
        if not isinstance(seq, SeqExpr):
            raise self.error(f"expected a sequence of bindings, got {type(seq).__name__}")
        top, self.top = self.top, False
        blk = Block()
        blk.ins, blk.defined = [], set()
        k = 0
        for block in seq.blocks:
            for binding in block.bindings:
                self.binding(binding, blk, k if top else None)
                k += 1
        blk.result = self.source(seq.body, seq.span)
        blk.result_regs = flat_registers(blk.result, set()) - self.fixed
        reads = set(blk.result_regs)
        for ins in blk.ins:
            reads |= ins.reads
        blk.outer_reads = reads - blk.defined
        return blk

    def binding(self, binding, blk: Block, k) -> None:
        var, value = binding.var, binding.value
        span = binding.span or var.span or getattr(value, "span", None)
        if isinstance(value, Var | Constant | PrimValue | StringImm | ShapeExpr | Tuple):
            self.src_of[var] = self.source(value, span)
            return
        if isinstance(value, TupleGetItem):
            src = self.source(value.tuple_value, span)
            if not isinstance(src, int):
                self.src_of[var] = src[value.index]
                return
            self.add(blk, Ins("item", self.new_reg(), [src], {src}, var, k, index=value.index))
            return
        if isinstance(value, Call):
            srcs = [self.source(a, span) for a in value.args]
            reads = set()
            for s in srcs:
                flat_registers(s, reads)
            if isinstance(value.op, GlobalVar):
                ins = Ins("call", self.new_reg(), srcs, reads, var, k, callee=value.op.name_hint)
            elif isinstance(value.op, Op):
                fresh = self.fresh.get(var.struct_info)
                if fresh is None:
                    shapes = static_shapes(var.struct_info, f"{self.name}: binding '{var.name_hint}'", span)
                    fresh = self.fresh[var.struct_info] = [c_layout(shape, dtype) for shape, dtype in shapes]
                ins = Ins("op", self.new_reg(), srcs, reads, var, k, call=value, fresh=fresh)
            else:
                raise self.error(f"binding '{var.name_hint}' calls a {type(value.op).__name__}", span)
            self.add(blk, ins)
            return
        if isinstance(value, If):
            cond = self.source(value.cond, span)
            tb, fb = self.seq(value.true_branch), self.seq(value.false_branch)
            reads = {cond} | tb.outer_reads | fb.outer_reads
            self.add(blk, Ins("if", self.new_reg(), [cond], reads, var, k, branches=(tb, fb)))
            return
        raise self.error(f"binding '{var.name_hint}': cannot execute a {type(value).__name__} value", span)

    def add(self, blk: Block, ins: Ins) -> None:
        ins.reads -= self.fixed
        blk.ins.append(ins)
        blk.defined.add(ins.out)
        self.src_of[ins.var] = ins.out

    def assign(self, blk: Block, owned: set[int]) -> None:
        """Release points and in-place targets, as retrograd.runtime.lowering assigns them."""
        frees, dying, prefree, endfree = release_points(
            [ins.reads for ins in blk.ins], [ins.out for ins in blk.ins],
            [ins.branches is not None for ins in blk.ins], blk.result_regs, owned,
        )
        for i, ins in enumerate(blk.ins):
            ins.frees = tuple(frees[i])
            if ins.branches is not None:
                for b in ins.branches:
                    self.assign(b, dying[i] | b.defined)
            elif ins.kind == "op":
                positions = inplace_positions(ins.call, ins.srcs, ins.var.struct_info)
                dying_here = [p for p in positions if ins.srcs[p] in frees[i]]
                if dying_here:
                    ins.target = dying_here[0]
        blk.prefree, blk.endfree = tuple(prefree), tuple(endfree)


# -- abstract values ------------------------------------------------------------------------------


class Buf:
    """One memory buffer. kind: "param" and "fresh" count; "const" (module constants) never does."""

    __slots__ = ("nbytes", "kind")

    def __init__(self, nbytes: int, kind: str):
        self.nbytes = nbytes
        self.kind = kind


class Arr:
    """An array value: the buffer it refers to and its layout over it."""

    __slots__ = ("buf", "layout", "known")

    def __init__(self, buf: Buf, layout: Layout, known=None):
        self.buf = buf
        self.layout = layout
        self.known = known  # the value of a constant scalar, to follow If conditions known statically


def _const_value(c: Constant) -> Arr:
    data = np.asarray(c.data)
    known = bool(data) if data.ndim == 0 and data.dtype.kind in "biuf" else None
    layout = Layout(tuple(data.shape), str(data.dtype), tuple(data.strides), False)
    return Arr(Buf(data.nbytes, "const"), layout, known)


def _itemsize(dtype: str) -> int:
    return itemsize(dtype)


def static_shapes(sinfo, what: str, span=None) -> list:
    """[(shape, dtype)] of the tensors in `sinfo`, nested tuples flattened; error on unknown dims."""
    if isinstance(sinfo, TensorStructInfo):
        if not sinfo.is_static or not sinfo.dtype:
            raise UnsupportedError(
                f"{what} has struct info {format_sinfo(sinfo, brief=True)}: the memory model needs static shapes and dtypes", span
            )
        return [(tuple(sinfo.shape), sinfo.dtype)]
    if isinstance(sinfo, TupleStructInfo):
        out = []
        for s in preorder(sinfo, tuple_fields):  # a stack: tuples nest to any depth
            if not isinstance(s, TupleStructInfo):
                out.extend(static_shapes(s, what, span))
        return out
    raise UnsupportedError(f"{what} has struct info {format_sinfo(sinfo, brief=True)}: the memory model needs tensors", span)


def c_layout(shape, dtype: str) -> tuple[int, Layout]:
    size = _itemsize(dtype)
    return math.prod(shape) * size, Layout(shape, dtype, c_strides(shape, size))


def param_value(sinfo, what: str, span=None):
    if isinstance(sinfo, TensorStructInfo):
        (shape, dtype), = static_shapes(sinfo, what, span)
        nbytes, layout = c_layout(shape, dtype)
        return Arr(Buf(nbytes, "param"), layout)
    if isinstance(sinfo, TupleStructInfo):
        # Each occurrence its own buffers (not shared=True: a struct info repeated is two parameters' worth).
        return fold(sinfo, tuple_fields, lambda s, kids: tuple(kids) if isinstance(s, TupleStructInfo) else param_value(s, what, span), shared=False)
    return None  # shapes, prim values, strings: no memory
