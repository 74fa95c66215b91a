"""Writing an elementwise result over the buffer of an input that dies at that op, when nothing else sees it.

This is NumPy's own temporary elision, applied across bindings. Which ops may do it, and which of their
arguments could hold the result, is decided statically by the op (`OpDef.inplace`,
`OpDef.inplace_candidates`); lowering picks the first candidate whose register is released at that
instruction. At run time the buffer is reused only when the input's only references are its register
and the closure itself (`sys.getrefcount`): then nothing else can see it change — not a view, not the
caller (parameters), not the module (constants), not another register (an identity op's result) — and
writing over it saves an allocation (a page fault per call for tensors past malloc's mmap threshold).
The input may itself be a view (a kernel's reshaped temporary, a transposed value) when the array it
views is referenced by nothing but that view: the test is about the memory, so whether a kernel hands
back its own temporary or a view of it does not matter (retrograd.analysis predicts it from buffers).
"""

from __future__ import annotations

from sys import getrefcount

import numpy as np

ndarray = np.ndarray


def make(into, srcs, target: int, fallback):
    """regs -> result: `into(*inputs, out=srcs[target]'s array)` when nothing else references it, else fallback."""
    t = srcs[target]
    if len(srcs) == 1:

        def run_unary(r):
            a = r[t]
            # 3 references: the register, `a`, and getrefcount's argument; for the viewed array:
            # the view's base, `b`, and getrefcount's argument.
            if type(a) is ndarray and getrefcount(a) == 3 and a.flags.writeable:
                b = a.base
                if b is None or (type(b) is ndarray and b.base is None and getrefcount(b) == 3):
                    return into(a, out=a)
            return fallback(r)

        return run_unary
    s0, s1 = srcs

    def run_binary(r):
        a = r[t]
        if type(a) is ndarray and getrefcount(a) == 3 and a.flags.writeable:
            b = a.base
            if b is None or (type(b) is ndarray and b.base is None and getrefcount(b) == 3):
                return into(r[s0], r[s1], out=a)
        return fallback(r)

    return run_binary
