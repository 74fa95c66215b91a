"""Large elementwise results computed in parts on the kernel threads, through the op's `inplace` form.

An op's `inplace(*arrays, out=)` is exactly its kernel's computation, elementwise (ops/registry.py), so
the result can be written part by part: each part reads the matching rows of the arguments that span
the result's first axis (others broadcast whole). Only static float results with every argument of the
result's dtype (or a bool condition) take this path, where `into` cannot differ from the kernel: no promotion, no casting.
"""

from __future__ import annotations

import numpy as np

from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype
from retrograd.ops.kernels import parallel
from retrograd.tuning import COPY_BYTES_PER_NS, SPLIT_BYTES



def splittable(arg_sinfo, out_sinfo, nbytes: int | None) -> bool:
    if nbytes is None or nbytes < SPLIT_BYTES or not isinstance(out_sinfo, TensorStructInfo):
        return False
    if not (out_sinfo.is_static and is_float_dtype(out_sinfo.dtype) and out_sinfo.ndim >= 1):
        return False
    # A bool argument is a condition (where's); any other dtype must be the result's.
    return all(isinstance(s, TensorStructInfo) and s.dtype in (out_sinfo.dtype, "bool") and s.ndim is not None
               and 0 <= s.ndim <= out_sinfo.ndim for s in arg_sinfo)


def split_into(into):
    """`into(*arrays, out=)` run in parts along out's first axis."""

    def run(*arrays, out):
        n = out.shape[0]
        nd = out.ndim
        # An argument spans the first axis when it has the result's rank and its length there.
        spans = [a.ndim == nd and a.shape[0] == n for a in arrays]

        def part(sl):
            into(*[a[sl] if s else a for a, s in zip(arrays, spans)], out=out[sl])

        parallel.run_parts(part, n, out.nbytes * (len(arrays) + 1) / COPY_BYTES_PER_NS)
        return out

    return run


def make(into, readers, shape: tuple, dtype: str):
    """regs -> into(*inputs, out=a new array of the result's shape), in parts."""
    run = split_into(into)
    dt = numpy_dtype(dtype)

    def kernel(r):
        return run(*[read(r) for read in readers], out=np.empty(shape, dt))

    return kernel
