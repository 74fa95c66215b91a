"""Every op has a torch kernel, and every forward op case gives the NumPy kernel's result on it (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from ops.all_cases import ALL_CASES
from optional import need
from ops.helpers import ACCUMULATING_ULPS, assert_matches

from retrograd.errors import DiagnosticError, UnsupportedError
from retrograd.ops.registry import all_ops

RUNNABLE = [c for c in ALL_CASES if c.is_static and c.opdef.kernel is not None]


def ulps_for(op) -> int:
    return ACCUMULATING_ULPS if op.cost.kind in ("matmul", "conv", "reduce", "pool", "other") or op.name.startswith("relax.grad.") else 2


def to_torch(torch, value):
    if isinstance(value, tuple):
        return tuple(to_torch(torch, v) for v in value)
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value, copy=True))
    return value


@pytest.mark.parametrize("op", all_ops(), ids=lambda o: o.name)
def test_every_op_has_a_torch_kernel(op):
    need("torch")
    if op.kernel is None:
        pytest.skip("the op has no kernel at all")
    assert callable(op.torch_kernel)


def test_missing_torch_kernel_is_a_clear_error(monkeypatch):
    need("torch")
    from retrograd.ops import torch_kernels

    op = all_ops()[0]
    monkeypatch.setattr(torch_kernels, "_TABLE", {})
    with pytest.raises(UnsupportedError, match=r"R\.add has no torch kernel"):
        op.torch_kernel


@pytest.mark.parametrize("case", RUNNABLE, ids=lambda c: c.id)
def test_torch_kernel_matches_numpy(case):
    torch = need("torch")
    op = case.opdef
    values = case.make_inputs(seed=3)
    attrs = op.normalize_attrs(case.attrs)
    try:
        want = case.run_kernel([v.copy() for v in values])
    except DiagnosticError as err:
        with pytest.raises(DiagnosticError):
            op.torch_kernel(*to_torch(torch, tuple(case.kernel_args(values))), **attrs)
        return
    got = op.torch_kernel(*to_torch(torch, tuple(case.kernel_args(values))), **attrs)
    floats = [np.finfo(v.dtype).eps for v in values if v.dtype.kind == "f"]
    assert_matches(got, want, ulps_for(op), case.id, max(floats, default=None))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8"])
def test_select_is_torch_where_bit_for_bit(dtype):
    """torch_kernels.select (a bit blend on CPU) gives torch.where's bits, broadcasting included: NaN
    payloads of either sign, signed zeros, infinities, subnormals, 0-d operands."""
    torch = need("torch")
    from retrograd.ops.torch_kernels.select import select

    dt = getattr(torch, dtype)
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[torch.empty(0, dtype=dt).element_size()]
    rng = np.random.default_rng(2)
    pool = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.0, -1.0, 1e-45, 3.5], np.float32)

    def make(shape):
        if dt.is_floating_point:
            return torch.from_numpy(np.asarray(rng.choice(pool, shape), np.float32)).to(dt)
        return torch.from_numpy(np.asarray(rng.integers(-100, 100, shape))).to(dt)

    for sa, sb, sc in [((5, 4), (5, 4), (5, 4)), ((), (5, 4), (5, 4)), ((5, 4), (), (5, 4)), ((), (), (5, 4)),
                       ((5, 1), (1, 4), (5, 4)), ((5, 4), (5, 4), (1, 4)), ((5, 4), (4,), ()), ((2, 5, 4), (5, 4), (5, 1))]:
        a, b = make(sa), make(sb)
        c = torch.from_numpy(np.asarray(rng.random(sc) < 0.5))
        want, got = torch.where(c, a, b), select(c, a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert torch.equal(got.view(bits), want.view(bits)), (sa, sb, sc)


def test_slices_with_steps_beyond_the_axis_match_numpy():
    # A step of 2**62 or more (one element taken) overflowed ATen's stride: "as_strided: Negative strides"
    # from the slice kernels and the slice backward, where NumPy takes the one element.
    torch = need("torch")
    from retrograd.ops.registry import get

    x = np.arange(30.0).reshape(5, 6)
    fwd, bwd = get("relax.dynamic_strided_slice"), get("relax.grad.dynamic_strided_slice_backward")
    for b, e, s in [([4, 2**63 - 1], [0, 2**62], [-(2**63), 2**63 - 1]), ([-1, 1], [2**63 - 1, 6], [2**62, 2**62]),
                    ([0, 5], [5, 0], [3, -4])]:
        b, e, s = (np.array(v, np.int64) for v in (b, e, s))
        want = fwd.kernel(x, b, e, s)
        got = fwd.torch_kernel(*to_torch(torch, (x, b, e, s)))
        assert_matches(got, want, 0, f"{s}")
        g = np.ones(want.shape)
        assert_matches(bwd.torch_kernel(*to_torch(torch, (g, x, b, e, s))), bwd.kernel(g, x, b, e, s), 0, f"{s}")
    step = get("relax.strided_slice")
    want = step.kernel(x, axes=[0, 1], begin=[4, 0], end=[0, 6], strides=[-(2**63), 2**62])
    assert_matches(step.torch_kernel(torch.tensor(x), axes=[0, 1], begin=[4, 0], end=[0, 6], strides=[-(2**63), 2**62]), want, 0)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_integer_divide_of_the_least_value_by_minus_one_wraps_as_numpy(dtype):
    # ATen's truncating int32 / int64 division traps there (SIGFPE: the process died); NumPy wraps.
    torch = need("torch")
    from retrograd.ops.registry import get

    low = np.iinfo(dtype).min
    a, b = np.array([low, low, 7, -7], dtype), np.array([-1, 2, -1, 2], dtype)
    op = get("relax.divide")
    assert_matches(op.torch_kernel(*to_torch(torch, (a, b))), op.kernel(a, b), 0, dtype)
    assert op.kernel(a, b).tolist() == [low, low // 2, -7, -3]
