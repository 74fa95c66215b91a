"""ATen's hypot, bucketize, distances (dist, cdist, pdist), and the index constants triu_indices /
tril_indices, as retrograd ops (see aten_ops.py for the table's conventions)."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import registrar
from retrograd.frontend.aten_ops import vector_norm
from retrograd.ir.expr import ShapeExpr, const
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


@op("hypot")
def _hypot(cx, a):
    dt = cx.out_dtype()
    x, y = cx.tensor(a["self"], dt), cx.tensor(a["other"], dt)
    return R.sqrt(cx.emit(R.add(cx.emit(R.multiply(x, x)), cx.emit(R.multiply(y, y)))))


@op("bucketize")
def _bucketize(cx, a):
    """The bucket of each value: how many boundaries lie below it (at or below it with right=True)."""
    x, bounds = a["self"], a["boundaries"]
    below = R.less_equal if a.get("right") else R.less
    hits = cx.emit(below(cx.emit(R.expand_dims(bounds, axis=list(range(x.struct_info.ndim)))),
                         cx.emit(R.expand_dims(x, axis=-1))))
    return R.sum(cx.emit(R.astype(hits, dtype=cx.out_dtype())), axis=[-1])


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
