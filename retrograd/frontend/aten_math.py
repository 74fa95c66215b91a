"""ATen's hypot and bucketize, and the index constants triu_indices / tril_indices, as retrograd ops (see
aten_ops.py for the table's conventions)."""

from __future__ import annotations

import numpy as np

from retrograd.frontend.aten_common import registrar
from retrograd.ir.expr import const
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
