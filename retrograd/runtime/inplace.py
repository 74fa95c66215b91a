"""Elementwise ops the executor may compute into the buffer of an input that dies at that op.

This is NumPy's own temporary elision, applied across bindings: when the input's only references are
its register and the closure itself (`sys.getrefcount`), nothing else can see it change — not a view,
not the caller (parameters), not the module (constants), not another register — so writing the result
over it is safe and saves an allocation (a page fault per call for tensors past malloc's mmap threshold).
The input may itself be a view (a kernel's reshaped temporary, a transposed value) when the array it
views is referenced by nothing but that view: the rule is about the memory, so that which kernels hand
back views of their own temporaries does not matter (retrograd.analysis predicts it from the buffers).
Only ops whose registered kernel is exactly this ufunc on floats are listed.
"""

from __future__ import annotations

from sys import getrefcount

import numpy as np


ndarray = np.ndarray


def _relu(x, out):
    return np.maximum(x, x.dtype.type(0), out=out)


UFUNCS = {
    "relax.add": np.add,
    "relax.subtract": np.subtract,
    "relax.multiply": np.multiply,
    "relax.maximum": np.maximum,
    "relax.minimum": np.minimum,
    "relax.negative": np.negative,
    "relax.abs": np.absolute,
    "relax.tanh": np.tanh,
    "relax.sin": np.sin,
    "relax.cos": np.cos,
    "relax.nn.relu": _relu,
}


def make(op_name: str, srcs, target: int, fallback):
    """regs -> result: the ufunc into srcs[target]'s array when nothing else references it, else fallback."""
    uf = UFUNCS[op_name]
    t = srcs[target]
    if len(srcs) == 1:

        def run_unary(r):
            a = r[t]
            # 3 references: the register, `a`, and getrefcount's argument; for the viewed array:
            # the view's base, `b`, and getrefcount's argument.
            if type(a) is ndarray and getrefcount(a) == 3 and a.flags.writeable:
                b = a.base
                if b is None or (type(b) is ndarray and b.base is None and getrefcount(b) == 3):
                    return uf(a, out=a)
            return fallback(r)

        return run_unary
    s0, s1 = srcs

    def run_binary(r):
        a = r[t]
        if type(a) is ndarray and getrefcount(a) == 3 and a.flags.writeable:
            b = a.base
            if b is None or (type(b) is ndarray and b.base is None and getrefcount(b) == 3):
                return uf(r[s0], r[s1], out=a)
        return fallback(r)

    return run_binary
