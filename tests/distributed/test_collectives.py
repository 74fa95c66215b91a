"""R.ccl.* over 2 and 3 processes (gloo on localhost): each collective's value and its gradient against a
NumPy reference and float64 finite differences of that reference."""

from __future__ import annotations

import numpy as np
import pytest
from optional import need

from distributed import workers as W


def reference(k: int, xs: list) -> list:
    """What worker r holds after op k, from every worker's input (a naive model of the collective)."""
    name, _, _ = W.OPS[k]
    n = len(xs)
    attrs = W.attrs_for(k, n)
    axis = attrs.get("axis", 0)
    if name == "allreduce":
        red = {"sum": sum, "avg": lambda v: sum(v) / n, "prod": lambda v: np.prod(v, axis=0),
               "min": lambda v: np.min(v, axis=0), "max": lambda v: np.max(v, axis=0)}[attrs["op_type"]]
        return [red(np.stack(xs) if attrs["op_type"] in ("prod", "min", "max") else list(xs))] * n
    if name == "allgather":
        return [np.concatenate(xs, 0)] * n
    if name == "broadcast_from_worker0":
        return [xs[0]] * n
    if name == "scatter_from_worker0":
        return np.split(xs[0], n, axis)
    if name == "reduce_to_worker0":
        return [sum(xs)] + [np.zeros_like(xs[0])] * (n - 1)
    if name == "gather_to_worker0":
        full = np.concatenate(xs, axis)
        return [full] + [np.zeros_like(full)] * (n - 1)
    if name == "local_slice":
        return [np.split(x, n, axis)[r] for r, x in enumerate(xs)]
    if name == "local_embed":
        out = []
        for r, x in enumerate(xs):
            parts = [np.zeros_like(x)] * n
            parts[r] = x
            out.append(np.concatenate(parts, axis))
        return out
    raise AssertionError(name)


def finite_differences(k: int, xs: list, ws: list, eps: float = 1e-6) -> list:
    """d(sum over workers of sum(y_r * w_r))/dx_r by central differences of the reference."""
    def total(values):
        return sum(float(np.sum(y * w)) for y, w in zip(reference(k, values), ws))

    grads = []
    for r in range(len(xs)):
        g = np.zeros_like(xs[r])
        for i in np.ndindex(xs[r].shape):
            plus = [x.copy() for x in xs]
            minus = [x.copy() for x in xs]
            plus[r][i] += eps
            minus[r][i] -= eps
            g[i] = (total(plus) - total(minus)) / (2 * eps)
        grads.append(g)
    return grads


@pytest.mark.parametrize("workers", [2, 3])
def test_collective_values_and_gradients(workers, tmp_path):
    need("torch")
    codes, errs, _ = W.spawn("collectives", workers, tmp_path, timeout=240)
    assert codes == [0] * workers, errs
    got = [np.load(tmp_path / f"rank{r}.npz") for r in range(workers)]
    for k, (name, attrs, _) in enumerate(W.OPS):
        xs = W.inputs(k, workers)
        want = reference(k, xs)
        label = f"{name}{attrs}"
        ws = W.weights(k, workers, want[0].shape)
        fd = finite_differences(k, xs, ws)
        for r in range(workers):
            np.testing.assert_allclose(got[r][f"y{k}"], want[r], rtol=1e-12, atol=1e-12, err_msg=f"{label} value, worker {r}")
            np.testing.assert_allclose(got[r][f"g{k}"], fd[r], rtol=1e-6, atol=1e-7, err_msg=f"{label} gradient, worker {r}")


def test_reference_is_not_trivial():
    """The reference distinguishes the workers (a wrong rank or a missing reduction would not pass)."""
    xs = W.inputs(0, 2)
    assert not np.allclose(reference(0, xs)[0], xs[0])
    assert not np.allclose(reference(8, xs)[0], reference(8, xs)[1])
