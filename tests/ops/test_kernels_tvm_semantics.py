"""Special values (NaN, inf, signed zeros, dtype bounds) in the kernels, by hand: the lowering TVM 0.27 gives each op,
written out in plain Python per element (test_tvm_kernel_parity checks the same against TVM itself)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import retrograd
from retrograd.errors import KernelError
from retrograd.ops.registry import get

SPECIAL = [-math.inf, -1e30, -3.7, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, 3.7, 1e30, math.inf, math.nan]


def _grid(dtype="float64"):
    pairs = list(itertools.product(SPECIAL, SPECIAL))
    return np.array([a for a, _ in pairs], dtype), np.array([b for _, b in pairs], dtype), pairs


def _same(got, want):
    got = np.asarray(got, dtype="float64")
    want = np.asarray(want, dtype="float64")
    assert got.shape == want.shape
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    ok = np.isnan(want) | (got == want) | np.isclose(got, want, rtol=1e-6, atol=0)
    assert ok.all(), [(i, g, w) for i, (g, w, k) in enumerate(zip(got, want, ok)) if not k][:5]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_maximum_and_minimum_are_one_comparison_and_a_select(dtype):
    # TVM: max(a, b) = a > b ? a : b; a NaN first argument gives the second, a NaN second gives NaN.
    a, b, pairs = _grid(dtype)
    a, b = a.astype(dtype), b.astype(dtype)
    cast = [(float(np.float32(x)) if dtype == "float32" else x, float(np.float32(y)) if dtype == "float32" else y) for x, y in pairs]
    _same(get("relax.maximum").kernel(a, b), [x if x > y else y for x, y in cast])
    _same(get("relax.minimum").kernel(a, b), [x if x < y else y for x, y in cast])


@pytest.mark.parametrize("position", [0, 1])
def test_maximum_in_place_over_either_argument_equals_the_kernel(position):
    a, b, _ = _grid()
    want = get("relax.maximum").kernel(a, b)
    args = [a.copy(), b.copy()]
    got = get("relax.maximum").inplace(*args, out=args[position])
    assert got is args[position]
    np.testing.assert_array_equal(got, want)


def test_relu_clip_and_sign_of_nan_follow_their_selects():
    x = np.array(SPECIAL)
    _same(get("relax.nn.relu").kernel(x), [v if v > 0 else 0.0 for v in SPECIAL])
    _same(get("relax.sign").kernel(x), [1.0 if v > 0 else -1.0 if v < 0 else 0.0 for v in SPECIAL])
    # clip = max(min(x, hi), lo) with those selects: NaN becomes hi (then at least lo).
    lo, hi = -1.0, 2.0
    _same(get("relax.clip").kernel(x, lo, hi), [max_(min_(v, hi), lo) for v in SPECIAL])
    _same(get("relax.clip").kernel(x, 0.5, 0.25), [0.5] * len(SPECIAL))


def max_(a, b):
    return a if a > b else b


def min_(a, b):
    return a if a < b else b


def test_clip_saturates_integer_bounds_beyond_the_dtype():
    x = np.array([0, 5, 200, 255], "uint8")
    out = get("relax.clip").kernel(x, -10, 300)  # 300 cast to uint8 would be 44
    np.testing.assert_array_equal(out, x)
    assert out.dtype == np.uint8
    y = np.array([-128, 5, 127], "int8")
    np.testing.assert_array_equal(get("relax.clip").kernel(y, -1000, 100), [-128, 5, 100])



def test_clip_of_integers_with_an_infinite_bound_is_unbounded_on_that_side():
    # torch.clamp(int64_tensor, min=0) exports as R.clip(x, 0, T.float64("inf")): PyTorch's value.
    x = np.array([-3, 0, 7, 2**62], "int64")
    np.testing.assert_array_equal(get("relax.clip").kernel(x, 0, math.inf), [0, 0, 7, 2**62])
    np.testing.assert_array_equal(get("relax.clip").kernel(x, -math.inf, 5.0), [-3, 0, 5, 5])
    np.testing.assert_array_equal(get("relax.clip").kernel(x.astype("uint8") % 9, -math.inf, math.inf), x.astype("uint8") % 9)


def test_not_equal_is_ordered_as_tvm_compares_floats():
    a, b, pairs = _grid()
    want = [not (math.isnan(x) or math.isnan(y)) and x != y for x, y in pairs]
    np.testing.assert_array_equal(get("relax.not_equal").kernel(a, b), want)
    np.testing.assert_array_equal(get("relax.not_equal").kernel(np.array([1, 2]), np.array([1, 3])), [False, True])


def test_float_floor_divide_and_floor_mod_go_through_floor_of_the_quotient():
    a, b, pairs = _grid()
    with np.errstate(all="ignore"):
        _same(get("relax.floor_divide").kernel(a, b), [_floor(x / y if y else _div0(x, y)) for x, y in pairs])
        _same(get("relax.floor_mod").kernel(a, b), [x - _floor(x / y if y else _div0(x, y)) * y for x, y in pairs])
    # Integers keep Python's floor semantics.
    i, j = np.array([7, -7, 7, -7]), np.array([2, 2, -2, -2])
    np.testing.assert_array_equal(get("relax.floor_divide").kernel(i, j), [7 // 2, -7 // 2, 7 // -2, -7 // -2])
    np.testing.assert_array_equal(get("relax.floor_mod").kernel(i, j), [7 % 2, -7 % 2, 7 % -2, -7 % -2])


def _div0(x, y):
    if math.isnan(x) or x == 0:
        return math.nan
    return math.copysign(math.inf, x) * math.copysign(1.0, y)


def _floor(v):
    return v if math.isnan(v) or math.isinf(v) else float(math.floor(v))


@pytest.mark.parametrize("op, args", [("negative", 1), ("subtract", 2)])
def test_bool_arithmetic_without_a_bool_form_is_a_kernel_error(op, args):
    x = np.array([True, False])
    with pytest.raises(KernelError, match=f"R.{op}: not defined for bool tensors"):
        get(f"relax.{op}").kernel(*[x] * args)


def test_bool_sign_is_the_input_and_a_located_error_for_bool_negative():
    x = np.array([True, False])
    np.testing.assert_array_equal(get("relax.sign").kernel(x), x)
    mod = retrograd.parse(
        "@R.function\ndef main(x: R.Tensor((2,), \"bool\")):\n    y = R.negative(x)\n    return y\n"
    )
    with pytest.raises(retrograd.DiagnosticError, match="not defined for bool"):
        retrograd.build(mod)["main"](x)


def test_comparisons_take_mixed_dtypes_and_arithmetic_does_not():
    text = """@R.function
def main(i: R.Tensor((4,), "int32"), f: R.Tensor((4,), "float32")):
    r = R.OP(i, f)
    return r
"""
    i = np.array([-2, 0, 1, 3], "int32")
    f = np.array([-2.0, 0.5, 1.0, math.nan], "float32")
    naive = {"less": lambda a, b: a < b, "equal": lambda a, b: a == b,
             "not_equal": lambda a, b: not (math.isnan(b) or a == b), "greater_equal": lambda a, b: a >= b}
    for op, want in naive.items():
        got = retrograd.build(retrograd.parse(text.replace("OP", op)))["main"](i, f)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, [want(int(a), float(b)) for a, b in zip(i, f)], err_msg=op)
    with pytest.raises(retrograd.DiagnosticError, match="dtypes int32 and float32 differ"):
        retrograd.parse(text.replace("OP", "add"))
