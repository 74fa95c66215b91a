"""Kernels of the core ops against PyTorch and naive loops; gradient rules against float64 finite differences."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ops.cases_core import CASES
from ops.helpers import assert_same
from ops.op_case import OpCase, S, T

import retrograd
from retrograd.errors import DiagnosticError, ExecutionError, KernelError
from retrograd.ir import BlockBuilder, Function, IRModule, TupleGetItem, Var
from retrograd.ir.expr import Tuple, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops.api import R
from optional import need  # noqa: E402

STATIC = [c for c in CASES if c.is_static]


# -- PyTorch references -------------------------------------------------------------------------


def _tvm_slice_indices(n, b, e, s):
    """TVM's canonicalization of one strided_slice axis, written out (clamping as topi does)."""
    if b < 0:
        b += n
    if e < 0:
        e += n
    lo, hi = (0, n) if s > 0 else (-1, n - 1)
    b, e = min(max(b, lo), hi), min(max(e, lo), hi)
    idx = []
    i = b
    while (s > 0 and i < e) or (s < 0 and i > e):
        idx.append(i)
        i += s
    return idx


def torch_reference(case: OpCase, values: list):
    torch = need("torch")
    name = case.op.split("relax.")[1]
    attrs = case.opdef.normalize_attrs(case.attrs)
    args = [
        tuple(torch.from_numpy(np.array(v)) for v in a) if isinstance(a, tuple) and a and isinstance(a[0], np.ndarray)
        else torch.from_numpy(np.array(a)) if isinstance(a, np.ndarray)
        else a
        for a in case.kernel_args(values)
    ]
    x = args[0]
    tdt = lambda d: getattr(torch, d)  # noqa: E731
    axis = attrs.get("axis")
    dims = lambda: tuple(range(x.ndim)) if axis is None else tuple(axis)  # noqa: E731

    simple = {
        "add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "power": torch.pow,
        "maximum": torch.maximum, "minimum": torch.minimum, "equal": torch.eq, "not_equal": torch.ne,
        "greater": torch.gt, "greater_equal": torch.ge, "less": torch.lt, "less_equal": torch.le,
        "abs": torch.abs, "cos": torch.cos, "sin": torch.sin, "exp": torch.exp, "log": torch.log,
        "negative": torch.neg, "sigmoid": torch.sigmoid, "sqrt": torch.sqrt, "tanh": torch.tanh, "where": torch.where,
    }  # fmt: skip
    if name in simple:
        return simple[name](*args)
    if name == "divide":
        return torch.div(*args, rounding_mode=None if x.is_floating_point() else "trunc")
    if name == "sum":
        return torch.sum(x, dim=dims(), keepdim=attrs["keepdims"], dtype=x.dtype)
    if name == "mean":
        if not x.is_floating_point():
            total = torch.sum(x.long(), dim=dims(), keepdim=attrs["keepdims"])
            return torch.div(total, math.prod(x.shape[d] for d in dims()), rounding_mode="trunc").to(x.dtype)
        return torch.mean(x, dim=dims(), keepdim=attrs["keepdims"])
    if name == "variance":
        return torch.var(x, dim=dims(), keepdim=attrs["keepdims"], unbiased=False)
    if name in ("max", "min"):
        return (torch.amax if name == "max" else torch.amin)(x, dim=dims(), keepdim=attrs["keepdims"])
    if name == "cumsum":
        src, d = (x.flatten(), 0) if axis is None else (x, axis)
        out = torch.cumsum(src, dim=d, dtype=tdt(attrs["dtype"]) if attrs["dtype"] else src.dtype)
        if attrs["exclusive"]:
            out = torch.cat([torch.zeros_like(out.narrow(d, 0, 1)), out.narrow(d, 0, out.shape[d] - 1)], dim=d)
        return out
    if name == "matmul":
        a, b = args
        if attrs["out_dtype"]:
            a, b = a.to(tdt(attrs["out_dtype"])), b.to(tdt(attrs["out_dtype"]))
        return torch.matmul(a, b)
    if name == "permute_dims":
        return x.permute(attrs["axes"] if attrs["axes"] is not None else tuple(reversed(range(x.ndim))))
    if name == "concat":
        return torch.cat(x, dim=0 if axis is None else axis)
    if name == "split":
        spec = attrs["indices_or_sections"]
        n = x.shape[axis]
        if spec in (1, ()):
            return x  # one section: the tensor itself
        if isinstance(spec, int):
            parts = list(torch.split(x, -(-n // spec), dim=axis))
            empty = x.narrow(axis, n, 0)
            return tuple(parts + [empty] * (spec - len(parts)))
        return tuple(torch.tensor_split(x, list(spec), dim=axis))
    if name == "expand_dims":
        nd = x.ndim + len(axis)
        for a in sorted(a % nd for a in axis):
            x = x.unsqueeze(a)
        return x
    if name == "squeeze":
        return torch.squeeze(x) if axis is None else torch.squeeze(x, dim=tuple(axis))
    if name == "flatten":
        return torch.flatten(x)
    if name == "reshape":
        return torch.reshape(x, args[1])
    if name == "broadcast_to":
        return torch.broadcast_to(x, args[1])
    if name == "collapse_sum_to":
        return x.sum_to_size(args[1])
    if name == "collapse_sum_like":
        return x.sum_to_size(args[1].shape)
    if name == "strided_slice":
        strides = attrs["strides"] or (1,) * len(attrs["axes"])
        for a, b, e, s in zip(attrs["axes"], attrs["begin"], attrs["end"], strides):
            idx = _tvm_slice_indices(x.shape[a], b, e, s)
            x = torch.index_select(x, a, torch.tensor(idx, dtype=torch.long))
        return x
    if name == "take":
        idx = args[1].long()
        src, a = (x.flatten(), 0) if axis is None else (x, axis % x.ndim)
        n = src.shape[a]
        idx = idx.clamp(0, n - 1) if attrs["mode"] == "clip" else torch.remainder(idx, n)
        out = torch.index_select(src, a, idx.flatten())
        return out.reshape(src.shape[:a] + idx.shape + src.shape[a + 1 :])
    if name == "astype":
        return x.to(tdt(attrs["dtype"]))
    if name in ("triu", "tril"):
        return getattr(torch, name)(x, attrs["k"])
    if name in ("zeros", "ones"):
        return getattr(torch, name)(args[0], dtype=tdt(attrs["dtype"]))
    if name == "full":
        return torch.full(args[0], args[1].item(), dtype=tdt(attrs["dtype"]) if attrs["dtype"] else args[1].dtype)
    if name in ("zeros_like", "ones_like"):
        return getattr(torch, name)(x, dtype=tdt(attrs["dtype"]) if attrs["dtype"] else x.dtype)
    if name == "full_like":
        return torch.full_like(x, args[1].item(), dtype=tdt(attrs["dtype"]) if attrs["dtype"] else x.dtype)
    if name == "match_cast":
        return x  # the value itself once its shape is checked
    if name == "assert_op":
        return ()  # nothing, once the condition holds
    raise NotImplementedError(name)


def _to_numpy(v):
    return tuple(_to_numpy(f) for f in v) if isinstance(v, tuple) else v.numpy()


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.id)
def test_kernel_matches_torch(case):
    values = case.make_inputs(seed=3)
    ref = _to_numpy(torch_reference(case, values))
    # Through the executor: the kernel contract (shapes as int tuples, tuples of arrays) end to end.
    ours = retrograd.build(case.build())["main"](*values)
    assert_same(ours, ref, case.build()["main"].ret_struct_info, case.id)


def test_kernels_keep_dtype_and_return_arrays_for_scalars():
    x = np.float32(2.5) * np.ones((), np.float32)
    for name in ("exp", "negative", "sigmoid", "sqrt"):
        out = getattr(R, name).kernel(x)
        assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == ()
    out = R.add.kernel(x, x)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    out = R.sum.kernel(np.ones((3, 4), np.float32), axis=None, keepdims=False)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == ()
    out = R.sum.kernel(np.ones((3, 4), np.int32), axis=(0,), keepdims=False)
    assert out.dtype == np.int32  # NumPy alone would widen to int64
    out = R.matmul.kernel(np.ones(3, np.float32), np.ones(3, np.float32))
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float32


def test_kernels_do_not_mutate_inputs():
    for case in STATIC[::3]:
        values = case.make_inputs(seed=5)
        before = [v.copy() for v in values]
        case.run_kernel(values)
        for a, b in zip(values, before):
            np.testing.assert_array_equal(a, b, err_msg=case.id)


# -- naive references (no PyTorch needed) -------------------------------------------------------


def test_strided_slice_naive():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 5)).astype("float32")
    for b, e, s in [(1, 6, 2), (-1, 0, -1), (10, -10, -2), (-100, 100, 3), (6, -8, -3), (2, 2, 1), (0, 7, 7)]:
        out = R.strided_slice.kernel(x, axes=(0,), begin=(b,), end=(e,), strides=(s,))
        rows = _tvm_slice_indices(7, b, e, s)
        expected = np.array([[x[r, c] for c in range(5)] for r in rows], dtype="float32").reshape(len(rows), 5)
        np.testing.assert_array_equal(out, expected, err_msg=str((b, e, s)))


def test_collapse_sum_to_naive():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4)).astype("float64")
    out = R.collapse_sum_to.kernel(x, (3, 1))
    expected = np.zeros((3, 1))
    for i in range(2):
        for j in range(3):
            for k in range(4):
                expected[j, 0] += x[i, j, k]
    np.testing.assert_allclose(out, expected, rtol=1e-12)


@pytest.mark.parametrize("shape,target", [
    ((4, 3, 5, 6), (1, 3, 1, 1)), ((4, 3, 5, 6), (3, 1, 1)), ((4, 3), (3,)), ((4, 3), (1, 3)), ((2, 3, 4), (3, 4)),
    ((2, 3, 4), (1, 1, 4)), ((2, 3, 4), (2, 1, 1)), ((1, 3, 1), (3, 1)), ((5, 1, 2), (1, 2)), ((3, 4), (1, 1)),
    ((3, 4), ()), ((0, 3), (3,)), ((2, 3, 4, 5), (1, 3, 4, 1))])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_collapse_sum_to_matches_a_loop(shape, target, dtype):
    """Every pattern of summed axes, the conv bias gradient's (leading and trailing axes around the kept
    ones, summed by BLAS products with ones) included; the result never shares the input's memory."""
    rng = np.random.default_rng(2)
    x = rng.integers(-5, 5, shape).astype(dtype) if dtype == "int64" else rng.standard_normal(shape).astype(dtype)
    lead = x.ndim - len(target)
    expected = np.zeros(target, "float64")
    for idx in np.ndindex(*shape):
        expected[tuple(0 if t == 1 else i for t, i in zip(target, idx[lead:]))] += x[idx]
    out = R.collapse_sum_to.kernel(x, target)
    assert out.shape == tuple(target) and out.dtype == x.dtype
    np.testing.assert_allclose(out, expected, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)
    if out.shape != x.shape:
        assert not np.shares_memory(out, x)


def test_split_and_cumsum_naive():
    x = np.arange(14, dtype="float32").reshape(2, 7)
    parts = R.split.kernel(x, indices_or_sections=3, axis=1)
    assert [p.shape[1] for p in parts] == [3, 3, 1]  # sections of ceil(7 / 3), the last one smaller
    assert [list(p[0]) for p in parts] == [[0, 1, 2], [3, 4, 5], [6]]
    parts = R.split.kernel(x, indices_or_sections=(2, 9), axis=1)
    assert [p.shape[1] for p in parts] == [2, 5, 0]
    x = np.array([[1, 2, 3], [4, 5, 6]], "int32")
    out = R.cumsum.kernel(x, axis=None, dtype=None, exclusive=False)
    running, expected = 0, []
    for v in [1, 2, 3, 4, 5, 6]:
        running += v
        expected.append(running)
    assert out.tolist() == expected and out.dtype == np.int32
    out = R.cumsum.kernel(x, axis=1, dtype="float64", exclusive=True)
    assert out.tolist() == [[0, 1, 3], [0, 4, 9]] and out.dtype == np.float64


def test_integer_semantics_naive():
    a, b = np.array([7, -7, 7, -7, 6], "int32"), np.array([2, 2, -2, -2, 3], "int32")
    assert R.divide.kernel(a, b).tolist() == [int(p / q) for p, q in zip(a.tolist(), b.tolist())]  # truncation
    assert R.mean.kernel(np.array([[1, 2, 4], [-1, -2, -4]], "int32"), axis=(1,), keepdims=False).tolist() == [2, -2]
    x = np.arange(12, dtype="float32").reshape(3, 4)
    up = R.triu.kernel(x, k=1)
    assert all(up[i, j] == (x[i, j] if j - i >= 1 else 0) for i in range(3) for j in range(4))
    low = R.tril.kernel(x, k=-1)
    assert all(low[i, j] == (x[i, j] if j - i <= -1 else 0) for i in range(3) for j in range(4))


# -- kernel errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, fragment",
    [
        (lambda: R.divide.kernel(np.array([1], "int32"), np.array([0], "int32")), "integer division by zero"),
        (lambda: R.reshape.kernel(np.zeros((3, 4)), (5, 2)), "cannot reshape a tensor shaped (3, 4) into [5, 2]"),
        (lambda: R.max.kernel(np.zeros((0, 3)), axis=(0,), keepdims=False), "reduction over an empty axis"),
        (lambda: R.squeeze.kernel(np.zeros((3, 4)), axis=(2,)), "axes [2] out of range"),
        (lambda: R.collapse_sum_to.kernel(np.zeros((3, 4)), (2, 4)), "cannot collapse"),
        (lambda: R.broadcast_to.kernel(np.zeros((3, 4)), (2, 4)), "cannot broadcast"),
        (lambda: R.take.kernel(np.zeros((3, 4)), np.array([4]), axis=0, mode="fast"), "index 4 out of range"),
    ],
)
def test_kernel_errors(call, fragment):
    with pytest.raises(KernelError) as info:
        call()
    assert fragment in str(info.value)


def test_kernel_error_through_executor_names_the_binding():
    case = OpCase("relax.take", [T(3, 4), T(2, dtype="int64")], {"axis": 0})
    ex = retrograd.build(case.build())
    with pytest.raises(DiagnosticError) as info:
        ex["main"](np.zeros((3, 4), "float32"), np.array([0, 7]))
    assert isinstance(info.value, (ExecutionError, KernelError)) and "7" in str(info.value)


# -- gradient rules against finite differences ----------------------------------------------------


def _leaf_sinfos(sinfo):
    return list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]


def rule_module(case: OpCase) -> IRModule:
    """main(params..., g) -> gradients of the differentiable params, as the Gradient driver would
    emit them: the rule's expressions, collapse-summed to each argument's shape."""
    params = case.params()
    bb = BlockBuilder()
    bb.begin_scope()
    with bb.dataflow():
        call = bb.normalize(case.call(params))
        out = bb.emit(call, "out")
        g = Var("g", out.struct_info)
        grads = case.opdef.grad(call, out, g)
        assert len(grads) == len(call.args), f"{case.id}: rule returned {len(grads)} entries for {len(call.args)} args"
        results = []
        for i in case.diff_args:
            assert grads[i] is not None, f"{case.id}: no gradient for differentiable argument {i}"
            v = bb.emit(grads[i], "grad")
            arg = call.args[i]
            pieces = [(v, arg)] if not isinstance(arg, Tuple) else [(bb.emit(TupleGetItem(v, j)), f) for j, f in enumerate(arg.fields)]
            for piece, target in pieces:
                want = target.struct_info
                if piece.struct_info.shape != want.shape:
                    piece = bb.emit(R.collapse_sum_to(piece, shape_expr(want.shape)))
                assert piece.struct_info.dtype == want.dtype, f"{case.id}: gradient dtype {piece.struct_info.dtype}"
                results.append(piece)
        result = bb.emit_output(Tuple(results))
    body = bb.end_scope(result)
    return IRModule({"main": Function(params + [g], body, body.struct_info)})


def _loss(case, values, gs):
    out = case.run_kernel(values)
    outs = out if isinstance(out, tuple) else (out,)
    return sum(float(np.sum(np.asarray(o, np.float64) * gv)) for o, gv in zip(outs, gs))


def check_rule(case: OpCase, seed: int = 2, eps: float = 1e-6, tol: float = 1e-6):
    mod = rule_module(case)
    values = case.make_inputs(seed)
    g_sinfo = mod["main"].params[-1].struct_info
    rng = np.random.default_rng(seed + 100)
    gs = [rng.uniform(-1, 1, size=s.shape).astype(s.dtype) for s in _leaf_sinfos(g_sinfo)]
    g_value = tuple(gs) if isinstance(g_sinfo, TupleStructInfo) else gs[0]
    got = retrograd.build(mod)["main"](*values, g_value)
    for k, p in enumerate(case.differentiable_params()):
        x = values[p].astype(np.float64)
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            plus, minus = [v.copy() for v in values], [v.copy() for v in values]
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps
            xm[idx] -= eps
            plus[p], minus[p] = xp.astype(values[p].dtype), xm.astype(values[p].dtype)
            numeric[idx] = (_loss(case, plus, gs) - _loss(case, minus, gs)) / (2 * eps)
        np.testing.assert_allclose(got[k], numeric, rtol=tol, atol=tol, err_msg=f"{case.id}: param {p}")


GRAD_CASES = [c for c in STATIC if c.diff_args]


@pytest.mark.parametrize("case", GRAD_CASES, ids=lambda c: c.id)
def test_gradient_rule_matches_finite_differences(case):
    check_rule(case.as_dtype("float64"))


def test_gradient_rules_exist_for_every_core_op():
    core = {c.op for c in CASES}
    for name in core:
        assert retrograd.ops.get(name).grad is not None, name


@pytest.mark.parametrize(
    "case",
    [
        # The output dtype differs from the inputs': the rules cast the adjoint back.
        OpCase("relax.matmul", [T(3, 4), T(4, 2)], {"out_dtype": "float64"}, name="mixed"),
        OpCase("relax.matmul", [T(4), T(4, 2)], {"out_dtype": "float64"}, name="mixed-vec"),
        OpCase("relax.cumsum", [T(2, 3)], {"axis": 1, "dtype": "float64"}, name="mixed"),
        OpCase("relax.astype", [T(2, 3)], {"dtype": "float64"}, name="mixed"),
        OpCase("relax.full", [S(2, 3), T()], {"dtype": "float64"}, name="mixed"),
    ],
    ids=lambda c: c.id,
)
def test_gradient_rules_with_mixed_dtypes(case):
    check_rule(case, eps=1e-3, tol=2e-3)


@pytest.mark.parametrize(
    "case",
    [
        OpCase("relax.collapse_sum_to", [T(2, 3, 4), S(3, 1)]),
        OpCase("relax.broadcast_to", [T(3, 1), S(2, 3, 4)]),
        OpCase("relax.squeeze", [T(1, 3, 1)], {"axis": [0]}),
        OpCase("relax.flatten", [T(2, 3)]),
        OpCase("relax.strided_slice", [T(5, 6)], {"axes": [1, 0], "begin": [5, 1], "end": [0, 5], "strides": [-2, 3]}),
    ],
    ids=lambda c: c.id,
)
def test_ops_emitted_by_rules_are_differentiable(case):
    # Every op a rule of these emits has a rule too: differentiate the emitted ops' own cases.
    mod = rule_module(case.as_dtype("float64"))
    emitted = set()
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            op = getattr(binding.value, "op", None)
            if op is not None and hasattr(op, "grad"):
                emitted.add(op.name)
    for name in emitted:
        assert retrograd.ops.get(name).grad is not None, f"{name}, emitted by the rule of {case.op}, has no rule"
    check_rule(case.as_dtype("float64"))


def test_strided_slice_rule_is_exact_for_many_slices():
    rng = np.random.default_rng(7)
    for trial in range(12):
        n = int(rng.integers(1, 8))
        b, e = (int(v) for v in rng.integers(-10, 10, size=2))
        s = int(rng.choice([-3, -2, -1, 1, 2, 3]))
        case = OpCase("relax.strided_slice", [T(n, 2, dtype="float64")], {"axes": [0], "begin": [b], "end": [e], "strides": [s]})
        check_rule(case)


def test_sum_rule_with_unknown_shape_broadcasts_with_zeros_like():
    x = Var("x", TensorStructInfo(None, "float32", 2))
    bb = BlockBuilder()
    bb.begin_scope()
    call = bb.normalize(R.sum(x, axis=[1]))
    out = bb.emit(call)
    (gx,) = R.sum.grad(call, out, Var("g", out.struct_info))
    v = bb.emit(gx)
    assert v.struct_info.ndim == 2 and v.struct_info.dtype == "float32"
