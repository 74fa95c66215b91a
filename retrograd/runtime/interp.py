"""The interpreter: runs lowered instructions over a register list, releasing each value at its last use.

Memory accounting (what `peak_live_bytes` measures): the total size of the distinct memory buffers
referenced by live values. A value is live from the instruction that produces it to its last use;
parameters are live for the whole call (the caller owns them); values of called functions count while
those run. A view (reshape, permute_dims, strided_slice, broadcast) counts the buffer it views, once,
however many views share it, for as long as any of them is live. Module constants are not counted
(they live as long as the module). The peak is taken right after each instruction stores its result
and before it releases its dying inputs, since the kernel needs both at once; scratch memory inside a
kernel is not seen. Elementwise results written over a dying input (inplace.py) allocate nothing.
docs/memory.md states the rule in full; retrograd.analysis.peak_memory predicts it statically.
"""

from __future__ import annotations

from time import perf_counter

import numpy as np

from retrograd.errors import DiagnosticError, ExecutionError
from retrograd.ir.nested import fold, joined, render, tuple_leaves
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.runtime.signature import Binder, Mismatch, check_deferred, describe_value

ndarray = np.ndarray


class Meter:
    """Per top-level call state shared by nested calls and branches: buffer refcounts, live and peak bytes."""

    __slots__ = ("refs", "cur", "peak", "skip", "run", "prof", "param_bytes", "held")

    def __init__(self, skip, run, prof):
        self.refs: dict[int, int] = {}  # id(buffer owner) -> number of live values referencing it
        self.cur = 0
        self.peak = 0
        self.skip = skip  # ids of constant buffers, never counted
        self.run = run
        self.prof = prof
        self.param_bytes = 0
        # Top-level arguments the call converted (a Python scalar made a 0-d array): the caller holds
        # none of them, yet they stay counted after their last use, so they must stay alive too, or a
        # new buffer could take a freed one's id and go uncounted.
        self.held: list = []


def root_of(v: ndarray) -> ndarray:
    """The array owning the memory `v` views."""
    while True:
        b = v.base
        if b is None:
            return v
        if not isinstance(b, ndarray):
            # as_strided wraps its array in an object whose `base` is the array.
            b = getattr(b, "base", None)
            if not isinstance(b, ndarray):
                return v
        v = b


def acquire(v, m: Meter, count: int = 1) -> None:
    """Count `count` more live references to the buffers of `v` (an array, or a tuple of values)."""
    if isinstance(v, ndarray):
        root = v if v.base is None else root_of(v)
        k = id(root)
        c = m.refs.get(k)
        if c is None:
            if k in m.skip:
                return
            m.refs[k] = count
            m.cur += root.nbytes
            if m.cur > m.peak:
                m.peak = m.cur
        else:
            m.refs[k] = c + count
    elif type(v) is tuple:
        for x in tuple_leaves(v):  # a stack: tuples nest to any depth
            if isinstance(x, ndarray):
                acquire(x, m, count)


def release(v, m: Meter) -> None:
    if isinstance(v, ndarray):
        root = v if v.base is None else root_of(v)
        k = id(root)
        c = m.refs.get(k)
        if c is not None:
            if c > 1:
                m.refs[k] = c - 1
            else:
                del m.refs[k]
                m.cur -= root.nbytes
    elif type(v) is tuple:
        for x in tuple_leaves(v):
            if isinstance(x, ndarray):
                release(x, m)


def coerce(v, sinfo=None):
    """Kernel results as the executor hands them on: scalars for tensors become 0-d arrays (of the
    binding's dtype when a kernel returned a Python number), lists become tuples."""
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, tuple | list):
        # Bottom-up with a stack over (value, struct info) pairs: tuples nest to any depth.
        return fold((v, sinfo), _coerce_pairs, _coerce_one, shared=False)
    if isinstance(sinfo, TensorStructInfo) and isinstance(v, bool | int | float):
        return np.asarray(v, dtype=sinfo.dtype or None)
    return v


def _coerce_pairs(pair) -> list:
    v, sinfo = pair
    if not isinstance(v, tuple | list):
        return []
    fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) and len(sinfo.fields) == len(v) else (None,) * len(v)
    return list(zip(v, fields))


def _coerce_one(pair, fields):
    v, sinfo = pair
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, tuple | list):
        return tuple(fields)
    if isinstance(sinfo, TensorStructInfo) and isinstance(v, bool | int | float):
        return np.asarray(v, dtype=sinfo.dtype or None)
    return v


def run_code(code, regs, m: Meter) -> None:
    """The hot loop. Instructions are (fn, out, frees, special, info); no timing, no lookups by name."""
    refs = m.refs
    skip = m.skip
    cur = m.cur
    peak = m.peak
    for ins in code:
        fn, out, frees, special, info = ins
        if special:
            # If / calls run nested code that updates the meter itself.
            m.cur = cur
            m.peak = peak
            v = fn(regs, m)
            cur = m.cur
            peak = m.peak
        else:
            try:
                v = fn(regs)
            except RecursionError:
                raise  # deep recursion between functions: reported once, by the top-level call
            except Exception as err:
                raise kernel_failure(info, regs, err) from None
        if type(v) is ndarray:
            root = v if v.base is None else root_of(v)
            k = id(root)
            c = refs.get(k)
            if c is None:
                if k not in skip:
                    refs[k] = 1
                    cur += root.nbytes
                    if cur > peak:
                        peak = cur
            else:
                refs[k] = c + 1
        else:
            if info.key != "TupleGetItem":  # a field of a tuple value is coerced already (walking a deep one is costly)
                v = coerce(v, info.sinfo)
            m.cur = cur
            m.peak = peak
            acquire(v, m)
            cur = m.cur
            peak = m.peak
        regs[out] = v
        if frees:
            for r in frees:
                v = regs[r]
                regs[r] = None
                if type(v) is ndarray:
                    root = v if v.base is None else root_of(v)
                    k = id(root)
                    c = refs.get(k)
                    if c is not None:
                        if c > 1:
                            refs[k] = c - 1
                        else:
                            del refs[k]
                            cur -= root.nbytes
                elif v is not None:
                    m.cur = cur
                    release(v, m)
                    cur = m.cur
        # Held by these locals, the last value would stay alive through the next kernel after its
        # release, and would not look free for in-place reuse (see inplace.py).
        v = root = None
    m.cur = cur
    m.peak = peak


def run_code_profiled(code, regs, m: Meter) -> None:
    """run_code with per-op time, call count and output bytes recorded in m.prof."""
    prof = m.prof
    for ins in code:
        fn, out, frees, special, info = ins
        if special:
            v = fn(regs, m)
        else:
            t0 = perf_counter()
            try:
                v = fn(regs)
            except RecursionError:
                raise  # deep recursion between functions: reported once, by the top-level call
            except Exception as err:
                raise kernel_failure(info, regs, err) from None
            dt = perf_counter() - t0
        if info.key != "TupleGetItem":  # as in run_code
            v = coerce(v, info.sinfo)
        acquire(v, m)
        regs[out] = v
        del v
        if not special:
            rec = prof.get(info.key)
            if rec is None:
                rec = prof[info.key] = [0, 0.0, 0]
            rec[0] += 1
            rec[1] += dt
            rec[2] += _nbytes(regs[out])
        for r in frees:
            release(regs[r], m)
            regs[r] = None


def _nbytes(v) -> int:
    if isinstance(v, ndarray):
        return v.nbytes
    if type(v) is tuple:
        return sum(x.nbytes for x in tuple_leaves(v) if isinstance(x, ndarray))
    return 0


def run_block(block, regs, m: Meter):
    """Run a block (function body or If branch) and return its result value."""
    for r in block.prefree:
        release(regs[r], m)
        regs[r] = None
    m.run(block.code, regs, m)
    v = block.result(regs)
    for r in block.endfree:
        release(regs[r], m)
        regs[r] = None
    return v


def invoke(prog, args, m: Meter, top: bool):
    """Check and bind the arguments of a lowered function, then run its body."""
    if len(args) != prog.nparams:
        names = ", ".join(prog.param_names)
        raise ExecutionError(f"{prog.name}: expects {prog.nparams} argument(s) ({names}), got {len(args)}")
    regs = prog.template.copy()
    binder = Binder() if prog.symbolic else None
    # At the top level the caller's own reference counts too: parameters stay live after their last use.
    count = 2 if top else 1
    refs = m.refs
    try:
        for (reg, check), a in zip(prog.params, args):
            regs[reg] = v = check(a, binder)
            if top and v is not a:
                m.held.append(v)
            if type(v) is ndarray and v.base is None:
                k = id(v)
                c = refs.get(k)
                if c is None:
                    refs[k] = count
                    m.cur += v.nbytes
                else:
                    refs[k] = c + count
            else:
                acquire(v, m, count)
        if binder is not None:
            check_deferred(binder)
    except Mismatch as mm:
        raise ExecutionError(f"{prog.name}: parameter {mm}") from None
    v = None
    if m.cur > m.peak:
        m.peak = m.cur
    if binder is not None:
        env = binder.env
        regs[0] = env
        for reg, fn in prog.shape_regs:
            regs[reg] = fn(env)
    if top:
        m.param_bytes = m.cur
    return run_block(prog.block, regs, m)


def make_if(cond_read, true_block, false_block, info):
    def run_if(regs, m):
        c = cond_read(regs)
        if isinstance(c, ndarray):
            if c.ndim != 0:
                raise ExecutionError(
                    f"{info.func}: the condition of the If binding '{info.var}' must be a scalar, "
                    f"got {describe_value(c)}",
                    info.span,
                )
        elif isinstance(c, tuple):
            raise ExecutionError(
                f"{info.func}: the condition of the If binding '{info.var}' must be a scalar, got {describe_value(c)}",
                info.span,
            )
        return run_block(true_block if c else false_block, regs, m)

    return run_if


def make_call(callee, readers, info):
    def run_call(regs, m):
        args = [rd(regs) for rd in readers]
        try:
            return invoke(callee, args, m, False)
        except ExecutionError as err:
            # Deep recursion would stack one note per level; a few locate the failure well enough.
            if len(err.notes) < 8:
                where = f" at {info.span}" if info.span is not None else ""
                err.notes.append(f"in the call of '{callee.name}' from {info.func}, binding '{info.var}'{where}")
            raise

    return run_call


def kernel_failure(info, regs, err: BaseException) -> ExecutionError:
    """An ExecutionError naming the function, the binding, the op and its inputs, at the binding's span."""
    if isinstance(err, DiagnosticError):
        orig = err.message
    elif isinstance(err, Mismatch):
        orig = f"its result {err}"
    else:
        orig = f"{type(err).__name__}: {err}"
    try:
        inputs = "; ".join(f"{label}: {_describe(rd(regs))}" for label, rd in info.args)
    except Exception:  # pragma: no cover - describing must never hide the real failure
        inputs = "?"
    message = f"{info.func}: binding '{info.var}' = {info.label} failed: {orig}"
    return ExecutionError(message, info.span, notes=[f"inputs: {inputs}"] if inputs else None)


def _describe(v) -> str:
    return render(v, _describe_parts)  # a stack: tuples nest to any depth


def _describe_parts(v) -> list:
    if type(v) is tuple and v and any(isinstance(x, ndarray | tuple) for x in v):
        # A string value is an item, not text, for render: described here.
        return ["(", *joined([describe_value(x) if isinstance(x, str) else x for x in v]), ")"]
    return [describe_value(v)]
