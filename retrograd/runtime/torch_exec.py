"""The torch backend: a module run on PyTorch tensors (`retrograd.build(mod, backend="torch", device=...)`).

A consumer of the Plan (analysis/plan.py), like the NumPy executor: each instruction gets the op's torch
kernel (`OpDef.torch_kernel`), values are released at the plan's frees, and the memory meter counts
the distinct storages of live values exactly as the NumPy meter counts buffers (a view counts its
storage once; parameters for the whole call; constants never), so `peak_live_bytes` is the same number
on both backends and `retrograd.analysis.peak_memory` predicts it. What the NumPy executor adds for one
CPU (in-place reuse, split kernels, paired kernels) is left to PyTorch here. torch is imported when a
torch executable is built, never by `import retrograd`.
"""

from __future__ import annotations

from operator import itemgetter

import attrs
import numpy as np

from retrograd.analysis.plan import Plans
from retrograd.errors import ExecutionError, UnsupportedError
from retrograd.ir.dtypes import prim_scalar
from retrograd.ir.expr import Constant, Function, PrimValue, ShapeExpr, StringImm
from retrograd.ir.functor import module_if_depth, stack_room
from retrograd.ir.nested import tuple_leaves
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import torch_kernels
from retrograd.ops.storage import in_float32, result_dtypes, widened_on_torch
from retrograd.runtime.executor import FunctionTable, bind_arguments
from retrograd.runtime.interp import kernel_failure
from retrograd.runtime.program import Info, reader
from retrograd.runtime.signature import Binder, Mismatch, check_deferred, compile_checker, compile_dim, describe_value
from retrograd.runtime.stats import RunStats


@attrs.frozen
class TorchRunStats(RunStats):
    """RunStats of a torch call; on CUDA also the allocator's peak over the call
    (`torch.cuda.max_memory_allocated`, caching allocator included), else None."""

    device_max_allocated_bytes: int | None = None


class TorchMeter:
    __slots__ = ("refs", "cur", "peak", "skip", "held", "param_bytes")

    def __init__(self, skip):
        self.refs: dict[int, int] = {}
        self.cur = 0
        self.peak = 0
        self.skip = skip
        self.held: list = []  # arguments converted here: alive for the call (see interp.Meter.held)
        self.param_bytes = 0


class _Program:
    __slots__ = ("name", "nparams", "param_names", "params", "template", "shape_regs", "block")


class _Block:
    __slots__ = ("code", "prefree", "endfree", "result")


_OP, _ITEM, _SPECIAL = 0, 1, 2


class TorchExecutable(FunctionTable):
    """A module built for the torch backend. `ex[name](*args)` runs a function on `device`; arguments
    may be NumPy arrays, torch tensors (moved to the device when elsewhere) or Python scalars; results
    are torch tensors on the device (NumPy with `numpy_outputs=True`, or through `ex.numpy(value)`)."""

    def __init__(self, mod, device="cpu", *, numpy_outputs: bool = False):
        torch = torch_kernels.require_torch()
        self.torch = torch
        self.mod = mod
        self.device = torch.device(device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise UnsupportedError(f"device {device!r}: this PyTorch build has no CUDA device available")
        self.numpy_outputs = numpy_outputs
        self.stats: TorchRunStats | None = None
        self._skip: set[int] = set()
        plans = Plans(mod)
        self._programs = {name: self._bind(plans.get(name)) for name, f in mod.items() if isinstance(f, Function)}
        self._if_levels = module_if_depth(mod)
        self._functions: dict = {}

    # -- binding the plan ------------------------------------------------------------------------
    def _bind(self, plan) -> _Program:
        torch = self.torch
        prog = _Program()
        prog.name = plan.name
        template = [None] * plan.nregs
        labels = {reg: n for reg, n in enumerate(plan.reg_names) if n is not None}
        shape_regs = []
        for reg, c in plan.consts.items():
            if isinstance(c, Constant):
                t = torch_kernels.from_numpy(np.array(c.data, copy=True)).to(self.device)
                self._skip.add(t.untyped_storage().data_ptr())
                template[reg], labels[reg] = t, "const"
            elif isinstance(c, PrimValue | StringImm):
                template[reg], labels[reg] = prim_scalar(c), repr(c.value)
            elif isinstance(c, ShapeExpr):
                labels[reg] = f"R.shape({list(c.values)})"
                if all(isinstance(v, int) for v in c.values):
                    template[reg] = tuple(c.values)
                else:
                    fns = tuple(compile_dim(v) for v in c.values)
                    shape_regs.append((reg, lambda env, fns=fns: tuple(f(env) for f in fns)))
        params = []
        for reg, p in plan.params:
            params.append((reg, compile_checker(p.struct_info, p.name_hint, lambda msg: UnsupportedError(f"{plan.name}: {msg}"))))
            labels[reg] = p.name_hint
        prog.nparams = len(params)
        prog.param_names = tuple(p.name_hint for _, p in plan.params)
        prog.params = tuple(params)
        prog.template = template
        prog.shape_regs = tuple(shape_regs)
        prog.block = self._block(plan, plan.block, labels)
        return prog

    def _block(self, plan, blk, labels) -> _Block:
        code = []
        for ins in blk.ins:
            srcs = list(ins.srcs)
            arg_labels = [_describe_src(s, labels) for s in srcs]
            arg_info = [(lab, reader(s)) for lab, s in zip(arg_labels, srcs)]
            name = ins.var.name_hint
            if ins.kind == "op":
                op = ins.op
                script = getattr(op, "script_name", "?")
                try:
                    kernel = op.torch_kernel
                except UnsupportedError as err:
                    raise UnsupportedError(f"{plan.name}: binding '{name}': {err.message}", ins.span) from None
                label = f"{script}({', '.join(arg_labels)})"
                info = Info(plan.name, name, label, arg_info, ins.span, script, ins.var.struct_info)
                if op.kernel is not None and torch_kernels.may_be_empty([a.struct_info for a in ins.call.args]):
                    kernel = torch_kernels.on_numpy_when_empty(kernel, op.kernel)
                if widened_on_torch(op, ins.call.struct_info, [a.struct_info for a in ins.call.args]):
                    kernel = in_float32(kernel, result_dtypes(ins.call.struct_info))
                fn = _kernel_call(kernel, [reader(s) for s in srcs], dict(ins.call.attrs))
                if not op.aliases:
                    fn = _owned(fn)
                if ins.target is not None and isinstance(srcs[ins.target], int):
                    write = None if ins.call.attrs else torch_kernels.into(op.name)
                    fn = self._into(fn, srcs[ins.target], write, [reader(s) for s in srcs])
                if hasattr(fn, "info_of"):
                    fn.info_of[0] = info
                code.append((fn, ins.out, tuple(ins.frees), _SPECIAL if hasattr(fn, "info_of") else _OP, info))
            elif ins.kind == "item":
                src, index = srcs[0], ins.index
                info = Info(plan.name, name, f"{arg_labels[0]}[{index}]", arg_info, ins.span, "TupleGetItem")
                code.append((lambda r, src=src, index=index: r[src][index], ins.out, tuple(ins.frees), _ITEM, info))
            elif ins.kind == "call":
                info = Info(plan.name, name, f"{ins.callee}({', '.join(arg_labels)})", arg_info, ins.span, f"call {ins.callee}")
                code.append((self._call(ins.callee, [reader(s) for s in srcs], info), ins.out, tuple(ins.frees), _SPECIAL, info))
            else:
                info = Info(plan.name, name, "If", arg_info, ins.span, "If")
                branches = [self._block(plan, b, labels) for b in ins.branches]
                code.append((self._if(itemgetter(srcs[0]), branches, info), ins.out, tuple(ins.frees), _SPECIAL, info))
            labels[ins.out] = name
        out = _Block()
        out.code, out.prefree, out.endfree, out.result = tuple(code), tuple(blk.prefree), tuple(blk.endfree), reader(blk.result)
        return out

    def _into(self, fn, reg, write, readers):
        """The plan's in-place target: an elementwise result is written over the buffer of an argument
        dying here when no other live value shares its storage (runtime/inplace.py's rule, read from
        the meter's counts), so the result takes no new storage, as on NumPy. An op with an ATen
        kernel writing into a buffer (`torch_kernels.into`) computes there when every argument has the
        buffer's float dtype and broadcasts to its shape; otherwise PyTorch computes the result first,
        then copies it in: a transient buffer the meter does not see."""
        torch = self.torch
        tensor = torch.Tensor

        def writable(buf, m):
            return (isinstance(buf, tensor) and m.refs.get(buf.untyped_storage().data_ptr()) == 1
                    and all(st or n <= 1 for st, n in zip(buf.stride(), buf.shape)))  # a broadcast is read-only

        def run_into(regs, m):
            buf = regs[reg]
            if write is not None and isinstance(buf, tensor) and buf.dtype.is_floating_point and writable(buf, m):
                args = [rd(regs) for rd in readers]
                shape = buf.shape
                if all(isinstance(a, tensor) and a.dtype == buf.dtype and a.device == buf.device
                       and (a.shape == shape or _fits(a.shape, shape)) for a in args):
                    return write(buf, *args)  # buf is one of the arguments: the broadcast shape is its own
            v = fn(regs)
            if (isinstance(v, tensor) and isinstance(buf, tensor) and buf.shape == v.shape and buf.dtype == v.dtype
                    and buf.device == v.device and writable(buf, m)):
                buf.copy_(v)
                return buf
            return v

        def run(regs, m):
            try:
                return run_into(regs, m)
            except RecursionError:
                raise
            except Exception as err:
                raise kernel_failure(info_of[0], regs, err) from None

        info_of = [None]
        run.info_of = info_of
        return run

    def _call(self, callee, readers, info):
        def run_call(regs, m):
            try:
                return self._invoke(self._programs[callee], [rd(regs) for rd in readers], m, False)
            except ExecutionError as err:
                if len(err.notes) < 8:
                    where = f" at {info.span}" if info.span is not None else ""
                    err.notes.append(f"in the call of '{callee}' from {info.func}, binding '{info.var}'{where}")
                raise

        return run_call

    def _if(self, cond_read, branches, info):
        torch = self.torch

        def run_if(regs, m):
            c = cond_read(regs)
            if isinstance(c, tuple) or (isinstance(c, torch.Tensor) and c.ndim != 0):
                raise ExecutionError(f"{info.func}: the condition of the If binding '{info.var}' must be a scalar, "
                                     f"got {_describe(c)}", info.span)
            return self._run(branches[0] if bool(c) else branches[1], regs, m)

        return run_if

    # -- running ---------------------------------------------------------------------------------
    def make_function(self, prog) -> "TorchFunction":
        return TorchFunction(self, prog)

    def numpy(self, value):
        """A result (tensor or nested tuple of them) as NumPy arrays on the host."""
        if isinstance(value, tuple | list):
            return tuple(self.numpy(v) for v in value)
        if isinstance(value, self.torch.Tensor):
            return torch_kernels.to_numpy(value)
        return value

    def _acquire(self, v, m: TorchMeter, count: int = 1) -> None:
        if isinstance(v, self.torch.Tensor):
            st = v.untyped_storage()
            k = st.data_ptr()
            c = m.refs.get(k)
            if c is None:
                if k in m.skip:
                    return
                m.refs[k] = count
                m.cur += st.nbytes()
                if m.cur > m.peak:
                    m.peak = m.cur
            else:
                m.refs[k] = c + count
        elif type(v) is tuple:
            for x in tuple_leaves(v):
                if isinstance(x, self.torch.Tensor):
                    self._acquire(x, m, count)

    def _release(self, v, m: TorchMeter) -> None:
        if isinstance(v, self.torch.Tensor):
            st = v.untyped_storage()
            k = st.data_ptr()
            c = m.refs.get(k)
            if c is not None:
                if c > 1:
                    m.refs[k] = c - 1
                else:
                    del m.refs[k]
                    m.cur -= st.nbytes()
        elif type(v) is tuple:
            for x in tuple_leaves(v):
                if isinstance(x, self.torch.Tensor):
                    self._release(x, m)

    def _run(self, block: _Block, regs, m: TorchMeter):
        acquire, release = self._acquire, self._release
        for r in block.prefree:
            release(regs[r], m)
            regs[r] = None
        for fn, out, frees, kind, info in block.code:
            if kind == _SPECIAL:
                v = fn(regs, m)
            else:
                try:
                    v = fn(regs)
                except RecursionError:
                    raise
                except Exception as err:
                    raise kernel_failure(info, regs, err) from None
                if kind == _OP:
                    v = self._coerce(v, info.sinfo)
            acquire(v, m)
            regs[out] = v
            for r in frees:
                release(regs[r], m)
                regs[r] = None
            v = None
        v = block.result(regs)
        for r in block.endfree:
            release(regs[r], m)
            regs[r] = None
        return v

    def _coerce(self, v, sinfo):
        torch = self.torch
        if isinstance(v, torch.Tensor):
            return v
        if isinstance(v, tuple | list):
            return tuple(self._coerce(x, None) for x in v)
        if isinstance(v, np.ndarray | np.generic):
            return torch_kernels.from_numpy(np.array(v, copy=True)).to(self.device)
        if isinstance(sinfo, TensorStructInfo) and isinstance(v, bool | int | float):
            return torch.tensor(v, dtype=torch_kernels.tdtype(sinfo.dtype) if sinfo.dtype else None, device=self.device)
        return v

    def _to_device(self, checked, original):
        """A checked argument as torch values on the device (torch tensors moved, NumPy ones converted)."""
        torch = self.torch
        if isinstance(original, torch.Tensor):
            return original if original.device == self.device else original.to(self.device)
        if isinstance(checked, tuple):
            orig = original if isinstance(original, tuple | list) and len(original) == len(checked) else checked
            return tuple(self._to_device(c, o) for c, o in zip(checked, orig))
        if isinstance(checked, np.ndarray):
            arr = checked if checked.flags.c_contiguous and checked.flags.writeable else np.array(checked, copy=True)
            return torch_kernels.from_numpy(arr).to(self.device)
        return checked

    def _proxy(self, v):
        torch = self.torch
        if isinstance(v, torch.Tensor):
            return torch_kernels.meta_array(v)
        if isinstance(v, tuple | list):
            return tuple(self._proxy(x) for x in v)
        return v

    def _invoke(self, prog: _Program, args, m: TorchMeter, top: bool):
        if len(args) != prog.nparams:
            names = ", ".join(prog.param_names)
            raise ExecutionError(f"{prog.name}: expects {prog.nparams} argument(s) ({names}), got {len(args)}")
        regs = prog.template.copy()
        binder = Binder()
        count = 2 if top else 1
        try:
            for (reg, check), a in zip(prog.params, args):
                v = self._to_device(check(self._proxy(a), binder), a) if top else a
                if top and v is not a:
                    m.held.append(v)
                regs[reg] = v
                self._acquire(v, m, count)
            check_deferred(binder)
        except Mismatch as mm:
            raise ExecutionError(f"{prog.name}: parameter {mm}") from None
        if m.cur > m.peak:
            m.peak = m.cur
        if top:
            m.param_bytes = m.cur
        env = binder.env
        regs[0] = env
        for reg, fn in prog.shape_regs:
            regs[reg] = fn(env)
        return self._run(prog.block, regs, m)

    def __repr__(self) -> str:
        return f"<TorchExecutable {list(self._programs)} on {self.device}>"


class TorchFunction:
    """One function of a TorchExecutable."""

    __slots__ = ("exe", "prog", "__name__")

    def __init__(self, exe: TorchExecutable, prog: _Program):
        self.exe, self.prog, self.__name__ = exe, prog, prog.name

    def __call__(self, *args, **kwargs):
        exe = self.exe
        torch = exe.torch
        if kwargs:
            args = bind_arguments(self.prog, args, kwargs)
        exe.stats = None
        m = TorchMeter(exe._skip)
        cuda = exe.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(exe.device)
            torch.cuda.reset_peak_memory_stats(exe.device)
        previous = torch_kernels.device()
        torch_kernels.set_device(exe.device)
        try:
            with torch.no_grad(), stack_room(exe._if_levels):
                result = exe._invoke(self.prog, args, m, True)
        except RecursionError:
            raise ExecutionError(f"{self.prog.name}: calls between functions nest deeper than Python's recursion limit allows") from None
        finally:
            torch_kernels.set_device(previous)
        device_peak = None
        if cuda:
            torch.cuda.synchronize(exe.device)
            device_peak = int(torch.cuda.max_memory_allocated(exe.device))
        exe.stats = TorchRunStats(self.prog.name, m.peak, m.param_bytes, device_peak)
        return exe.numpy(result) if exe.numpy_outputs else result

    def __repr__(self) -> str:
        return f"<TorchFunction {self.prog.name}({', '.join(self.prog.param_names)})>"


def _kernel_call(kernel, readers, attrs):
    n = len(readers)
    if n == 1:
        (a,) = readers
        return lambda r: kernel(a(r), **attrs)
    if n == 2:
        a, b = readers
        return lambda r: kernel(a(r), b(r), **attrs)
    return lambda r: kernel(*[rd(r) for rd in readers], **attrs)


def _fits(shape, into) -> bool:
    """`shape` broadcasts to `into` (no larger than it on any axis)."""
    return len(shape) <= len(into) and all(n == 1 or n == m for n, m in zip(reversed(shape), reversed(into)))


def _owned(fn):
    """An op that views none of its arguments gets results in storages of their own: a kernel handing
    back a view of its temporary would leave the meter counting the temporary (NumPy's rule, checked
    for the NumPy kernels by tests/analysis/test_kernel_results.py)."""

    def run(r):
        v = fn(r)
        if type(v) is tuple:
            return tuple(torch_kernels.fresh(x) if hasattr(x, "_base") else x for x in v)
        return torch_kernels.fresh(v) if hasattr(v, "_base") else v

    return run



def _describe_src(src, labels) -> str:
    if isinstance(src, int):
        return labels.get(src, f"%{src}")
    return "(" + ", ".join(_describe_src(s, labels) for s in src) + ")"


def _describe(v) -> str:
    return describe_value(v) if not hasattr(v, "shape") else f"tensor of shape {tuple(v.shape)} {v.dtype}"


def build_torch(mod, device="cpu", *, numpy_outputs: bool = False, compile: bool = False) -> TorchExecutable:
    """The torch backend's executable of `mod` (see TorchExecutable)."""
    if compile:
        from retrograd.runtime.torch_compiled import CompiledTorchExecutable

        return CompiledTorchExecutable(mod, device, numpy_outputs=numpy_outputs)
    return TorchExecutable(mod, device, numpy_outputs=numpy_outputs)
