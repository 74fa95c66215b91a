"""The plan of a function: the one walk from IR to ordered instructions over registers with lifetimes.

Every consumer reads it: the executor binds a kernel to each instruction (runtime/program.py), the
memory model replays it on abstract arrays (analysis/memory.py), `lower_to_python` prints it (its `del`s
are the plan's frees) and the checkpoint planner builds its problem from it. A plan holds no kernels
and needs no shapes: it says which register each binding fills, what each instruction reads, which
registers die after it (or, read last by an If, inside its branches), which argument an elementwise op
may overwrite, and which arguments an op's result may view.

Registers: 0 is the call's symbolic-dim environment; parameters, constants (`Plan.consts`) and each
instruction's result get one each. A source is a register or a (nested) tuple of sources: tuples,
aliases and constants cost no instruction, uses read their sources directly.
"""

from __future__ import annotations

from retrograd.analysis.liveness import flat_registers, inplace_positions, release_points
from retrograd.errors import NameError_, UnsupportedError
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
from retrograd.ir.functor import if_depth, stack_room
from retrograd.ir.nested import fold


class Ins:
    """One instruction.

    kind: "op" (call of an op; `call`, `op`), "call" (call of the module function `callee`), "if"
    (`branches`: two Blocks; srcs[0] the condition's register) or "item" (field `index` of the tuple in
    register srcs[0]). srcs: the argument sources (a tuple); reads: the registers it reads that may be
    freed (a tuple, each once; for an If, those its branches read from outside too); out: the register
    it fills; frees: the registers released right after it; inplace: the argument positions whose buffer
    an op may compute its result into when it dies there (liveness.inplace_positions); target: the first
    of them dying here (None: a fresh result); aliases: argument positions whose
    buffer the result may view (the op's `aliases`); var / binding / span: the bound variable, its
    position among the top-level bindings (None inside a branch), and where it is written.
    """

    __slots__ = ("kind", "out", "srcs", "reads", "frees", "var", "binding", "span", "call", "op", "callee",
                 "branches", "index", "inplace", "target", "aliases")

    def __init__(self, kind, out, srcs, reads, var, binding, span, call=None, callee=None, branches=None, index=None):
        self.kind = kind
        self.out = out
        self.srcs = srcs
        self.reads = reads
        self.frees = ()
        self.var = var
        self.binding = binding
        self.span = span
        self.call = call
        self.op = call.op if kind == "op" else None
        self.callee = callee
        self.branches = branches
        self.index = index
        self.inplace = ()
        self.target = None
        self.aliases = tuple(getattr(self.op, "aliases", ())) if kind == "op" else ()

    def __repr__(self) -> str:
        what = {"op": lambda: getattr(self.op, "name", "?"), "call": lambda: self.callee,
                "if": lambda: "if", "item": lambda: f"[{self.index}]"}[self.kind]()
        return f"<Ins %{self.out} = {what}{tuple(self.srcs)} frees {self.frees}>"


class Block:
    """A function body or If branch: its instructions; `result` (a source) is its value. prefree: owned
    registers never read, released before the instructions run; endfree: the registers of the result,
    released once it is read. defined / outer_reads: registers it fills / reads from outside, while it is
    planned (None after)."""

    __slots__ = ("ins", "result", "result_regs", "defined", "outer_reads", "prefree", "endfree")


class Plan:
    """A planned function. params: [(register, parameter Var)]; consts: {register: Constant, PrimValue,
    StringImm or ShapeExpr} (never freed, filled by each consumer its own way); nregs: the number of
    registers; fixed: the registers never freed (0 and the constants); block: the body; names: the
    top-level bindings' names (Ins.binding indexes them); reg_names: the variable each register was
    bound to, by name (None for register 0 and constants); sources: the source each variable stands for
    (parameters, bindings and branch bindings alike)."""

    __slots__ = ("name", "func", "params", "consts", "nregs", "fixed", "block", "names", "reg_names", "sources")

    def instructions(self):
        """Every instruction, branches' included, in program order (an If before its branches' code)."""
        stack = [iter(self.block.ins)]
        while stack:
            ins = next(stack[-1], None)
            if ins is None:
                stack.pop()
                continue
            yield ins
            if ins.branches is not None:
                stack.append(iter(ins.branches[1].ins))
                stack.append(iter(ins.branches[0].ins))


def plan_function(name: str, func: Function, functions=None) -> Plan:
    """The plan of `func` (named `name` in its module). `functions`: the names a call may target (the
    module's functions), checked when given. Errors name the binding and its span."""
    with stack_room(if_depth(func)):  # building and release points recurse once per nested If
        return _Planner(name, func, functions).plan()


def source_parts(src) -> tuple:
    """A source's parts: none for a register, the sources it holds for a tuple."""
    return () if type(src) is int else src


def fold_source(src, leaf, combine):
    """A source (a register or nested tuples of them) bottom-up: leaf(register), combine(kids) per tuple."""
    if type(src) is int:
        return leaf(src)
    step = lambda s, kids: leaf(s) if type(s) is int else combine(kids)  # noqa: E731
    return fold(src, source_parts, step, shared=False)


class Plans:
    """Every function of a module planned once, on demand."""

    def __init__(self, mod):
        self.mod = mod
        self.functions = frozenset(n for n, f in mod.items() if isinstance(f, Function))
        self.plans: dict[str, Plan] = {}

    def get(self, name: str) -> Plan:
        plan = self.plans.get(name)
        if plan is None:
            if name not in self.functions:
                known = ", ".join(sorted(self.functions)) or "none"
                raise UnsupportedError(f"the module has no function '{name}' (functions: {known})")
            plan = self.plans[name] = plan_function(name, self.mod[name], self.functions)
        return plan


class _Planner:
    def __init__(self, name: str, func: Function, functions):
        self.name = name
        self.func = func
        self.functions = functions
        self.nregs = 1
        self.fixed: set[int] = {0}
        self.consts: dict[int, object] = {}
        self.reg_names: list = [None]
        self.src_of: dict = {}
        self.const_reg: dict[int, int] = {}
        self.nest_src: dict = {}  # id -> source of tuples (see source)
        self.top = True

    def error(self, message, span=None, cls=UnsupportedError):
        return cls(f"{self.name}: {message}", span)

    def new_reg(self, label=None) -> int:
        self.reg_names.append(label)
        self.nregs += 1
        return self.nregs - 1

    def plan(self) -> Plan:
        plan = Plan()
        plan.name, plan.func = self.name, self.func
        params = []
        for p in self.func.params:
            reg = self.src_of[p] = self.new_reg(p.name_hint)
            params.append((reg, p))
        plan.names = tuple(b.var.name_hint for blk in self.func.body.blocks for b in blk.bindings)
        body = self.seq(self.func.body)
        self.assign(body, {reg for reg, _ in params} | body.defined)
        plan.params, plan.consts, plan.nregs, plan.fixed = params, self.consts, self.nregs, frozenset(self.fixed)
        plan.block, plan.reg_names, plan.sources = body, self.reg_names, self.src_of
        return plan

    def source(self, expr, span=None):
        if isinstance(expr, Var):
            src = self.src_of.get(expr)
            if src is None:
                raise self.error(f"variable '{expr.name_hint}' is used before it is bound", expr.span or span, NameError_)
            return src
        if isinstance(expr, Tuple):
            # Bottom-up with a stack (tuples nest to any depth), kept by node: bindings may share the
            # levels of one deep nest.
            return fold(expr, tuple_parts, lambda e, kids: tuple(kids) if isinstance(e, Tuple) else self.source(e, span), memo=self.nest_src)
        reg = self.const_reg.get(id(expr))
        if reg is None:
            if not isinstance(expr, Constant | PrimValue | StringImm | ShapeExpr):
                raise self.error(
                    f"{type(expr).__name__} cannot be an argument here (the module is not in normal form)", expr.span or span
                )
            reg = self.const_reg[id(expr)] = self.new_reg()
            self.fixed.add(reg)
            self.consts[reg] = expr
        return reg

    def seq(self, seq) -> Block:
        if not isinstance(seq, SeqExpr):
            raise self.error(f"expected a sequence of bindings, got {type(seq).__name__}", getattr(seq, "span", None))
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
            reads.update(ins.reads)
        blk.outer_reads = reads - blk.defined
        return blk

    def binding(self, binding, blk: Block, k) -> None:
        var, value = binding.var, binding.value
        span = binding.span or var.span or getattr(value, "span", None)
        if value.__class__ is Call and isinstance(value.op, Op):  # most bindings: their own path, inlined
            src_of, fixed = self.src_of, self.fixed
            srcs = []
            reads: set = set()
            for a in value.args:
                s = src_of.get(a)
                if s is None:
                    s = self.source(a, span)
                if s.__class__ is int:
                    if s not in fixed:
                        reads.add(s)
                else:
                    flat_registers(s, reads)
                srcs.append(s)
            self.add(blk, Ins("op", self.new_reg(var.name_hint), tuple(srcs), reads, var, k, span, call=value))
            return
        if isinstance(value, Var | Constant | PrimValue | StringImm | ShapeExpr | Tuple):
            self.src_of[var] = self.source(value, span)
            return
        if isinstance(value, TupleGetItem):
            src = self.source(value.tuple_value, span)
            if not isinstance(src, int):
                self.src_of[var] = src[value.index]
                return
            self.add(blk, Ins("item", self.new_reg(var.name_hint), (src,), {src}, var, k, span, index=value.index))
            return
        if isinstance(value, Call):
            srcs = tuple([self.source(a, span) for a in value.args])
            reads: set = set()
            for s in srcs:
                flat_registers(s, reads)
            op = value.op
            if isinstance(op, GlobalVar):
                callee = op.name_hint
                if self.functions is not None and callee not in self.functions:
                    raise self.error(f"binding '{var.name_hint}' calls '{callee}', which is not a function of the module", span)
                self.add(blk, Ins("call", self.new_reg(var.name_hint), srcs, reads, var, k, span, call=value, callee=callee))
            elif isinstance(op, Op):
                self.add(blk, Ins("op", self.new_reg(var.name_hint), srcs, reads, var, k, span, call=value))
            else:
                raise self.error(
                    f"binding '{var.name_hint}' calls a {type(op).__name__}; only ops and module functions can be called", span
                )
            return
        if isinstance(value, If):
            cond = self.source(value.cond, span)
            if not isinstance(cond, int):
                raise self.error(f"the condition of If binding '{var.name_hint}' is a tuple", span)
            tb, fb = self.seq(value.true_branch), self.seq(value.false_branch)
            reads = {cond} | tb.outer_reads | fb.outer_reads
            self.add(blk, Ins("if", self.new_reg(var.name_hint), (cond,), reads, var, k, span, branches=(tb, fb)))
            return
        raise self.error(f"binding '{var.name_hint}': cannot execute a {type(value).__name__} value", span)

    def add(self, blk: Block, ins: Ins) -> None:
        # A tuple, not the set it was gathered in: a few registers, held for as long as the plan.
        reads = ins.reads  # not `-=` below: that walks every constant, for each instruction
        ins.reads = tuple(reads) if self.fixed.isdisjoint(reads) else tuple(r for r in reads if r not in self.fixed)
        blk.ins.append(ins)
        blk.defined.add(ins.out)
        self.src_of[ins.var] = ins.out

    def assign(self, blk: Block, owned: set[int]) -> None:
        """Release points (analysis/liveness.py) and in-place targets: an elementwise op may write over
        its first candidate argument released at it."""
        frees, dying, prefree, endfree = release_points(
            [ins.reads for ins in blk.ins], [ins.out for ins in blk.ins],
            [ins.branches is not None for ins in blk.ins], blk.result_regs, owned,
        )
        for i, ins in enumerate(blk.ins):
            ins.frees = tuple(frees[i])
            if ins.branches is not None:
                for b in ins.branches:
                    self.assign(b, dying.get(i, set()) | b.defined)
            elif ins.kind == "op" and ins.op.inplace is not None:
                ins.inplace = tuple(inplace_positions(ins.call, ins.srcs, ins.var.struct_info))
                ins.target = next((p for p in ins.inplace if ins.srcs[p] in frees[i]), None)
        blk.prefree, blk.endfree = tuple(prefree), tuple(endfree)
        blk.defined = blk.outer_reads = None  # planning's alone: not held with the plan
