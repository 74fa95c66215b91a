"""ATen's hypot, copysign, lgamma / digamma, logcumsumexp, bucketize / searchsorted, distances (dist, cdist, pdist), and the
index constants triu_indices / tril_indices, as retrograd ops (see aten_ops.py for the table's conventions)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import registrar
from retrograd.frontend.aten_ops import vector_norm
from retrograd.frontend.aten_select import torch_abs
from retrograd.ir.expr import ShapeExpr, const
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


@op("hypot")
def _hypot(cx, a):
    dt = cx.out_dtype()
    x, y = cx.tensor(a["self"], dt), cx.tensor(a["other"], dt)
    return R.sqrt(cx.emit(R.add(cx.emit(R.multiply(x, x)), cx.emit(R.multiply(y, y)))))


def buckets(cx, x, bounds, right: bool):
    """How many boundaries lie below each value (at or below it with right=True): R.bucketize against one
    1-D list; each row of values (..., K) against its own row of boundaries (..., M) by comparisons."""
    x = cx.tensor(x, bounds.struct_info.dtype)
    out = cx.out_dtype()
    if bounds.struct_info.ndim == 1:
        return R.bucketize(x, bounds, out_int32=out == "int32", right=right)
    below = R.less_equal if right else R.less
    hits = cx.emit(below(cx.emit(R.expand_dims(bounds, axis=[-2])), cx.emit(R.expand_dims(x, axis=-1))))
    return R.sum(cx.emit(R.astype(hits, dtype=out)), axis=[-1])


TABLE["bucketize"] = lambda cx, a: buckets(cx, a["self"], a["boundaries"], bool(a.get("right")))


@op("searchsorted")
def _searchsorted(cx, a):
    if a.get("sorter") is not None:
        raise UnsupportedError("searchsorted with a sorter")
    right = bool(a.get("right")) or a.get("side") == "right"
    return buckets(cx, a["self"], a["sorted_sequence"], right)


@op("copysign")
def _copysign(cx, a):
    """|x| with the sign of other (-0.0 counts as negative); the gradient is PyTorch's, 0 at x = 0."""
    dt = cx.out_dtype()
    x, y = cx.tensor(a["self"], dt), cx.tensor(a["other"], dt)
    zero = const(0, dt)
    neg_zero = cx.emit(R.logical_and(cx.emit(R.equal(y, zero)), cx.emit(R.less(cx.emit(R.divide(const(1, dt), y)), zero))))
    negative = cx.emit(R.logical_or(cx.emit(R.less(y, zero)), neg_zero))
    size = cx.emit(torch_abs(x))
    return R.where(negative, cx.emit(R.negative(size)), size)


@op("logcumsumexp")
def _logcumsumexp(cx, a):
    """log of the running sum of exp along a dim, each prefix shifted by its own maximum (so that values far
    below a later maximum do not underflow): O(n²) in the dim's extent."""
    x = a["self"]
    d = a["dim"] % max(x.struct_info.ndim, 1)
    n = x.struct_info.shape[d] if x.struct_info.ndim else 1
    if not isinstance(n, int):
        raise UnsupportedError("logcumsumexp over a symbolic dim")
    if not x.struct_info.ndim:
        return x
    dt = x.struct_info.dtype
    trail = (1,) * (x.struct_info.ndim - d - 1)
    i, j = np.ogrid[:n, :n]
    seen = const((j <= i).reshape((n, n) + trail))
    rows = cx.emit(R.expand_dims(x, axis=[d]))  # (..., 1, n, ...): position i reads x[j] along d + 1
    prefix = cx.emit(R.where(seen, rows, const(-np.inf, dt)))
    top = cx.emit(R.grad.no_grad(cx.emit(R.max(prefix, axis=[d + 1], keepdims=True))))
    top = cx.emit(R.where(cx.emit(R.isfinite(top)), top, const(0, dt)))
    total = cx.emit(R.sum(cx.emit(R.exp(cx.emit(R.subtract(prefix, top)))), axis=[d + 1]))
    return R.add(cx.emit(R.log(total)), cx.emit(R.squeeze(top, axis=[d + 1])))


@op("triu_indices", "tril_indices")
def _tri_indices(cx, a):
    upper = cx.node.target._schema.name.endswith("triu_indices")
    rows, cols = (np.triu_indices if upper else np.tril_indices)(a["row"], a["offset"], a["col"])
    return const(np.stack([rows, cols]).astype(cx.out_dtype()))


TABLE["dist"] = lambda cx, a: vector_norm(cx, {"self": cx.emit(R.subtract(*cx.operands(a["self"], a["other"]))),
                                               "p": a.get("p", 2)})


def pairwise(cx, x1, x2, p):
    """The p-norm distance of every row of x1 (..., P, M) to every row of x2 (..., R, M): (..., P, R), as
    PyTorch's (zero gradient at a zero distance)."""
    diff = cx.emit(R.subtract(cx.emit(R.expand_dims(x1, axis=[-2])), cx.emit(R.expand_dims(x2, axis=[-3]))))
    return vector_norm(cx, {"self": diff, "p": p, "dim": [-1]})


TABLE["_cdist_forward"] = lambda cx, a: pairwise(cx, a["x1"], a["x2"], a["p"])


@op("_pdist_forward")
def _pdist(cx, a):
    """The distances of rows i < j, row-major: the upper triangle of the pairwise distances."""
    x = a["self"]
    n = x.struct_info.shape[0]
    if not isinstance(n, int):
        raise UnsupportedError("pdist over a symbolic number of rows")
    rows, cols = np.triu_indices(n, 1)
    flat = cx.emit(R.reshape(cx.emit(pairwise(cx, x, x, a.get("p", 2.0))), ShapeExpr((n * n,))))
    return R.take(flat, const((rows * n + cols).astype("int64")), axis=0)


# Lanczos' approximation (g = 7, nine terms: about 1e-15 relative) of log Γ(x) for x >= 1/2, and Euler's
# reflection Γ(x) Γ(1 - x) = π / sin(πx) below; composed of primitives, so it has a gradient everywhere
# (digamma) and digamma has one too (trigamma).
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _gamma_parts(cx, x, digamma: bool):
    """log Γ(x), or ψ(x) with `digamma`: the Lanczos value at max(x, 1 - x), with the reflection term where
    x < 1/2. The reflection's sin reads 1/4 where unused, so no infinite partial derivative of a discarded
    branch meets a zero cotangent."""
    dt = x.struct_info.dtype
    c = lambda v: const(v, dt)  # noqa: E731
    low = cx.emit(R.less(x, c(0.5)))
    z = cx.emit(R.subtract(cx.emit(R.where(low, cx.emit(R.subtract(c(1.0), x)), x)), c(1.0)))
    terms = [cx.emit(R.add(z, c(float(i)))) for i in range(1, len(_LANCZOS))]
    series = c(_LANCZOS[0])
    slope = c(0.0)
    for coef, zi in zip(_LANCZOS[1:], terms):
        series = cx.emit(R.add(series, cx.emit(R.divide(c(coef), zi))))
        if digamma:
            slope = cx.emit(R.subtract(slope, cx.emit(R.divide(c(coef), cx.emit(R.multiply(zi, zi))))))
    t = cx.emit(R.add(z, c(7.5)))
    if digamma:
        value = cx.emit(R.add(cx.emit(R.subtract(cx.emit(R.add(cx.emit(R.log(t)), cx.emit(R.divide(
            cx.emit(R.add(z, c(0.5))), t)))), c(1.0))), cx.emit(R.divide(slope, series))))
    else:
        value = cx.emit(R.add(cx.emit(R.subtract(cx.emit(R.multiply(cx.emit(R.add(z, c(0.5))), cx.emit(R.log(t)))), t)),
                              cx.emit(R.add(cx.emit(R.log(series)), c(0.5 * math.log(2 * math.pi))))))
    angle = cx.emit(R.multiply(cx.emit(R.where(low, x, c(0.25))), c(math.pi)))
    if digamma:  # ψ(x) = ψ(1 - x) - π / tan(πx)
        reflected = cx.emit(R.subtract(value, cx.emit(R.divide(c(math.pi), cx.emit(R.tan(angle))))))
    else:  # log Γ(x) = log π - log |sin(πx)| - log Γ(1 - x)
        reflected = cx.emit(R.subtract(cx.emit(R.subtract(c(math.log(math.pi)), cx.emit(R.log(cx.emit(R.abs(
            cx.emit(R.sin(angle)))))))), value))
    return R.where(low, reflected, value)


TABLE["lgamma"] = lambda cx, a: _gamma_parts(cx, cx.tensor(a["self"], cx.out_dtype()), False)
TABLE["digamma"] = lambda cx, a: _gamma_parts(cx, cx.tensor(a["self"], cx.out_dtype()), True)
