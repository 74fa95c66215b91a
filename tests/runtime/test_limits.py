"""Bounded work from tiny text: attributes checked against shapes, loops independent of attribute
magnitudes, results over the allocation limit refused at their binding."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError, ExecutionError
from retrograd.ops.kernels import pool


def fn(body: str, params: str) -> str:
    return f"@R.function\ndef main({params}):\n" + "".join(f"    {line}\n" for line in body.split("\n"))


def test_split_into_a_huge_number_of_sections_is_refused_at_parse_time():
    with pytest.raises(DiagnosticError, match="at most 65536 sections") as info:
        retrograd.parse(fn("y = R.split(x, indices_or_sections=100000000)\nreturn y", 'x: R.Tensor((4, 8), "float32")'))
    assert info.value.span.line == 3


def naive_max_pool(x, k, s):
    """Window starts listed one by one (no formula shared with the kernel)."""
    n, c, h, w = x.shape
    rows = [i for i in range(0, h) if i + k[0] <= h][:: s[0]] if s[0] <= h else [0]
    cols = [j for j in range(0, w) if j + k[1] <= w][:: s[1]] if s[1] <= w else [0]
    out = np.empty((n, c, len(rows), len(cols)), x.dtype)
    for a, i in enumerate(rows):
        for b, j in enumerate(cols):
            out[:, :, a, b] = x[:, :, i : i + k[0], j : j + k[1]].max(axis=(2, 3))
    return out


@pytest.mark.parametrize("strides", [(2, 100000000), (100000000, 1), (10**15, 10**15)])
def test_pooling_with_a_stride_never_taken_is_fast_and_right(strides):
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype("float32")
    got = pool.max_pool2d(x, pool_size=(2, 2), strides=strides)
    np.testing.assert_array_equal(got, naive_max_pool(x, (2, 2), strides))


def test_pooling_text_with_a_huge_stride_runs():
    mod = retrograd.parse(fn("y = R.nn.max_pool2d(x, [2, 2], [2, 100000000])\nreturn y", 'x: R.Tensor((1, 1, 4, 4), "float32")'))
    x = np.arange(16, dtype="float32").reshape(1, 1, 4, 4)
    np.testing.assert_array_equal(retrograd.build(mod)["main"](x), naive_max_pool(x, (2, 2), (2, 100000000)))


def test_huge_results_are_refused_at_their_binding():
    mod = retrograd.parse(fn('y = R.zeros(R.shape([100000000, 100000000]), "float32")\nreturn y', 'x: R.Tensor((2,), "float32")'))
    with pytest.raises(ExecutionError, match="allocation limit") as info:
        retrograd.build(mod)["main"](np.zeros(2, "float32"))
    assert info.value.span.line == 3


def test_the_allocation_limit_is_configurable(monkeypatch):
    mod = retrograd.parse(fn('y = R.zeros(R.shape([1000]), "float32")\nreturn y', 'x: R.Tensor((2,), "float32")'))
    assert retrograd.build(mod)["main"](np.zeros(2, "float32")).shape == (1000,)
    monkeypatch.setenv("RETROGRAD_MAX_ALLOCATION_BYTES", "3999")
    with pytest.raises(ExecutionError, match="4,000 bytes"):
        retrograd.build(mod)["main"](np.zeros(2, "float32"))


def test_a_huge_result_on_a_branch_not_taken_does_not_fail():
    text = fn(
        'if c:\n    y = R.zeros(R.shape([100000000, 100000000]), "float32")\n    z = R.sum(y)\nelse:\n    z = R.sum(x)\nreturn z',
        'x: R.Tensor((2,), "float32"), c: R.Tensor((), "bool")',
    )
    out = retrograd.build(retrograd.parse(text))["main"](np.ones(2, "float32"), np.array(False))
    assert float(out) == 2.0


@pytest.mark.parametrize("attr", ["strides=[2, 18446744073709551616]", "strides=[2, 4611686018427387904]"])
def test_attributes_and_inferred_dims_stay_in_int64(attr):
    text = fn(f"y = R.nn.conv2d_transpose(x, w, {attr})\nreturn y",
              'x: R.Tensor((1, 2, 4, 4), "float32"), w: R.Tensor((2, 3, 3, 3), "float32")')
    with pytest.raises(DiagnosticError, match="int64") as info:
        retrograd.parse(text)
    assert info.value.span.line == 3
