"""The executor's peak live bytes, predicted from struct info and liveness alone (static shapes).

The model replays what `retrograd.build(mod)[name](*args)` does to its memory meter (see
retrograd/runtime/interp.py and docs/memory.md), on abstract arrays: a buffer (parameter, constant or
fresh, with its size) and a layout over it (shape, strides, writeable). Registers, release points and
in-place targets are assigned exactly as the lowering assigns them; what each kernel returns (a fresh
buffer, an input itself, a view of it) comes from retrograd.analysis.layout. Arguments are taken to be
distinct arrays owning their memory. Where an If's condition depends on the data, every path is
followed and the worst one reported (at most MAX_PATHS paths).
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.gc_pause import collector_paused
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
)
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, describe_sinfo
from retrograd.analysis.layout import Layout, Same, View, c_strides, results
from retrograd.analysis.liveness import inplace_positions, release_points

MAX_PATHS = 4096
MAX_CALL_DEPTH = 64


@attrs.frozen
class MemoryTimeline:
    """Live bytes around each top-level binding of a function, by the executor's accounting.

    names[i] is the i-th top-level binding; during[i] the most bytes live while it runs (its result
    stored, its dying inputs not yet released; for an If or a call, the most at any point inside);
    after[i] the bytes live once it has released them. peak_index is the first binding reaching
    `peak` (None when the parameters alone are the peak). With data-dependent branches each figure is
    the worst over the paths.
    """

    function: str
    names: tuple[str, ...]
    during: tuple[int, ...]
    after: tuple[int, ...]
    param_bytes: int
    peak: int
    peak_index: int | None

    @property
    def peak_name(self) -> str | None:
        return None if self.peak_index is None else self.names[self.peak_index]


def peak_memory(mod, func_name: str) -> int:
    """The `ex.stats.peak_live_bytes` that `retrograd.build(mod)[func_name](*args)` measures."""
    return memory_timeline(mod, func_name).peak


def memory_timeline(mod, func_name: str) -> MemoryTimeline:
    """Per top-level binding of `func_name`: live bytes during and after it, and where the peak is."""
    # The collector would rescan the module's many IR nodes over and over while plans are made.
    with collector_paused():
        return _timeline(mod, func_name)


def _timeline(mod, func_name: str) -> MemoryTimeline:
    plans = _Plans(mod)
    main = plans.get(func_name)
    best = None
    prefixes = [[]]
    paths = 0
    while prefixes:
        prefix = prefixes.pop()
        paths += 1
        if paths > MAX_PATHS:
            raise UnsupportedError(
                f"{func_name}: more than {MAX_PATHS} paths through data-dependent If conditions; no static peak"
            )
        sim = _Sim(plans, prefix)
        sim.run_top(main)
        # Depth-first over the branch choices: every choice made past the prefix can also go the other way.
        for j in range(len(prefix), len(sim.taken)):
            prefixes.append(sim.taken[:j] + [False])
        best = sim if best is None else best.merge(sim)
    during, peak = tuple(best.during), best.peak
    index = next((i for i, d in enumerate(during) if d == peak), None) if peak > best.param_bytes else None
    return MemoryTimeline(func_name, main.names, during, tuple(best.after), best.param_bytes, peak, index)


# -- plans: the lowering's registers and release points, without kernels ------------------------------


class _Ins:
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


class _Block:
    __slots__ = ("ins", "result", "result_regs", "defined", "outer_reads", "prefree", "endfree")


class _Plan:
    __slots__ = ("name", "params", "template", "block", "names")


class _Plans:
    """Every function of the module planned once, on demand."""

    def __init__(self, mod):
        self.mod = mod
        self.plans: dict[str, _Plan] = {}

    def get(self, name: str) -> _Plan:
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
        self.top = True

    def error(self, message, span=None):
        return UnsupportedError(f"{self.name}: {message}", span)

    def new_reg(self, value=None, fixed=False) -> int:
        self.template.append(value)
        if fixed:
            self.fixed.add(len(self.template) - 1)
        return len(self.template) - 1

    def plan(self) -> _Plan:
        plan = _Plan()
        plan.name = self.name
        params = []
        for p in self.func.params:
            _param_value(p.struct_info, f"{self.name}: parameter '{p.name_hint}'", p.span)
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
            return tuple(self.source(f, span) for f in expr.fields)
        reg = self.consts.get(id(expr))
        if reg is None:
            value = _const_value(expr) if isinstance(expr, Constant) else None
            if not isinstance(expr, Constant | PrimValue | StringImm | ShapeExpr):
                raise self.error(f"{type(expr).__name__} cannot be an argument here", expr.span or span)
            reg = self.consts[id(expr)] = self.new_reg(value, fixed=True)
        return reg

    def seq(self, seq: SeqExpr) -> _Block:
        if not isinstance(seq, SeqExpr):
            raise self.error(f"expected a sequence of bindings, got {type(seq).__name__}")
        top, self.top = self.top, False
        blk = _Block()
        blk.ins, blk.defined = [], set()
        k = 0
        for block in seq.blocks:
            for binding in block.bindings:
                self.binding(binding, blk, k if top else None)
                k += 1
        blk.result = self.source(seq.body, seq.span)
        blk.result_regs = _flat(blk.result, set()) - self.fixed
        reads = set(blk.result_regs)
        for ins in blk.ins:
            reads |= ins.reads
        blk.outer_reads = reads - blk.defined
        return blk

    def binding(self, binding, blk: _Block, k) -> None:
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
            self.add(blk, _Ins("item", self.new_reg(), [src], {src}, var, k, index=value.index))
            return
        if isinstance(value, Call):
            srcs = [self.source(a, span) for a in value.args]
            reads = set()
            for s in srcs:
                _flat(s, reads)
            if isinstance(value.op, GlobalVar):
                ins = _Ins("call", self.new_reg(), srcs, reads, var, k, callee=value.op.name_hint)
            elif isinstance(value.op, Op):
                shapes = _static_shapes(var.struct_info, f"{self.name}: binding '{var.name_hint}'", span)
                fresh = [_c_layout(shape, dtype) for shape, dtype in shapes]
                ins = _Ins("op", self.new_reg(), srcs, reads, var, k, call=value, fresh=fresh)
            else:
                raise self.error(f"binding '{var.name_hint}' calls a {type(value.op).__name__}", span)
            self.add(blk, ins)
            return
        if isinstance(value, If):
            cond = self.source(value.cond, span)
            tb, fb = self.seq(value.true_branch), self.seq(value.false_branch)
            reads = {cond} | tb.outer_reads | fb.outer_reads
            self.add(blk, _Ins("if", self.new_reg(), [cond], reads, var, k, branches=(tb, fb)))
            return
        raise self.error(f"binding '{var.name_hint}': cannot execute a {type(value).__name__} value", span)

    def add(self, blk: _Block, ins: _Ins) -> None:
        ins.reads -= self.fixed
        blk.ins.append(ins)
        blk.defined.add(ins.out)
        self.src_of[ins.var] = ins.out

    def assign(self, blk: _Block, owned: set[int]) -> None:
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


def _flat(src, out: set) -> set:
    if isinstance(src, int):
        out.add(src)
    else:
        for s in src:
            _flat(s, out)
    return out


# -- abstract values ------------------------------------------------------------------------------


class _Buf:
    """One memory buffer. kind: "param" and "fresh" count; "const" (module constants) never does."""

    __slots__ = ("nbytes", "kind")

    def __init__(self, nbytes: int, kind: str):
        self.nbytes = nbytes
        self.kind = kind


class _Arr:
    __slots__ = ("buf", "layout", "known")

    def __init__(self, buf: _Buf, layout: Layout, known=None):
        self.buf = buf
        self.layout = layout
        self.known = known  # the value of a constant scalar, to follow If conditions known statically


def _const_value(c: Constant) -> _Arr:
    data = np.asarray(c.data)
    known = bool(data) if data.ndim == 0 and data.dtype.kind in "biuf" else None
    layout = Layout(tuple(data.shape), str(data.dtype), tuple(data.strides), False)
    return _Arr(_Buf(data.nbytes, "const"), layout, known)


def _itemsize(dtype: str) -> int:
    return np.dtype(dtype).itemsize


def _static_shapes(sinfo, what: str, span=None) -> list:
    """[(shape, dtype)] of the tensors in `sinfo`, nested tuples flattened; error on unknown dims."""
    if isinstance(sinfo, TensorStructInfo):
        if not sinfo.is_static or not sinfo.dtype:
            raise UnsupportedError(
                f"{what} has struct info {describe_sinfo(sinfo)}: the memory model needs static shapes and dtypes", span
            )
        return [(tuple(sinfo.shape), sinfo.dtype)]
    if isinstance(sinfo, TupleStructInfo):
        out = []
        for f in sinfo.fields:
            out.extend(_static_shapes(f, what, span))
        return out
    raise UnsupportedError(f"{what} has struct info {describe_sinfo(sinfo)}: the memory model needs tensors", span)


def _c_layout(shape, dtype: str) -> tuple[int, Layout]:
    size = _itemsize(dtype)
    return math.prod(shape) * size, Layout(shape, dtype, c_strides(shape, size))


def _param_value(sinfo, what: str, span=None):
    if isinstance(sinfo, TensorStructInfo):
        (shape, dtype), = _static_shapes(sinfo, what, span)
        nbytes, layout = _c_layout(shape, dtype)
        return _Arr(_Buf(nbytes, "param"), layout)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_param_value(f, what, span) for f in sinfo.fields)
    return None  # shapes, prim values, strings: no memory


# -- the simulation -----------------------------------------------------------------------------------


class _Sim:
    """One run of a function on abstract arrays, with the If choices in `prefix` (then True)."""

    def __init__(self, plans: _Plans, prefix: list[bool]):
        self.plans = plans
        self.prefix = prefix
        self.taken: list[bool] = []
        self.refs: dict[_Buf, int] = {}
        self.pins: dict[_Buf, int] = {}
        self.decided: dict[_Buf, bool] = {}
        self.cur = 0
        self.peak = 0
        self.window = 0
        self.depth = 0
        self.param_bytes = 0
        self.during: list[int] = []
        self.after: list[int] = []

    def merge(self, other: "_Sim") -> "_Sim":
        self.peak = max(self.peak, other.peak)
        self.during = [max(a, b) for a, b in zip(self.during, other.during)]
        self.after = [max(a, b) for a, b in zip(self.after, other.after)]
        return self

    # meter
    def acquire(self, v, count: int = 1) -> None:
        if isinstance(v, _Arr):
            buf = v.buf
            if buf.kind == "const":
                return
            c = self.refs.get(buf)
            if c is None:
                self.refs[buf] = count
                self.cur += buf.nbytes
                if self.cur > self.window:
                    self.window = self.cur
                    if self.cur > self.peak:
                        self.peak = self.cur
            else:
                self.refs[buf] = c + count
        elif type(v) is tuple:
            for x in v:
                self.acquire(x, count)

    def release(self, v) -> None:
        if isinstance(v, _Arr):
            c = self.refs.get(v.buf)
            if c is not None:
                if c > 1:
                    self.refs[v.buf] = c - 1
                else:
                    del self.refs[v.buf]
                    self.cur -= v.buf.nbytes
        elif type(v) is tuple:
            for x in v:
                self.release(x)

    # functions and blocks
    def run_top(self, plan: _Plan) -> None:
        args = [_param_value(p.struct_info, f"{plan.name}: parameter '{p.name_hint}'", p.span) for _, p in plan.params]
        n = len(plan.names)
        self.during = [0] * n
        self.after = [0] * n
        self.invoke(plan, args, top=True)

    def invoke(self, plan: _Plan, args: list, top: bool):
        regs = list(plan.template)
        for (reg, _), a in zip(plan.params, args):
            regs[reg] = a
            # The caller's own reference keeps top-level parameters live after their last use.
            self.acquire(a, 2 if top else 1)
        if top:
            self.param_bytes = self.cur
            self.peak = self.window = self.cur
        return self.run_block(plan, plan.block, regs, top)

    def run_block(self, plan: _Plan, blk: _Block, regs: list, top: bool = False):
        for r in blk.prefree:
            self.release(regs[r])
            regs[r] = None
        done = 0
        for ins in blk.ins:
            if top:
                # Bindings without an instruction (aliases, tuples) leave the bytes as they are.
                for k in range(done, ins.binding):
                    self.during[k] = self.after[k] = self.cur
                self.window = self.cur
            v = self.execute(plan, ins, regs)
            self.acquire(v)
            regs[ins.out] = v
            if top:
                self.during[ins.binding] = self.window
            for r in ins.frees:
                self.release(regs[r])
                regs[r] = None
            if top:
                self.after[ins.binding] = self.cur
                done = ins.binding + 1
        if top:
            for k in range(done, len(plan.names)):
                self.during[k] = self.after[k] = self.cur
        v = _read(regs, blk.result)
        for r in blk.endfree:
            self.release(regs[r])
            regs[r] = None
        return v

    def execute(self, plan: _Plan, ins: _Ins, regs: list):
        if ins.kind == "op":
            return self.apply(plan, ins, regs)
        if ins.kind == "item":
            return regs[ins.srcs[0]][ins.index]
        if ins.kind == "call":
            callee = self.plans.get(ins.callee)
            self.depth += 1
            if self.depth > MAX_CALL_DEPTH:
                raise UnsupportedError(
                    f"{plan.name}: binding '{ins.var.name_hint}': calls nest deeper than {MAX_CALL_DEPTH} "
                    "(a recursion whose depth depends on the data has no static peak)",
                    ins.var.span,
                )
            v = self.invoke(callee, [_read(regs, s) for s in ins.srcs], top=False)
            self.depth -= 1
            return v
        cond = regs[ins.srcs[0]]
        known = cond.known if isinstance(cond, _Arr) else None
        if known is None:
            # A condition tested again (the same buffer) goes the same way: only new ones are choices.
            known = self.decided.get(cond.buf) if isinstance(cond, _Arr) else None
        if known is None:
            i = len(self.taken)
            known = self.prefix[i] if i < len(self.prefix) else True
            self.taken.append(known)
            if isinstance(cond, _Arr):
                self.decided[cond.buf] = known
        # The executor holds the condition in a local while the branch runs: it is not free to overwrite.
        pinned = cond.buf if isinstance(cond, _Arr) else None
        if pinned is not None:
            self.pins[pinned] = self.pins.get(pinned, 0) + 1
        v = self.run_block(plan, ins.branches[0 if known else 1], regs)
        if pinned is not None:
            self.pins[pinned] -= 1
        return v

    def apply(self, plan: _Plan, ins: _Ins, regs: list):
        if ins.target is not None:
            a = regs[ins.srcs[ins.target]]
            # The executor writes the result over an argument no other live value (or view) refers to.
            if (
                isinstance(a, _Arr)
                and a.layout.writeable
                and self.refs.get(a.buf) == 1
                and not self.pins.get(a.buf)
            ):
                return a
        fresh = ins.fresh
        call = ins.call
        if not getattr(call.op, "aliases", ()):
            outs = [_Arr(_Buf(n, "fresh"), layout) for n, layout in fresh]
        else:
            args = [_read(regs, s) for s in ins.srcs]
            layouts = [a.layout if isinstance(a, _Arr) else None for a in args]
            outs = []
            for (n, layout), r in zip(fresh, results(call.op, call.attrs, layouts, [lay.shape for _, lay in fresh])):
                if isinstance(r, Same):
                    outs.append(args[r.arg])
                elif isinstance(r, View):
                    outs.append(_Arr(args[r.arg].buf, r.layout))
                else:
                    outs.append(_Arr(_Buf(n, "fresh"), layout))
        return tuple(outs) if isinstance(ins.var.struct_info, TupleStructInfo) else outs[0]


def _read(regs: list, src):
    if isinstance(src, int):
        return regs[src]
    return tuple(_read(regs, s) for s in src)
