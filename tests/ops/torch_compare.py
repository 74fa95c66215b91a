"""Comparing torch-backend results with the NumPy reference: exact for ints and bools, ulp-scaled for floats."""

from __future__ import annotations

import numpy as np

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
