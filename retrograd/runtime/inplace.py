"""Elementwise ops the executor may compute into the buffer of an input that dies at that op.

This is NumPy's own temporary elision, applied across bindings: when the input's only references are
its register and the closure itself (`sys.getrefcount`), nothing else can see it change — not a view,
not the caller (parameters), not the module (constants), not another register — so writing the result
over it is safe and saves an allocation (a page fault per call for tensors past malloc's mmap threshold).
Only ops whose registered kernel is exactly this ufunc on floats are listed.
"""

from __future__ import annotations

from sys import getrefcount

import numpy as np

from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype

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


def candidates(op_name: str, srcs, arg_sinfo, out_sinfo) -> list[int]:
    """Positions of arguments whose buffer could hold the result (same static shape and float dtype)."""
    if op_name not in UFUNCS or not all(isinstance(s, int) for s in srcs) or len(srcs) > 2:
        return []
    if not (isinstance(out_sinfo, TensorStructInfo) and out_sinfo.is_static and is_float_dtype(out_sinfo.dtype)):
        return []
    return [i for i, s in enumerate(arg_sinfo) if s == out_sinfo]


def make(op_name: str, srcs, target: int, fallback):
    """regs -> result: the ufunc into srcs[target]'s array when nothing else references it, else fallback."""
    uf = UFUNCS[op_name]
    t = srcs[target]
    if len(srcs) == 1:

        def run_unary(r):
            a = r[t]
            # 3 references: the register, `a`, and getrefcount's argument.
            if type(a) is ndarray and a.base is None and getrefcount(a) == 3 and a.flags.writeable:
                return uf(a, out=a)
            return fallback(r)

        return run_unary
    s0, s1 = srcs

    def run_binary(r):
        a = r[t]
        if type(a) is ndarray and a.base is None and getrefcount(a) == 3 and a.flags.writeable:
            return uf(r[s0], r[s1], out=a)
        return fallback(r)

    return run_binary
