"""The executable program: each function's Plan (analysis/plan.py) becomes code over register slots, a
kernel bound to each instruction, with the plan's frees, in-place targets, splits and pairs
(`module_programs` / `lower_from`; `codegen/` is the other way to read a plan, as Python source)."""

from __future__ import annotations

import keyword
import os
from operator import itemgetter

import numpy as np

from retrograd.analysis.liveness import storage_of
from retrograd.analysis.plan import plan_function
from retrograd.errors import KernelError, UnsupportedError
from retrograd.gc_pause import collector_paused
from retrograd.ir.dtypes import itemsize, prim_scalar
from retrograd.ir.expr import Constant, Function, PrimValue, ShapeExpr, StringImm
from retrograd.ir.functor import if_depth, stack_room
from retrograd.ir.nested import fold, joined, render
from retrograd.ir.struct_info import (
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    all_dim_names,
    dim_names,
    tuple_fields,
)
from retrograd.ir.text import format_sinfo
from retrograd.ops.storage import for_storage
from retrograd.runtime import pairs, split, threads
from retrograd.runtime.inplace import make as make_inplace
from retrograd.runtime.precheck import lowers_plainly
from retrograd.runtime.interp import make_call, make_if, root_of
from retrograd.runtime.signature import (
    Binder,
    Mismatch,
    bindable_names,
    check_deferred,
    compile_checker,
    compile_dim,
)


class Info:
    """What an instruction is, for error messages and the profile: function, binding, op, inputs, span."""

    __slots__ = ("func", "var", "label", "args", "span", "key", "sinfo")

    def __init__(self, func, var, label, args, span, key, sinfo=None):
        self.func = func
        self.var = var
        self.label = label  # the call as written: R.take(w, t, axis=0, mode="fast")
        self.args = args  # [(label, reader)] to describe the inputs when the kernel fails
        self.span = span
        self.key = key  # the profile row: the op's script name
        self.sinfo = sinfo  # the binding's struct info, to give stray Python scalars their dtype


class Labels:
    """How a function's registers read in messages: their variable's name, or the constant they hold.
    Instructions keep a reference to it, not text: labels are made only when a message needs one."""

    __slots__ = ("func", "reg_names", "consts")

    def __init__(self, func: str, reg_names: list):
        self.func = func
        self.reg_names = reg_names  # the plan's: register -> variable name (None: register 0 and constants)
        self.consts: dict[int, str] = {}

    def of(self, reg: int) -> str:
        name = self.consts.get(reg)
        if name is None:
            name = self.reg_names[reg] if reg < len(self.reg_names) else None
        return f"%{reg}" if name is None else name

    def describe(self, src) -> str:
        if isinstance(src, int):
            return self.of(src)
        return render(src, self._parts)

    def _parts(self, src) -> list:
        if isinstance(src, int):
            return [self.of(src)]
        return ["(", *joined(src), ",)" if len(src) == 1 else ")"]

    def arg_info(self, srcs) -> list:
        return [(self.describe(s), reader(s)) for s in srcs]


class Site:
    """Info of an op or TupleGetItem instruction, with `label` and `args` made on demand (a failing
    kernel's message): text and readers made for each of a big function's bindings would cost more
    than the rest of its lowering. `call` is the op's Call, or the field index of an item."""

    __slots__ = ("labels", "binding", "call", "srcs", "span", "key", "sinfo")

    def __init__(self, labels: Labels, var, call, srcs, span, key):
        self.labels = labels
        self.binding = var
        self.call = call
        self.srcs = srcs
        self.span = span
        self.key = key
        self.sinfo = var.struct_info

    @property
    def func(self) -> str:
        return self.labels.func

    @property
    def var(self) -> str:
        return self.binding.name_hint

    @property
    def label(self) -> str:
        if self.key == "TupleGetItem":
            return f"{self.labels.describe(self.srcs[0])}[{self.call}]"
        attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in self.call.attrs.items())
        parts = [self.labels.describe(s) for s in self.srcs] + ([attrs] if attrs else [])
        return f"{self.key}({', '.join(parts)})"

    @property
    def args(self) -> list:
        if self.key == "TupleGetItem":
            return [("tuple", itemgetter(self.srcs[0]))]
        return self.labels.arg_info(self.srcs)


class Block:
    """Lowered code of a function body or an If branch."""

    __slots__ = ("code", "prefree", "endfree", "result")

    def __init__(self, code, prefree, endfree, result):
        self.code = code  # tuple of (fn, out, frees, special, info)
        self.prefree = prefree  # registers released before the code runs (dying here, unused)
        self.endfree = endfree  # registers released after the result is read
        self.result = result  # regs -> the block's value


class Program:
    """A function, lowered on first use (`block` is None until then): register template, parameter
    checkers, shape registers, body block."""

    __slots__ = ("name", "nparams", "param_names", "params", "template", "shape_regs", "symbolic", "block", "const_roots",
                 "splits")

    def __init__(self, name: str, func: Function):
        self.name = name
        self.nparams = len(func.params)
        self.param_names = tuple(p.name_hint for p in func.params)
        self.block = None


class _Pairable:
    """What runtime/pairs.py reads of an instruction to choose the kernels that run at once."""

    __slots__ = ("out", "reads", "special", "pair_cost", "moves")

    def __init__(self, out, reads, special, pair_cost, moves):
        self.out, self.reads, self.special, self.pair_cost, self.moves = out, reads, special, pair_cost, moves


def module_programs(mod, check: bool = False) -> dict[str, Program]:
    """A Program, not lowered yet, for each function of `mod`, after the checks that make building fail
    (runtime/precheck.py): a function the quick check cannot clear is lowered here, raising its error."""
    programs = {name: Program(name, func) for name, func in mod.items() if isinstance(func, Function)}
    names = frozenset(programs)
    with collector_paused():
        for name, prog in programs.items():
            func = mod[name]
            with stack_room(if_depth(func)):  # the checks recurse once per nested If
                _FunctionLowering(name, func, programs, check).param_checkers()
                if not lowers_plainly(func, names):
                    lower_from(mod, programs, name, check)
    return programs


def lower_from(mod, programs: dict, name: str, check: bool = False) -> list[Program]:
    """Lower function `name` and every function it may call, not lowered yet; the programs lowered."""
    todo, done = [name], []
    # Pausing the collector halves the build time of big modules.
    with collector_paused():
        while todo:
            prog = programs[todo.pop()]
            if prog.block is not None:
                continue
            func = mod[prog.name]
            with stack_room(if_depth(func)):  # binding recurses once per nested If
                todo.extend(_FunctionLowering(prog.name, func, programs, check).lower(prog))
            done.append(prog)
    return done


def reader(src):
    """regs -> value for a source: a register, or a (nested) tuple of sources."""
    if isinstance(src, int):
        return itemgetter(src)
    if all(isinstance(s, int) for s in src):
        parts = tuple(itemgetter(s) for s in src)
        return lambda regs: tuple(p(regs) for p in parts)
    return _nest_reader(src)


def _nest_reader(src):
    """A reader of a nest of tuples of any depth, run as a flat program over a value stack (nested
    readers would recurse once per level). The program: a register number pushes the register; -n-1
    packs the top n values into a tuple (every register number is >= 0)."""
    prog: list[int] = []
    fold(src, lambda s: () if isinstance(s, int) else s, lambda s, _: prog.append(s if isinstance(s, int) else -len(s) - 1), shared=False)
    program = tuple(prog)

    def read(regs):
        stack = []
        for op in program:
            if op >= 0:
                stack.append(regs[op])
            else:
                n = -op - 1
                value = tuple(stack[len(stack) - n :])
                del stack[len(stack) - n :]
                stack.append(value)
        return stack[0]

    return read


_FACTORIES: dict = {}


def _kernel_fn(kernel, attrs: dict, srcs: list):
    """A closure `regs -> kernel(inputs..., attr=value...)` with everything resolved at build time.

    The closure comes from generated text because a call with literal keywords costs a third of
    `partial(kernel, **attrs)` or `kernel(..., **attrs)` (CPython copies the keyword dict on every call).
    The text holds only parameter names and attribute names, checked to be identifiers; every value
    (kernel, register numbers, attribute values, tuple readers) is an argument of the factory. One
    factory per call pattern, so a 100,000-binding function compiles a handful of them.
    """
    if all(s.__class__ is int for s in srcs):  # registers only: the common case, keyed by their count
        key = (len(srcs), *attrs)
        factory = _FACTORIES.get(key)
        if factory is None:
            factory = _FACTORIES[key] = _make_factory((True,) * len(srcs), tuple(attrs))
        return factory(kernel, *srcs, *attrs.values())
    pattern = (tuple(isinstance(s, int) for s in srcs), tuple(attrs))
    factory = _FACTORIES.get(pattern)
    if factory is None:
        factory = _FACTORIES[pattern] = _make_factory(*pattern)
    values = [s if isinstance(s, int) else reader(s) for s in srcs]
    return factory(kernel, *values, *attrs.values())


def _make_factory(is_reg: tuple, attr_names: tuple):
    names, parts = [], []
    for i, reg in enumerate(is_reg):
        names.append(f"s{i}")
        parts.append(f"r[s{i}]" if reg else f"s{i}(r)")
    for j, name in enumerate(attr_names):
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"attribute name {name!r} is not an identifier")
        names.append(f"a{j}")
        parts.append(f"{name}=a{j}")
    src = f"def factory(k, {', '.join(names)}):\n    return lambda r: k({', '.join(parts)})\n"
    ns: dict = {}
    exec(src, ns)  # noqa: S102 - text built above from indices and checked identifiers
    return ns["factory"]


def _fmt_attr(v) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt_attr(x) for x in v) + "]"
    if isinstance(v, StructInfo):  # R.match_cast's target: script text, not a repr
        return format_sinfo(v)
    return repr(v)


class _FunctionLowering:
    """Binds a kernel to each instruction of the function's plan (analysis/plan.py)."""

    def __init__(self, name: str, func: Function, programs: dict, check: bool):
        self.name = name
        self.func = func
        self.programs = programs
        self.check = check
        self.splits = False  # whether a kernel of this function splits its work over threads
        self.template: list = []
        self.labels = Labels(name, [None])
        self.shape_regs: list = []
        self.bindable: set[str] = set()
        self.const_roots: set[int] = set()
        self.limit = allocation_limit()
        self.callees: set[str] = set()

    # -- errors -------------------------------------------------------------
    def error(self, message, span=None, cls=UnsupportedError):
        return cls(f"{self.name}: {message}", span)

    # -- registers ----------------------------------------------------------
    def new_reg(self) -> int:
        self.template.append(None)
        return len(self.template) - 1

    def const_value(self, reg: int, expr) -> None:
        if isinstance(expr, Constant):
            # A read-only view: a caller mutating a returned constant must not change the module.
            data = np.asarray(expr.data).view()
            data.flags.writeable = False
            self.template[reg] = data
            self.const_roots.add(id(root_of(data)))
            self.labels.consts[reg] = "const"
        elif isinstance(expr, PrimValue | StringImm):
            self.template[reg] = prim_scalar(expr)
            self.labels.consts[reg] = repr(expr.value)
        else:
            self._shape_reg(reg, expr)

    def _shape_reg(self, reg: int, expr: ShapeExpr) -> None:
        if all(isinstance(v, int) for v in expr.values):
            self.template[reg] = tuple(expr.values)
        else:
            names = set().union(*(dim_names(v) for v in expr.values))
            missing = sorted(names - self.bindable)
            if missing:
                raise self.error(
                    f"symbolic dim(s) {', '.join(missing)} in R.shape({list(expr.values)}) are not bound by any parameter",
                    expr.span,
                )
            fns = tuple(compile_dim(v) for v in expr.values)
            self.shape_regs.append((reg, lambda env, fns=fns: tuple(f(env) for f in fns)))
        self.labels.consts[reg] = f"R.shape({list(expr.values)})"

    # -- functions ----------------------------------------------------------
    def param_checkers(self) -> list:
        """A checker for each parameter; errors for parameters without struct info or with dims the
        arguments cannot bind."""
        func = self.func
        for p in func.params:
            if p.struct_info is None:
                raise self.error(f"parameter '{p.name_hint}' has no struct info", p.span)
            self.bindable |= bindable_names(p.struct_info)
        for p in func.params:
            unbound = sorted(all_dim_names(p.struct_info) - self.bindable)
            if unbound:
                raise self.error(
                    f"parameter '{p.name_hint}': symbolic dim(s) {', '.join(unbound)} cannot be bound from the arguments",
                    p.span,
                )
        return [compile_checker(p.struct_info, p.name_hint, self.error) for p in func.params]

    def lower(self, prog: Program) -> set[str]:
        """Fill `prog`; the names of the functions it calls."""
        func = self.func
        checkers = self.param_checkers()
        plan = plan_function(self.name, func, self.programs)
        self.template = [None] * plan.nregs
        self.labels = Labels(self.name, plan.reg_names)
        for reg, expr in plan.consts.items():
            self.const_value(reg, expr)
        prog.params = tuple((reg, check) for (reg, _), check in zip(plan.params, checkers))
        prog.symbolic = bool(self.bindable) or any(all_dim_names(p.struct_info) for p in func.params)
        block = self.bind(plan.block)
        prog.template = self.template
        prog.shape_regs = tuple(self.shape_regs)
        prog.const_roots = self.const_roots
        prog.splits = self.splits
        prog.block = block  # last: a program is lowered once it has a block
        return self.callees

    def bind(self, blk) -> Block:
        """The block's code: each instruction's kernel (or call, branch, item), its register, its frees."""
        code = []
        costs: dict[int, float] = {}  # instruction -> pair cost, for the threaded ops (runtime/pairs.py)
        check = self.check
        labels = self.labels
        for i, ins in enumerate(blk.ins):
            kind = ins.kind
            if kind == "op":
                fn, info, cost = self._op(ins)
                if cost:
                    costs[i] = cost
                special = False
            elif kind == "item":
                src, index = ins.srcs[0], ins.index
                info = Site(labels, ins.var, index, ins.srcs, ins.span, "TupleGetItem")
                fn, special = _item(src, index), False
            elif kind == "call":
                fn, info = self._call(ins)
                info.sinfo = ins.var.struct_info
                special = True
            else:
                var, cond = ins.var, ins.srcs[0]
                info = Info(self.name, var.name_hint, "If", [("condition", itemgetter(cond))], ins.span, "If", var.struct_info)
                fn = make_if(itemgetter(cond), self.bind(ins.branches[0]), self.bind(ins.branches[1]), info)
                special = True
            if check and not special and info.sinfo is not None:
                fn = _checked(fn, ins.var)
            code.append((fn, ins.out, ins.frees, special, info))
        if self.splits and len(costs) > 1:  # BLAS held to one thread while the function runs: a kernel thread can take one
            meta = [_pairable(ins, costs.get(i, 0.0), code[i][3]) for i, ins in enumerate(blk.ins)]
            for i, j in pairs.partners(meta).items():
                fork, take = pairs.make_pair(code[i][0], code[j][0], self.new_reg(), tuple(sorted(meta[j].reads)))
                code[i] = (fork,) + code[i][1:]
                code[j] = (take,) + code[j][1:]
        return Block(tuple(code), blk.prefree, blk.endfree, reader(blk.result))

    def _call(self, ins):
        self.callees.add(ins.callee)
        arg_info = self.labels.arg_info(ins.srcs)
        labels = ", ".join(label for label, _ in arg_info)
        info = Info(self.name, ins.var.name_hint, f"{ins.callee}({labels})", arg_info, ins.span, f"call {ins.callee}")
        return make_call(self.programs[ins.callee], tuple(reader(s) for s in ins.srcs), info), info

    def _op(self, ins):
        """(kernel, info, pair cost) of an op instruction: its kernel with the attributes bound, split
        over the threads or computed into a dying argument where the plan and the runtime allow."""
        var, call, op, srcs = ins.var, ins.call, ins.op, ins.srcs
        kernel = getattr(op, "kernel", None)
        script = getattr(op, "script_name", getattr(op, "name", "?"))
        if kernel is None:
            raise self.error(f"op {script} has no kernel (binding '{var.name_hint}')", ins.span)
        info = Site(self.labels, var, call, srcs, ins.span, script)
        sinfo = var.struct_info
        arg_sinfos = [a.struct_info for a in call.args]
        split_kernel = getattr(op, "split_kernel", None)
        if split_kernel is not None:  # the split form while the call holds BLAS (runtime/threads.py)
            kernel = threads.when_held(split_kernel, kernel)
        if storage_of(op, sinfo, arg_sinfos) is not None:  # bfloat16 / float8: computed in float32, rounded to the storage dtype
            try:
                kernel = for_storage(op, sinfo, arg_sinfos, kernel)
            except UnsupportedError as err:
                raise self.error(f"binding '{var.name_hint}': {err.message}", ins.span) from None
            storage = True  # computed on float32 copies: not split (nor written in place: liveness)
        else:
            storage = False
        fn = _kernel_fn(kernel, call.attrs, srcs)
        threaded = op.threaded
        if threaded:  # a function with a threaded kernel holds BLAS to one thread while it runs
            self.splits = True
        nbytes = static_nbytes(sinfo)
        into = op.inplace
        if into is not None and not self.check and not storage and split.splittable(arg_sinfos, sinfo, nbytes):
            fn = split.make(into, [reader(s) for s in srcs], tuple(sinfo.shape), sinfo.dtype)
            self.splits = True
            into = split.split_into(into)
        if nbytes is not None and nbytes > self.limit:
            return _refuse(nbytes), info, 0.0  # fails when reached (an untaken branch may hold it)
        if self.check:
            return fn, info, 0.0
        if ins.target is not None:
            fn = make_inplace(into, srcs, ins.target, fn)
        return fn, info, pairs.pair_cost(op, call, sinfo) if threaded else 0.0


def _pairable(ins, cost: float, special: bool) -> "_Pairable":
    moves = bool(cost) and ins.op.pure and not ins.inplace
    return _Pairable(ins.out, ins.reads, special, cost, moves)


# Results beyond this many bytes are refused before their kernel runs (NumPy would try, or raise
# MemoryError after a long wait). Set RETROGRAD_MAX_ALLOCATION_BYTES to change it.
DEFAULT_ALLOCATION_LIMIT = 1 << 32


def allocation_limit() -> int:
    """The largest result, in bytes, a kernel may produce."""
    value = os.environ.get("RETROGRAD_MAX_ALLOCATION_BYTES", "")
    return int(value) if value.isascii() and value.isdigit() else DEFAULT_ALLOCATION_LIMIT


def static_nbytes(sinfo) -> int | None:
    """Bytes of a value of static struct info (tensors and tuples of them), else None."""
    if isinstance(sinfo, TupleStructInfo):
        # Bottom-up with a stack: tuples nest to any depth.
        return fold(sinfo, tuple_fields, _nbytes_of)
    return _nbytes_of(sinfo, ())


def _nbytes_of(sinfo, sizes) -> int | None:
    if isinstance(sinfo, TupleStructInfo):
        return None if any(s is None for s in sizes) else sum(sizes)
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or not sinfo.dtype:
        return None
    n = _ITEMSIZE.get(sinfo.dtype)
    if n is None:
        try:
            n = _ITEMSIZE[sinfo.dtype] = itemsize(sinfo.dtype)
        except TypeError:
            return None
    for d in sinfo.shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


_ITEMSIZE: dict[str, int] = {}  # dtype name -> bytes: asked for every binding of a function


def _item(src: int, index: int):
    return lambda r: r[src][index]


def _refuse(nbytes: int):
    def refuse(regs):
        raise KernelError(
            f"the result would take {nbytes:,} bytes, over the allocation limit of {allocation_limit():,} "
            "(RETROGRAD_MAX_ALLOCATION_BYTES)"
        )

    return refuse


def _checked(fn, var):
    """Debug mode (`build(mod, check=True)`): each kernel result must match its binding's struct info."""
    check = compile_checker(var.struct_info, var.name_hint, lambda msg: UnsupportedError(msg))

    def run_checked(regs):
        v = fn(regs)
        binder = Binder()
        if regs[0]:
            binder.env.update(regs[0])
        check(v, binder)
        try:
            check_deferred(binder)
        except KeyError:
            pass  # dims of intermediates may name sizes no parameter binds: nothing to compare with
        return v

    return run_checked


__all__ = ["Block", "Info", "Labels", "Program", "Site", "lower_from", "module_programs", "Mismatch"]
