"""Shared by the op tests: higher-order modules (`<f>_dot(params..., w...) = sum_i <grad_i of f, w_i>` built on
Gradient's adjoint), adjoints of scripted functions, and comparing torch-backend results with the NumPy
reference (exact for ints and bools, ulp-scaled for floats)."""

from __future__ import annotations

import numpy as np

import retrograd
from retrograd.ir import BlockBuilder, Function, IRModule, Var
from retrograd.ir.expr import Call, GlobalVar, TupleGetItem
from retrograd.ir.struct_info import TupleStructInfo, is_float_dtype
from retrograd.ops.api import R
from retrograd.passes.gradient import Gradient
from retrograd.runtime.executor import build


def dot_of_adjoint(mod: IRModule, name: str, required: list[int], **options) -> IRModule:
    """`mod` plus `<name>_adjoint` (Gradient with `options`) and `<name>_dot`, which takes the adjoint's
    parameters and one weight per gradient and returns sum_i sum(grad_i * w_i): differentiating it again
    is the next order (a Hessian-vector product when `name` returns a scalar)."""
    first = Gradient(name, required, **options)(mod)
    adj = first[f"{name}_adjoint"]
    params = [Var(p.name_hint, p.struct_info) for p in adj.params]
    weights = [Var(f"w{i}", s) for i, s in enumerate(adj.ret_struct_info.fields[1].fields)]
    bb = BlockBuilder(first)
    bb.begin_scope()
    # An impure adjoint (of collectives) is called outside dataflow blocks, from an impure function.
    bb.begin_block(dataflow=adj.is_pure)
    res = bb.emit(Call(GlobalVar(f"{name}_adjoint", adj.struct_info), tuple(params)), "res")
    grads = bb.emit(TupleGetItem(res, 1), "grads")
    total = None
    for i, w in enumerate(weights):
        term = bb.emit(R.sum(R.multiply(bb.emit(TupleGetItem(grads, i), "g"), w)), "t")
        total = term if total is None else bb.emit(R.add(total, term), "acc")
    out = bb.emit_output(total, "dot") if adj.is_pure else total
    bb.end_block()
    body = bb.end_scope(out)
    dot = Function(params + weights, body, body.struct_info, adj.is_pure, attrs={"global_symbol": f"{name}_dot"})
    return first.with_function(f"{name}_dot", dot)


def random_value(sinfo, rng):
    """Standard normal floats shaped like `sinfo` (zeros for integer fields: they take no cotangent)."""
    if isinstance(sinfo, TupleStructInfo):
        return tuple(random_value(f, rng) for f in sinfo.fields)
    if not is_float_dtype(sinfo.dtype):
        return np.zeros(tuple(sinfo.shape), sinfo.dtype)
    return rng.standard_normal(tuple(sinfo.shape))


def script_grads(text: str, arrays: list, require: list[str]):
    """(value, gradients of the named parameters) of `main(params..., c) = sum(f(params) * c)`, where the
    text defines `main` over the arrays and the cotangent `c` is its last parameter."""
    mod = Gradient("main", require_grads=require)(retrograd.parse(text))
    value, grads = build(mod)["main_adjoint"](*arrays)
    return value, [np.asarray(g) for g in (grads if isinstance(grads, tuple | list) else [grads])]


def tensor_type(a: np.ndarray) -> str:
    return f'R.Tensor({tuple(a.shape)}, "{a.dtype}")'

# Ops whose PyTorch kernel sums in another order than NumPy (blocked reductions, BLAS, cuDNN-style
# convolutions): their float results may differ by a few ulps of the largest partial sum, so they are
# compared within `ACCUMULATING_ULPS` ulps of the tensor's largest magnitude (at least 1: a sum that cancels
# to a small value keeps the error of its O(1) terms) instead of 2 ulps per value.
ACCUMULATING_ULPS = 16


def to_numpy(value):
    """A torch result (tensor or nested tuple) as NumPy."""
    if isinstance(value, tuple | list):
        return tuple(to_numpy(v) for v in value)
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def assert_matches(got, want, ulps: int = 2, where: str = "", eps: float | None = None):
    """`eps`: the unit of the ulps when the result is wider than the computation (float32 data, float64 out)."""
    if isinstance(want, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(want), f"{where}: tuple of {len(want)} expected, got {type(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, ulps, f"{where}[{i}]", eps)
        return
    got = to_numpy(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    eps = max(eps or 0.0, np.finfo(want.dtype).eps)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{where}: NaN positions")
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)], err_msg=f"{where}: infinities")
    if finite.any():
        w, g = want[finite].astype(np.float64), got[finite].astype(np.float64)
        scale = np.maximum(np.abs(w), max(np.abs(w).max(), 1.0) if ulps > 2 else 0.0)
        tol = ulps * eps * np.maximum(scale, np.finfo(want.dtype).tiny)
        bad = np.abs(g - w) > tol
        assert not bad.any(), f"{where}: {bad.sum()} of {bad.size} values differ beyond {ulps} ulps: got {g[bad][:5]}, want {w[bad][:5]}"


# uint64 indices beyond int64 (2**63 + 5 and 2**64 - 1 read as negative int64 would index from the end).
UINT64_BEYOND_INT64 = np.array([2**63 + 5, 3, 2**64 - 1], dtype=np.uint64)
