"""Lowering: each function becomes a flat instruction list over register slots, with frees at last use."""

from __future__ import annotations

import keyword
import os
from operator import itemgetter

import numpy as np

from retrograd.analysis.liveness import flat_registers, inplace_positions, release_points
from retrograd.errors import KernelError, NameError_, UnsupportedError
from retrograd.gc_pause import collector_paused
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
from retrograd.runtime import pairs, split
from retrograd.runtime.inplace import make as make_inplace
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


class Block:
    """Lowered code of a function body or an If branch."""

    __slots__ = ("code", "prefree", "endfree", "result")

    def __init__(self, code, prefree, endfree, result):
        self.code = code  # tuple of (fn, out, frees, special, info)
        self.prefree = prefree  # registers released before the code runs (dying here, unused)
        self.endfree = endfree  # registers released after the result is read
        self.result = result  # regs -> the block's value


class Program:
    """A lowered function: register template, parameter checkers, shape registers, body block."""

    __slots__ = ("name", "nparams", "param_names", "params", "template", "shape_regs", "symbolic", "block", "const_roots",
                 "splits")


class _PreIns:
    __slots__ = ("fn", "out", "reads", "special", "info", "branches", "make", "inplace", "pair_cost", "moves")

    def __init__(self, fn, out, reads, special, info, branches=None, make=None, inplace=None, pair_cost=0.0, moves=False):
        self.fn, self.out, self.reads, self.special, self.info = fn, out, reads, special, info
        self.branches, self.make = branches, make
        self.inplace = inplace  # (in-place kernel, sources, candidate argument positions) for elementwise ops
        self.pair_cost = pair_cost  # work of a kernel that may run beside another (runtime/pairs.py), else 0
        self.moves = moves  # whether it may run ahead of its place: pure, nothing written in place


class _PreBlock:
    __slots__ = ("ins", "result_src", "result_regs", "defined", "outer_reads")


def lower_module(mod, check: bool = False) -> dict[str, Program]:
    programs = {name: Program() for name, func in mod.items() if isinstance(func, Function)}
    # Pausing the collector halves the build time of big modules.
    with collector_paused():
        for name, prog in programs.items():
            func = mod[name]
            with stack_room(if_depth(func)):  # lowering and liveness recurse once per nested If
                _FunctionLowering(name, func, programs, check).lower(prog)
    return programs


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
    def __init__(self, name: str, func: Function, programs: dict, check: bool):
        self.name = name
        self.func = func
        self.programs = programs
        self.check = check
        self.splits = False  # whether a kernel of this function splits its work over threads
        self.template: list = [None]  # register 0 holds the call's symbolic-dim environment
        self.fixed: set[int] = {0}  # registers never freed: constants, shapes, the environment
        self.src_of: dict = {}  # Var -> source (register or tuple of sources)
        self.label_of: dict[int, str] = {}
        self.const_cache: dict[int, int] = {}
        self.shape_regs: list = []
        self.bindable: set[str] = set()
        self.const_roots: set[int] = set()
        self.nest_src: dict = {}  # id -> source of tuples (see source)

    # -- errors -------------------------------------------------------------
    def error(self, message, span=None, cls=UnsupportedError):
        return cls(f"{self.name}: {message}", span)

    # -- registers ----------------------------------------------------------
    def new_reg(self, value=None, fixed=False) -> int:
        self.template.append(value)
        reg = len(self.template) - 1
        if fixed:
            self.fixed.add(reg)
        return reg

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
        key = id(expr)
        reg = self.const_cache.get(key)
        if reg is not None:
            return reg
        if isinstance(expr, Constant):
            # A read-only view: a caller mutating a returned constant must not change the module.
            data = np.asarray(expr.data).view()
            data.flags.writeable = False
            reg = self.new_reg(data, fixed=True)
            self.const_roots.add(id(root_of(data)))
            self.label_of[reg] = "const"
        elif isinstance(expr, PrimValue | StringImm):
            reg = self.new_reg(_prim_scalar(expr), fixed=True)
            self.label_of[reg] = repr(expr.value)
        elif isinstance(expr, ShapeExpr):
            reg = self._shape_reg(expr, span)
        else:
            raise self.error(
                f"{type(expr).__name__} cannot be an argument here (the module is not in normal form)", expr.span or span
            )
        self.const_cache[key] = reg
        return reg

    def _shape_reg(self, expr: ShapeExpr, span) -> int:
        if all(isinstance(v, int) for v in expr.values):
            reg = self.new_reg(tuple(expr.values), fixed=True)
        else:
            names = set().union(*(dim_names(v) for v in expr.values))
            missing = sorted(names - self.bindable)
            if missing:
                raise self.error(
                    f"symbolic dim(s) {', '.join(missing)} in R.shape({list(expr.values)}) are not bound by any parameter",
                    expr.span or span,
                )
            fns = tuple(compile_dim(v) for v in expr.values)
            reg = self.new_reg(None, fixed=True)
            self.shape_regs.append((reg, lambda env, fns=fns: tuple(f(env) for f in fns)))
        self.label_of[reg] = f"R.shape({list(expr.values)})"
        return reg

    def describe_src(self, src) -> str:
        if isinstance(src, int):
            return self.label_of.get(src, f"%{src}")
        return render(src, self._src_parts)

    def _src_parts(self, src) -> list:
        if isinstance(src, int):
            return [self.label_of.get(src, f"%{src}")]
        return ["(", *joined(src), ",)" if len(src) == 1 else ")"]

    # -- functions ----------------------------------------------------------
    def lower(self, prog: Program) -> None:
        func = self.func
        params = []
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
            reg = self.new_reg()
            self.src_of[p] = reg
            self.label_of[reg] = p.name_hint
            params.append((reg, compile_checker(p.struct_info, p.name_hint, self.error)))
        symbolic = bool(self.bindable) or any(
            all_dim_names(p.struct_info) for p in func.params
        )
        body = self.lower_seq(func.body)
        owned = {reg for reg, _ in params} | body.defined
        prog.name = self.name
        prog.nparams = len(params)
        prog.param_names = tuple(p.name_hint for p in func.params)
        prog.params = tuple(params)
        prog.symbolic = symbolic
        prog.block = self.assign(body, owned)
        prog.template = self.template
        prog.shape_regs = tuple(self.shape_regs)
        prog.const_roots = self.const_roots
        prog.splits = self.splits

    def lower_seq(self, seq) -> _PreBlock:
        if not isinstance(seq, SeqExpr):
            raise self.error(f"expected a sequence of bindings, got {type(seq).__name__}", getattr(seq, "span", None))
        pb = _PreBlock()
        pb.ins = []
        pb.defined = set()
        for block in seq.blocks:
            for binding in block.bindings:
                self.lower_binding(binding, pb)
        pb.result_src = self.source(seq.body, seq.span)
        pb.result_regs = flat_registers(pb.result_src, set()) - self.fixed
        reads = set(pb.result_regs)
        for ins in pb.ins:
            reads |= ins.reads
        pb.outer_reads = reads - pb.defined
        return pb

    def lower_binding(self, binding, pb: _PreBlock) -> None:
        var, value = binding.var, binding.value
        span = binding.span or var.span or getattr(value, "span", None)
        name = var.name_hint
        if isinstance(value, Var | Constant | PrimValue | StringImm | ShapeExpr | Tuple):
            # Assignments and tuples of leaves cost nothing at run time: uses read the sources directly.
            self.src_of[var] = self.source(value, span)
            return
        if isinstance(value, TupleGetItem):
            src = self.source(value.tuple_value, span)
            if not isinstance(src, int):
                self.src_of[var] = src[value.index]
                return
            index = value.index
            out = self.new_reg()
            info = Info(self.name, name, f"{self.describe_src(src)}[{index}]", [("tuple", itemgetter(src))], span, "TupleGetItem")
            self._add(pb, lambda r: r[src][index], out, {src}, False, info, var)
            return
        if isinstance(value, Call):
            self._lower_call(var, value, span, pb)
            return
        if isinstance(value, If):
            self._lower_if(var, value, span, pb)
            return
        raise self.error(f"binding '{name}': cannot execute a {type(value).__name__} value", span)

    def _add(self, pb, fn, out, reads, special, info, var, **extra):
        info.sinfo = var.struct_info
        if self.check and not special and var.struct_info is not None:
            fn = _checked(fn, var)
        pb.ins.append(_PreIns(fn, out, reads - self.fixed, special, info, **extra))
        pb.defined.add(out)
        self.src_of[var] = out
        self.label_of[out] = var.name_hint

    def _lower_call(self, var, call: Call, span, pb) -> None:
        name = var.name_hint
        srcs = [self.source(a, span) for a in call.args]
        reads = set()
        for s in srcs:
            flat_registers(s, reads)
        arg_labels = [self.describe_src(s) for s in srcs]
        arg_info = [(lab, reader(s)) for lab, s in zip(arg_labels, srcs)]
        if isinstance(call.op, GlobalVar):
            callee = self.programs.get(call.op.name_hint)
            if callee is None:
                raise self.error(f"binding '{name}' calls '{call.op.name_hint}', which is not a function of the module", span)
            label = f"{call.op.name_hint}({', '.join(arg_labels)})"
            info = Info(self.name, name, label, arg_info, span, f"call {call.op.name_hint}")
            fn = make_call(callee, tuple(reader(s) for s in srcs), info)
            self._add(pb, fn, self.new_reg(), reads, True, info, var)
            return
        op = call.op
        if not isinstance(op, Op):
            raise self.error(f"binding '{name}' calls a {type(op).__name__}; only ops and module functions can be called", span)
        script = getattr(op, "script_name", getattr(op, "name", "?"))
        kernel = getattr(op, "kernel", None)
        if kernel is None:
            raise self.error(f"op {script} has no kernel (binding '{name}')", span)
        attr_text = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in call.attrs.items())
        label = f"{script}({', '.join(arg_labels + ([attr_text] if attr_text else []))})"
        info = Info(self.name, name, label, arg_info, span, script)
        try:  # bfloat16 / float8: computed in float32, rounded to the storage dtype
            bound = for_storage(op, var.struct_info, [a.struct_info for a in call.args])
        except UnsupportedError as err:
            raise self.error(f"binding '{name}': {err.message}", span) from None
        storage = bound is not kernel  # computed on float32 copies: not split (nor written in place: liveness)
        kernel = bound
        inplace = None
        positions = [] if self.check else inplace_positions(call, srcs, var.struct_info)
        if positions:
            inplace = (op.inplace, srcs, positions)
        fn = _kernel_fn(kernel, call.attrs, srcs)
        if op.cost.kind in split.SPLITTING_KINDS:
            self.splits = True
        nbytes = static_nbytes(var.struct_info)
        if op.inplace is not None and not self.check and not storage and split.splittable([a.struct_info for a in call.args], var.struct_info, nbytes):
            sinfo = var.struct_info
            fn = split.make(op.inplace, [reader(s) for s in srcs], tuple(sinfo.shape), sinfo.dtype)
            self.splits = True
            if inplace is not None:
                inplace = (split.split_into(op.inplace), srcs, positions)
        pair_cost = 0.0
        if nbytes is not None and nbytes > allocation_limit():
            fn, inplace = _refuse(nbytes), None  # fails when reached (an untaken branch may hold it)
        elif not self.check:
            pair_cost = pairs.pair_cost(op, call, var.struct_info)
        self._add(pb, fn, self.new_reg(), reads, False, info, var, inplace=inplace, pair_cost=pair_cost,
                  moves=op.pure and inplace is None)

    def _lower_if(self, var, node: If, span, pb) -> None:
        cond = self.source(node.cond, span)
        if not isinstance(cond, int):
            raise self.error(f"the condition of If binding '{var.name_hint}' is a tuple", span)
        tb = self.lower_seq(node.true_branch)
        fb = self.lower_seq(node.false_branch)
        reads = {cond} | tb.outer_reads | fb.outer_reads
        info = Info(self.name, var.name_hint, "If", [("condition", itemgetter(cond))], span, "If")
        cond_read = itemgetter(cond)
        self._add(
            pb, None, self.new_reg(), reads, True, info, var,
            branches=(tb, fb),
            make=lambda blocks: make_if(cond_read, blocks[0], blocks[1], info),
        )

    # -- liveness -----------------------------------------------------------
    def assign(self, pb: _PreBlock, owned: set[int]) -> Block:
        """Give each owned register its release point: after its last read, or where it is defined if unread.

        Registers last read by an If are released inside the branches (at their last use there), so a
        branch does not keep alive what only the other branch needs.
        """
        frees, dying, prefree, endfree = release_points(
            [ins.reads for ins in pb.ins], [ins.out for ins in pb.ins],
            [ins.branches is not None for ins in pb.ins], pb.result_regs, owned,
        )
        code = []
        for i, ins in enumerate(pb.ins):
            fn = ins.fn
            if ins.branches is not None:
                fn = ins.make([self.assign(b, dying[i] | b.defined) for b in ins.branches])
            elif ins.inplace is not None:
                into, srcs, positions = ins.inplace
                dying_here = [p for p in positions if srcs[p] in frees[i]]
                if dying_here:
                    fn = make_inplace(into, srcs, dying_here[0], fn)
            code.append((fn, ins.out, tuple(frees[i]), ins.special, ins.info))
        if self.splits:  # BLAS held to one thread while the function runs: a kernel thread can take one
            for i, j in pairs.partners(pb.ins).items():
                fork, take = pairs.make_pair(code[i][0], code[j][0], self.new_reg(), tuple(sorted(pb.ins[j].reads)))
                code[i] = (fork,) + code[i][1:]
                code[j] = (take,) + code[j][1:]
        return Block(tuple(code), tuple(prefree), tuple(endfree), reader(pb.result_src))


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
    if not all(isinstance(d, int) for d in sinfo.shape):
        return None
    try:
        size = itemsize(sinfo.dtype)
    except TypeError:
        return None
    return int(np.prod(sinfo.shape, dtype=object)) * size


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


__all__ = ["Block", "Info", "Program", "lower_module", "Mismatch"]


def _prim_scalar(expr):
    """A prim value as kernels receive it: a Python number, or a NumPy scalar when its dtype is one a
    Python number does not carry (T.float32(1.0) stays float32 for R.one_hot's result dtype)."""
    if isinstance(expr, PrimValue) and expr.dtype not in ("int64", "float64", "bool"):
        try:
            return np.dtype(expr.dtype).type(expr.value)
        except TypeError:  # bfloat16: no NumPy dtype
            pass
    return expr.value
