"""matmul: NumPy's (`matmul`), and the form that splits large products over the kernel threads by rows,
columns or batch (`matmul_parts`), which the runtime binds while an executor call holds BLAS to one
thread (runtime/threads.py)."""

from __future__ import annotations

import math

import numpy as np

import retrograd.tuning as tuning
from retrograd.ops.kernels import parallel


def _operands(a, b, out_dtype):
    if out_dtype is not None and (a.dtype != out_dtype or b.dtype != out_dtype):
        a, b = a.astype(out_dtype, copy=False), b.astype(out_dtype, copy=False)
    return np.asarray(a), np.asarray(b)


def matmul(a, b, out_dtype=None):
    a, b = _operands(a, b, out_dtype)
    return np.asarray(np.matmul(a, b))


def matmul_parts(a, b, out_dtype=None):
    """matmul's result, a large product computed in parts on the kernel threads, each with one BLAS thread."""
    a, b = _operands(a, b, out_dtype)
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.dtype.kind not in "fc":
        return np.asarray(np.matmul(a, b))
    k = a.shape[-1]
    if b.shape[-2] != k:
        return np.asarray(np.matmul(a, b))  # NumPy's own error message
    if a.ndim == 2 and b.ndim == 2:
        return _split_2d(a, b)
    if a.ndim == b.ndim and a.shape[0] == b.shape[0] and a.shape[0] > 1:
        return _split_batch(a, b)
    if b.ndim == 2 and a.flags.c_contiguous:  # a stack of rows times one matrix: one tall product
        return _split_2d(a.reshape(-1, k), b).reshape(*a.shape[:-1], b.shape[-1])
    return np.asarray(np.matmul(a, b))


def _ns(m, k, n) -> float:
    return 2.0 * m * k * n / tuning.GEMM_FLOPS_PER_NS


def _split_2d(a, b):
    (m, k), n = a.shape, b.shape[1]
    out = np.empty((m, n), np.result_type(a, b))
    if m >= n:
        parallel.run_parts(lambda sl: np.matmul(a[sl], b, out=out[sl]), m, _ns(m, k, n), blas=True, min_part_ns=tuning.MATMUL_MIN_PART_NS)
    else:
        parallel.run_parts(lambda sl: np.matmul(a, b[:, sl], out=out[:, sl]), n, _ns(m, k, n), blas=True, min_part_ns=tuning.MATMUL_MIN_PART_NS)
    return out


def _split_batch(a, b):
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.result_type(a, b))
    work = _ns(math.prod(out.shape[:-1]), a.shape[-1], out.shape[-1])
    parallel.run_parts(lambda sl: np.matmul(a[sl], b[sl], out=out[sl]), a.shape[0], work, blas=True, min_part_ns=tuning.MATMUL_MIN_PART_NS)
    return out
