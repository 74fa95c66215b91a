"""The executor's peak live bytes, predicted from struct info and liveness alone (docs/memory.md)."""

from __future__ import annotations

import attrs

import numpy as np

from retrograd.analysis.layout import Layout, Same, View, c_layout, results
from retrograd.analysis.plan import Block, Ins, Plan, Plans, fold_source
from retrograd.errors import UnsupportedError
from retrograd.gc_pause import collector_paused
from retrograd.ir.functor import module_if_depth, stack_room
from retrograd.ir.expr import Constant
from retrograd.ir.nested import fold, preorder, tuple_leaves
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, tuple_fields
from retrograd.ir.text import format_sinfo

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
    """The `ex.stats.peak_live_bytes` that `retrograd.build(mod)[func_name](*args)` measures.

    The executor's meter is replayed on abstract arrays (a buffer: parameter, constant or fresh, with
    its size; a layout over it) over the function's Plan (analysis/plan.py), the one the executor
    runs: its registers, release points and in-place targets, with kernel results as
    retrograd.analysis.layout describes them. Shapes must be static; arguments are taken to be distinct arrays owning their memory. Where an If's condition
    depends on the data every path is followed (at most MAX_PATHS) and the worst one is reported.
    """
    return memory_timeline(mod, func_name).peak


def memory_timeline(mod, func_name: str) -> MemoryTimeline:
    """Per top-level binding of `func_name`: live bytes during and after it, and where the peak is."""
    # The collector would rescan the module's many IR nodes over and over while plans are made.
    # Planning and replaying recurse once per nested If: room for the module's deepest nest.
    with collector_paused(), stack_room(module_if_depth(mod)):
        return _timeline(mod, func_name)


class Replay:
    """A function's plan with what the replay adds: abstract constants in the register template, and
    the C-order result buffers [(nbytes, layout)] of each op instruction (static shapes required: every
    instruction's are checked when the function is first planned, taken branch or not)."""

    __slots__ = ("plan", "template", "fresh")

    def __init__(self, plan: Plan, by_sinfo: dict):
        self.plan = plan
        for _, p in plan.params:
            param_value(p.struct_info, f"{plan.name}: parameter '{p.name_hint}'", p.span)
        self.template = [None] * plan.nregs
        for reg, expr in plan.consts.items():
            if isinstance(expr, Constant):
                self.template[reg] = _const_value(expr)
        self.fresh: dict[Ins, list] = {}
        for ins in plan.instructions():
            if ins.kind == "op":
                sinfo = ins.var.struct_info
                fresh = by_sinfo.get(sinfo)  # few distinct struct infos per function
                if fresh is None:
                    shapes = static_shapes(sinfo, f"{plan.name}: binding '{ins.var.name_hint}'", ins.span)
                    fresh = by_sinfo[sinfo] = [c_layout(shape, dtype) for shape, dtype in shapes]
                self.fresh[ins] = fresh


class Replays:
    """The module's functions planned and prepared for the replay once each, on demand."""

    def __init__(self, mod):
        self.plans = Plans(mod)
        self.replays: dict[str, Replay] = {}
        self.by_sinfo: dict = {}

    def get(self, name: str) -> Replay:
        r = self.replays.get(name)
        if r is None:
            r = self.replays[name] = Replay(self.plans.get(name), self.by_sinfo)
        return r


def live_at_peak(mod, func_name: str) -> tuple[tuple[str, int], ...]:
    """The values live when the function first reaches its peak: (binding or parameter name, bytes),
    largest first (a tuple's parts as name[k]; values sharing a buffer, such as views, count once under
    the name of the one that allocated it; inside a called function, the callee's names)."""
    with collector_paused(), stack_room(module_if_depth(mod)):
        peak = _timeline(mod, func_name).peak
        for sim in _paths(Replays(mod), func_name, peak):
            if sim.live is not None:
                return tuple(sorted(sim.live, key=lambda item: (-item[1], item[0])))
    return ()  # not reached: the peak is met on some path


def _paths(plans, func_name: str, watch=None):
    """A simulation per path through the data-dependent If conditions."""
    main = plans.get(func_name)
    prefixes = [[]]
    paths = 0
    while prefixes:
        prefix = prefixes.pop()
        paths += 1
        if paths > MAX_PATHS:
            raise UnsupportedError(
                f"{func_name}: more than {MAX_PATHS} paths through data-dependent If conditions; no static peak"
            )
        sim = _Sim(plans, prefix, watch)
        sim.run_top(main)
        # Depth-first over the branch choices: every choice made past the prefix can also go the other way.
        for j in range(len(prefix), len(sim.taken)):
            prefixes.append(sim.taken[:j] + [False])
        yield sim


def _timeline(mod, func_name: str) -> MemoryTimeline:
    plans = Replays(mod)
    names = plans.get(func_name).plan.names
    best = None
    for sim in _paths(plans, func_name):
        best = sim if best is None else best.merge(sim)
    during, peak = tuple(best.during), best.peak
    index = next((i for i, d in enumerate(during) if d == peak), None) if peak > best.param_bytes else None
    return MemoryTimeline(func_name, names, during, tuple(best.after), best.param_bytes, peak, index)


# -- abstract values: buffers and layouts ------------------------------------------------------------------------------


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


def param_value(sinfo, what: str, span=None):
    if isinstance(sinfo, TensorStructInfo):
        (shape, dtype), = static_shapes(sinfo, what, span)
        nbytes, layout = c_layout(shape, dtype)
        return Arr(Buf(nbytes, "param"), layout)
    if isinstance(sinfo, TupleStructInfo):
        # Each occurrence its own buffers (not shared=True: a struct info repeated is two parameters' worth).
        return fold(sinfo, tuple_fields, lambda s, kids: tuple(kids) if isinstance(s, TupleStructInfo) else param_value(s, what, span), shared=False)
    return None  # shapes, prim values, strings: no memory


# -- the simulation -----------------------------------------------------------------------------------


class _Sim:
    """One run of a function on abstract arrays, with the If choices in `prefix` (then True)."""

    def __init__(self, plans: Replays, prefix: list[bool], watch: int | None = None):
        self.plans = plans
        # With `watch`: the buffers live when the bytes first reach it, by the name that allocated them.
        self.watch = watch
        self.names: dict[Buf, str] = {}
        self.live: list[tuple[str, int]] | None = None
        self.prefix = prefix
        self.taken: list[bool] = []
        self.refs: dict[Buf, int] = {}
        self.pins: dict[Buf, int] = {}
        self.decided: dict[Buf, bool] = {}
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
        if isinstance(v, Arr):
            buf = v.buf
            if buf.kind == "const":
                return
            c = self.refs.get(buf)
            if c is None:
                self.refs[buf] = count
                self.cur += buf.nbytes
                if self.cur == self.watch and self.live is None:
                    self.live = [(self.names.get(b, "?"), b.nbytes) for b in self.refs if b.kind != "const"]
                if self.cur > self.window:
                    self.window = self.cur
                    if self.cur > self.peak:
                        self.peak = self.cur
            else:
                self.refs[buf] = c + count
        elif type(v) is tuple:
            for x in tuple_leaves(v):  # a stack: tuples nest to any depth
                if isinstance(x, Arr):
                    self.acquire(x, count)

    def _name(self, v, name: str) -> None:
        leaves = [v] if isinstance(v, Arr) else list(tuple_leaves(v)) if type(v) is tuple else []
        for k, x in enumerate(leaves):
            if isinstance(x, Arr) and x.buf not in self.names:
                self.names[x.buf] = name if x is v else f"{name}[{k}]"

    def release(self, v) -> None:
        if isinstance(v, Arr):
            c = self.refs.get(v.buf)
            if c is not None:
                if c > 1:
                    self.refs[v.buf] = c - 1
                else:
                    del self.refs[v.buf]
                    self.cur -= v.buf.nbytes
        elif type(v) is tuple:
            for x in tuple_leaves(v):
                if isinstance(x, Arr):
                    self.release(x)

    # functions and blocks
    def run_top(self, rp: Replay) -> None:
        plan = rp.plan
        args = [param_value(p.struct_info, f"{plan.name}: parameter '{p.name_hint}'", p.span) for _, p in plan.params]
        n = len(plan.names)
        self.during = [0] * n
        self.after = [0] * n
        self.invoke(rp, args, top=True)

    def invoke(self, rp: Replay, args: list, top: bool):
        regs = list(rp.template)
        for (reg, p), a in zip(rp.plan.params, args):
            regs[reg] = a
            if self.watch is not None:
                self._name(a, p.name_hint)
            # The caller's own reference keeps top-level parameters live after their last use.
            self.acquire(a, 2 if top else 1)
        if top:
            self.param_bytes = self.cur
            self.peak = self.window = self.cur
        return self.run_block(rp, rp.plan.block, regs, top)

    def run_block(self, rp: Replay, blk: Block, regs: list, top: bool = False):
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
            v = self.execute(rp, ins, regs)
            if self.watch is not None:
                self._name(v, ins.var.name_hint)
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
            for k in range(done, len(rp.plan.names)):
                self.during[k] = self.after[k] = self.cur
        v = fold_source(blk.result, regs.__getitem__, tuple)
        for r in blk.endfree:
            self.release(regs[r])
            regs[r] = None
        return v

    def execute(self, rp: Replay, ins: Ins, regs: list):
        if ins.kind == "op":
            return self.apply(rp, ins, regs)
        if ins.kind == "item":
            return regs[ins.srcs[0]][ins.index]
        if ins.kind == "call":
            callee = self.plans.get(ins.callee)
            self.depth += 1
            if self.depth > MAX_CALL_DEPTH:
                raise UnsupportedError(
                    f"{rp.plan.name}: binding '{ins.var.name_hint}': calls nest deeper than {MAX_CALL_DEPTH} "
                    "(a recursion whose depth depends on the data has no static peak)",
                    ins.var.span,
                )
            v = self.invoke(callee, [fold_source(s, regs.__getitem__, tuple) for s in ins.srcs], top=False)
            self.depth -= 1
            return v
        cond = regs[ins.srcs[0]]
        known = cond.known if isinstance(cond, Arr) else None
        if known is None:
            # A condition tested again (the same buffer) goes the same way: only new ones are choices.
            known = self.decided.get(cond.buf) if isinstance(cond, Arr) else None
        if known is None:
            i = len(self.taken)
            known = self.prefix[i] if i < len(self.prefix) else True
            self.taken.append(known)
            if isinstance(cond, Arr):
                self.decided[cond.buf] = known
        # The executor holds the condition in a local while the branch runs: it is not free to overwrite.
        pinned = cond.buf if isinstance(cond, Arr) else None
        if pinned is not None:
            self.pins[pinned] = self.pins.get(pinned, 0) + 1
        v = self.run_block(rp, ins.branches[0 if known else 1], regs)
        if pinned is not None:
            self.pins[pinned] -= 1
        return v

    def apply(self, rp: Replay, ins: Ins, regs: list):
        if ins.target is not None:
            a = regs[ins.srcs[ins.target]]
            # The executor writes the result over an argument no other live value (or view) refers to.
            if (
                isinstance(a, Arr)
                and a.layout.writeable
                and self.refs.get(a.buf) == 1
                and not self.pins.get(a.buf)
            ):
                return a
        fresh = rp.fresh[ins]
        call = ins.call
        if not getattr(call.op, "aliases", ()):
            outs = [Arr(Buf(n, "fresh"), layout) for n, layout in fresh]
        else:
            args = [fold_source(s, regs.__getitem__, tuple) for s in ins.srcs]
            layouts = [a.layout if isinstance(a, Arr) else None for a in args]
            rule = results(call.op, call.attrs, layouts, [lay.shape for _, lay in fresh])
            if len(rule) == 1 and isinstance(rule[0], Same):
                return args[rule[0].arg]  # the argument itself, a tuple included (a marker on a tuple)
            outs = []
            for (n, layout), r in zip(fresh, results(call.op, call.attrs, layouts, [lay.shape for _, lay in fresh])):
                if isinstance(r, Same):
                    outs.append(args[r.arg])
                elif isinstance(r, View):
                    outs.append(Arr(args[r.arg].buf, r.layout))
                else:
                    outs.append(Arr(Buf(n, "fresh"), layout))
        return tuple(outs) if isinstance(ins.var.struct_info, TupleStructInfo) else outs[0]


def human_bytes(n: int) -> str:
    """A byte count as every report writes it (profile, memory figures, checkpoint plans): 1536 -> '1.5 KiB'."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # pragma: no cover
