"""ATen's ops that choose among values (maximum / minimum, fmax / fmin, max / min along a dim, median,
kthvalue, cummax / cummin), and abs, as retrograd ops with PyTorch's rules for ties and NaN (see aten_ops.py for
the table's conventions).

TVM's `R.maximum(x, y)` is one comparison and a select: a NaN in `x` gives `y`, and at a tie the whole
gradient goes to one side. PyTorch propagates a NaN from either side and splits a tie's gradient in half,
so float operands are written as two selects around their midpoint. Integers keep the single op.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import is_float, ndim, registrar
from retrograd.ir.dtypes import reduction_identity
from retrograd.ir.expr import TupleGetItem, const
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


def torch_extremum(cx, x, y, take_larger: bool):
    """torch.maximum / minimum of two operands: where one wins, it; at a tie or a NaN, the midpoint
    x/2 + y/2 (exact at ties of normal numbers and infinities, NaN when either is NaN), whose gradient
    is half to each side."""
    dt = cx.out_dtype()
    x, y = cx.operands(x, y, dtype=dt)
    if not is_float(dt):
        return (R.maximum if take_larger else R.minimum)(x, y)
    x_wins, y_wins = (R.greater, R.less) if take_larger else (R.less, R.greater)
    half = const(0.5, dt)
    mid = cx.emit(R.add(cx.emit(R.multiply(x, half)), cx.emit(R.multiply(y, half))))
    return R.where(cx.emit(x_wins(x, y)), x, cx.emit(R.where(cx.emit(y_wins(x, y)), y, mid)))


def torch_abs(x):
    """|x| with PyTorch's gradient sign(x), zero at 0 (TVM's abs gradient is +1 there): x * sign(x), the
    same value (NaN stays NaN)."""
    if not is_float(x.struct_info.dtype):
        return R.abs(x)
    return R.multiply(x, R.sign(x))


TABLE["abs"] = lambda cx, a: torch_abs(cx.tensor(a["self"], cx.out_dtype()))
TABLE["maximum"] = lambda cx, a: torch_extremum(cx, a["self"], a["other"], True)
TABLE["minimum"] = lambda cx, a: torch_extremum(cx, a["self"], a["other"], False)


@op("fmax", "fmin")
def _fmax(cx, a):
    """NaN only where both are NaN; a tie's gradient goes to `self` (PyTorch's fmax / fmin backward)."""
    dt = cx.out_dtype()
    x, y = cx.operands(a["self"], a["other"], dtype=dt)
    keep = R.greater_equal if cx.node.target._schema.name.endswith("fmax") else R.less_equal
    if not is_float(dt):
        return (R.maximum if keep is R.greater_equal else R.minimum)(x, y)
    take_x = cx.emit(R.logical_or(cx.emit(keep(x, y)), cx.emit(R.isnan(y))))
    return R.where(take_x, x, y)


def read_at(cx, x, idx, d: int, keep: bool):
    """(x's values at the indices idx along dim d, idx), idx holding one index (kept as a size-1 dim): the
    value is gathered, so its gradient goes to that index, as PyTorch's for max / kthvalue along a dim."""
    vals = cx.emit(R.gather_elements(x, idx, axis=d))
    if keep:
        return vals, idx
    return R.squeeze(vals, axis=[d]), R.squeeze(idx, axis=[d])


@op("max", "min")
def _max_min(cx, a):
    name = cx.node.target._schema.name.split("::")[1]
    x = a["self"]
    if a.get("other") is not None:
        return torch_extremum(cx, x, a["other"], name == "max")
    if a.get("dim") is None:
        return (R.max if name == "max" else R.min)(x)
    keep = bool(a.get("keepdim", False))
    d = a["dim"] % max(ndim(x), 1)
    # R.max would share the gradient among ties; PyTorch's follows the returned index.
    return read_at(cx, x, cx.emit((R.argmax if name == "max" else R.argmin)(x, axis=d, keepdims=True)), d, keep)


@op("kthvalue")
def _kthvalue(cx, a):
    """The k-th smallest along a dim and its index (a stable sort's; NaN sorts last), the gradient following
    the index."""
    x = a["self"]
    d = a.get("dim", -1) % max(ndim(x), 1)
    order = cx.emit(R.argsort(x, axis=d, dtype="int64"))
    return read_at(cx, x, cx.emit(R.take(order, const(np.array([a["k"] - 1], "int64")), axis=d)), d,
                   bool(a.get("keepdim", False)))


@op("median")
def _median(cx, a):
    """The lower median; along a dim with its index (the gradient follows the index, as PyTorch's)."""
    x = a["self"]
    if a.get("dim") is None:
        return R.median(x)
    out = cx.emit(R.median(x, axis=[a["dim"] % max(ndim(x), 1)], keepdims=bool(a.get("keepdim", False))))
    return TupleGetItem(out, 0), TupleGetItem(out, 1)


@op("cummax", "cummin")
def _cummax(cx, a):
    """PyTorch's running maximum (minimum) and its index: the last index of the best value so far, or of
    the last NaN so far. Position i reads x[i], x[i-1], ..., x[0] (then fill) and takes the first best
    with argmax, which ranks NaN above all (as PyTorch's latch); the value is read at that index, so the
    gradient follows it. O(n²) in the axis' extent: one (n, n) block per position of the other axes."""
    x = a["self"]
    larger = cx.node.target._schema.name.endswith("cummax")
    if ndim(x) == 0:
        return x, const(0, "int64")
    d = a["dim"] % ndim(x)
    n = x.struct_info.shape[d]
    if not isinstance(n, int):
        raise UnsupportedError(f"from_exported_program: {cx.node.name}: cummax/cummin needs a static extent "
                               f"along dim {d}, not {n}")
    dt = x.struct_info.dtype
    i, k = np.ogrid[:n, :n]
    trail = (1,) * (ndim(x) - d - 1)
    back = cx.emit(R.take(x, const(np.where(k <= i, i - k, 0).astype("int64")), axis=d))
    fill = reduction_identity("max" if larger else "min", dt)
    seen = cx.emit(R.where(const((k <= i).reshape((n, n) + trail)), back, const(fill, dt)))
    best = cx.emit((R.argmax if larger else R.argmin)(seen, axis=d + 1))
    idx = cx.emit(R.subtract(const(np.arange(n, dtype="int64").reshape((n,) + trail)), best))
    return R.gather_elements(x, idx, axis=d), idx
