"""ATen's creation, indexing, scatter and linear-algebra ops as retrograd ops (see aten_ops.py for the
table's conventions)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import is_float, ndim, registrar
from retrograd.frontend.aten_ops import scaled
from retrograd.ir.dtypes import reduction_identity
from retrograd.ir.expr import Expr, PrimValue, ShapeExpr, Tuple, TupleGetItem, const
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


# -- creation ---------------------------------------------------------------------------------
def _fill(cx, value):
    dt = cx.out_dtype()
    return R.full(cx.out_shape(), cx.tensor(value, dt), dtype=dt)


# A fresh tensor's strides (empty_strided, what run_decompositions makes of empty) change no value.
TABLE["zeros"] = TABLE["new_zeros"] = TABLE["zeros_like"] = TABLE["empty"] = TABLE["new_empty"] = \
    TABLE["empty_like"] = TABLE["empty_strided"] = TABLE["new_empty_strided"] = lambda cx, a: _fill(cx, 0)
TABLE["ones"] = TABLE["new_ones"] = TABLE["ones_like"] = lambda cx, a: _fill(cx, 1)
TABLE["full"] = TABLE["new_full"] = TABLE["full_like"] = lambda cx, a: _fill(cx, a["fill_value"])
TABLE["scalar_tensor"] = lambda cx, a: cx.tensor(a["s"], cx.out_dtype())
TABLE["fill"] = lambda cx, a: R.full(cx.out_shape(), cx.tensor(a["value"], cx.out_dtype()), dtype=cx.out_dtype())


@op("arange")
def _arange(cx, a):
    dt = cx.out_dtype()
    start, end, step = a.get("start", 0), a["end"], a.get("step", 1)
    if isinstance(end, str) or isinstance(start, str):
        if start != 0 or step != 1:
            raise UnsupportedError("arange with a symbolic bound: only arange(0, n, 1)")
        ones = cx.emit(R.ones(ShapeExpr((end,)), dtype=dt))
        return R.cumsum(ones, axis=0, exclusive=True)
    return const(np.arange(start, end, step, dtype=dt))


# -- indexing ---------------------------------------------------------------------------------
@op("index_select")
def _index_select(cx, a):
    return R.take(a["self"], a["index"], axis=a["dim"] % ndim(a["self"]), mode="fast")


@op("gather")
def _gather(cx, a):
    return R.gather_elements(a["self"], a["index"], axis=a["dim"] % ndim(a["self"]))


@op("index")
def _index(cx, a):
    x, idx = a["self"], list(a["indices"])
    while idx and idx[-1] is None:
        idx.pop()
    present = [i for i, t in enumerate(idx) if t is not None]
    if any(t.struct_info.dtype == "bool" for t in idx if t is not None):
        raise UnsupportedError("indexing with a boolean mask (a data-dependent size)")
    if len(present) == 1:
        return R.take(x, idx[present[0]], axis=present[0], mode="fast")
    if present == list(range(len(idx))):
        return R.index_tensor(x, Tuple(tuple(idx)))
    # x[:, i, j] (a full slice before or between index tensors): the indexed axes moved to the front,
    # indexed there, and the broadcast index dims moved back where PyTorch puts them: in place of the
    # indexed axes when those are adjacent, first otherwise.
    n = ndim(x)
    rest = [d for d in range(n) if d not in present]
    moved = cx.emit(R.permute_dims(x, axes=present + rest))
    y = cx.emit(R.index_tensor(moved, Tuple(tuple(idx[d] for d in present))))
    if present != list(range(present[0], present[-1] + 1)):
        return y
    k = max(idx[d].struct_info.ndim for d in present)
    before = present[0]
    return R.permute_dims(y, axes=[k + i for i in range(before)] + list(range(k)) + list(range(k + before, k + len(rest))))


@op("index_put")
def _index_put(cx, a):
    """x[i0, :, i2, ...] = values (+= with accumulate). Every dim gets an index tensor over the shape of
    x[indices] as PyTorch lays it out (the broadcast index dims in place of adjacent indexed dims, first
    otherwise; a full slice's dim as an arange), so that R.index_put sees one index per dim."""
    x, idx = a["self"], list(a["indices"])
    vals = cx.tensor(a["values"], cx.out_dtype())
    shape = tuple(x.struct_info.shape)
    idx += [None] * (len(shape) - len(idx))
    present = [d for d, t in enumerate(idx) if t is not None]
    if len(present) < len(shape):
        lead = np.broadcast_shapes(*(tuple(idx[d].struct_info.shape) for d in present))
        sliced = [d for d in range(len(shape)) if idx[d] is None]
        if present == list(range(present[0], present[-1] + 1)):
            layout = [d for d in sliced if d < present[0]] + [None] + [d for d in sliced if d > present[-1]]
        else:
            layout = [None] + sliced
        at = layout.index(None)
        full = tuple(n for d in layout for n in (lead if d is None else (shape[d],)))
        if not all(isinstance(n, int) for n in full):
            raise UnsupportedError("index_put over symbolic dims")

        def spread(t, tshape, first):
            return cx.emit(R.broadcast_to(cx.emit(R.reshape(t, ShapeExpr(
                (1,) * first + tshape + (1,) * (len(full) - first - len(tshape))))), ShapeExpr(full)))

        for d in range(len(shape)):
            if idx[d] is not None:
                t = idx[d]
                tshape = (1,) * (len(lead) - ndim(t)) + tuple(t.struct_info.shape)
                idx[d] = spread(t, tshape, at)
            else:
                p = layout.index(d)
                idx[d] = spread(const(np.arange(shape[d], dtype="int64")), (shape[d],), p + (len(lead) - 1 if p > at else 0))
        vals = cx.emit(R.broadcast_to(vals, ShapeExpr(full)))
    return R.index_put(x, Tuple(tuple(idx)), vals, accumulate=bool(a["accumulate"]))


@op("masked_scatter")
def _masked_scatter(cx, a):
    """x with its masked positions, in row-major order, taking source's leading elements: the k-th masked
    position reads source's k-th (an exclusive cumulative count of the mask), the rest keep x."""
    x, src = a["self"], a["source"]
    shape = x.struct_info.shape
    size = math.prod(shape) if all(isinstance(n, int) for n in shape) else None
    count = math.prod(src.struct_info.shape) if all(isinstance(n, int) for n in src.struct_info.shape) else None
    if size is None or count is None:
        raise UnsupportedError("masked_scatter over symbolic dims")
    mask = cx.emit(R.reshape(cx.emit(R.broadcast_to(a["mask"], ShapeExpr(shape))), ShapeExpr((size,))))
    slot = cx.emit(R.cumsum(cx.emit(R.astype(mask, dtype="int64")), axis=0, exclusive=True))
    slot = cx.emit(R.minimum(slot, const(max(count - 1, 0), "int64")))
    taken = cx.emit(R.take(cx.emit(R.reshape(src, ShapeExpr((count,)))), slot, axis=0))
    flat = cx.emit(R.where(mask, taken, cx.emit(R.reshape(x, ShapeExpr((size,))))))
    return R.reshape(flat, ShapeExpr(shape))


@op("unfold")
def _unfold(cx, a):
    """Tensor.unfold(dim, size, step): the windows along `dim` (a take of a (windows, size) index grid),
    each window's elements moved to a new last dim."""
    x = a["self"]
    d = a["dimension"] % max(ndim(x), 1)
    n, size, step = x.struct_info.shape[d] if ndim(x) else 1, a["size"], a["step"]
    if not isinstance(n, int):
        raise UnsupportedError("unfold over a symbolic dim")
    grid = np.arange(0, n - size + 1, step)[:, None] + np.arange(size)[None, :]
    if not ndim(x):
        return R.reshape(x, ShapeExpr((1,)))
    y = cx.emit(R.take(x, const(grid.astype("int64")), axis=d, mode="fast"))
    k = ndim(x) + 1
    return y if d == k - 2 else R.permute_dims(y, axes=[i for i in range(k) if i != d + 1] + [d + 1])


@op("eye")
def _eye(cx, a):
    m = a.get("m")
    return const(np.eye(a["n"], a["n"] if m is None else m, dtype=cx.out_dtype()))


@op("broadcast_tensors")
def _broadcast_tensors(cx, a):
    return [R.broadcast_to(t, cx.out_shape(i)) for i, t in enumerate(a["tensors"])]


@op("scatter", "scatter_add")
def _scatter(cx, a):
    x = a["self"]
    src = a.get("src", a.get("value"))
    add = cx.node.target._schema.name.endswith("scatter_add") or a.get("reduce") == "add"
    if a.get("reduce") not in (None, "add"):
        raise UnsupportedError(f"scatter with reduce={a['reduce']!r}")
    if not isinstance(src, Expr):
        src = R.full(ShapeExpr(a["index"].struct_info.shape), cx.tensor(src, cx.out_dtype()), dtype=cx.out_dtype())
    return R.scatter_elements(x, a["index"], src, axis=a["dim"] % ndim(x), reduction="add" if add else "update")


@op("scatter_reduce")
def _scatter_reduce(cx, a):
    """PyTorch's scatter_reduce (sum, prod, mean, amax, amin; include_self or not): sum and mean as
    scatter-adds (PyTorch's mean divides by the count), the others as R.scatter_elements' reductions, whose
    gradients are PyTorch's. Without include_self, written positions start from the reduction's identity."""
    x, idx, src, how = a["self"], a["index"], a["src"], a["reduce"]
    axis, keep_self = a["dim"] % max(ndim(x), 1), bool(a.get("include_self", True))
    dt = x.struct_info.dtype

    def scatter(base, upd, reduction):
        return cx.emit(R.scatter_elements(base, idx, upd, axis=axis, reduction=reduction))

    def filled(like, v):
        return cx.emit(R.full_like(like, const(v, dt)))

    ones = filled(src, 1)
    touched = None if keep_self else cx.emit(R.greater(scatter(filled(x, 0), ones, "update"), const(0, dt)))
    if how in ("sum", "mean"):
        base = x if keep_self else cx.emit(R.where(touched, const(0, dt), x))
        total = scatter(base, src, "add")
        if how == "sum":
            return total
        if not is_float(dt):
            raise UnsupportedError("scatter_reduce mean of an integer tensor")
        count = scatter(filled(x, 1 if keep_self else 0), ones, "add")
        return R.divide(total, cx.emit(R.maximum(count, const(1, dt))))
    if how == "prod":
        base = x if keep_self else cx.emit(R.where(touched, const(1, dt), x))
        return scatter(base, src, "mul")
    if how not in ("amax", "amin"):
        raise UnsupportedError(f"scatter_reduce with reduce={how!r}")
    base = x if keep_self else cx.emit(R.where(touched, const(reduction_identity(how[1:], dt), dt), x))
    return scatter(base, src, "max" if how == "amax" else "min")


@op("topk")
def _topk(cx, a):
    t = cx.emit(R.topk(a["self"], k=a["k"], axis=a["dim"], largest=bool(a["largest"]), ret_type="both", dtype="int64"))
    return TupleGetItem(t, 0), TupleGetItem(t, 1)


@op("sort")
def _sort(cx, a):
    x, d, desc = a["self"], a.get("dim", -1), bool(a.get("descending", False))
    return R.sort(x, axis=d, descending=desc), R.argsort(x, axis=d, descending=desc, dtype="int64")


@op("argsort")
def _argsort(cx, a):
    return R.argsort(a["self"], axis=a.get("dim", -1), descending=bool(a.get("descending", False)), dtype="int64")


@op("one_hot")
def _one_hot(cx, a):
    n = a["num_classes"]
    if n is None or n < 0:
        raise UnsupportedError("one_hot without num_classes (a data-dependent size)")
    return R.one_hot(a["self"], PrimValue(1, "int64"), PrimValue(0, "int64"), depth=n)


# -- linear algebra ---------------------------------------------------------------------------
@op("matmul", "mm", "bmm")
def _matmul(cx, a):
    return R.matmul(a["self"], a.get("other", a.get("mat2")))


@op("addmm", "baddbmm", "addbmm")
def _addmm(cx, a):
    dt = cx.out_dtype()
    prod = cx.emit(scaled(cx, cx.emit(R.matmul(a.get("mat1", a.get("batch1")), a.get("mat2", a.get("batch2")))), a["alpha"], dt))
    return R.add(scaled(cx, a["self"], a["beta"], dt), prod)


@op("outer", "ger")
def _outer(cx, a):
    return R.outer(a["self"], a["vec2"])


@op("einsum")
def _einsum(cx, a):
    return R.einsum(Tuple(tuple(a["tensors"])), subscripts=a["equation"])


def _bounds(size, start, end):
    start = 0 if start is None else start
    end = size if end is None or (isinstance(end, int) and isinstance(size, int) and end > size) else end
    if isinstance(size, int):
        start, end = (start + size if start < 0 else start), (end + size if end < 0 else end)
    if not all(isinstance(v, int) for v in (start, end)):
        raise UnsupportedError("a slice with symbolic bounds")
    return start, end


@op("slice_scatter")
def _slice_scatter(cx, a):
    x = a["self"]
    d = a["dim"] % ndim(x)
    start, end = _bounds(x.struct_info.shape[d], a["start"], a["end"])
    src = cx.tensor(a["src"], cx.out_dtype())
    return R.slice_scatter(x, src, PrimValue(start, "int64"), PrimValue(end, "int64"), PrimValue(a["step"], "int64"), axis=d)


@op("select_scatter")
def _select_scatter(cx, a):
    x = a["self"]
    d = a["dim"] % ndim(x)
    i = a["index"] + (x.struct_info.shape[d] if a["index"] < 0 else 0)
    src = cx.emit(R.expand_dims(cx.tensor(a["src"], cx.out_dtype()), axis=d))
    return R.slice_scatter(x, src, PrimValue(i, "int64"), PrimValue(i + 1, "int64"), PrimValue(1, "int64"), axis=d)


@op("diagonal")
def _diagonal(cx, a):
    """x.diagonal(offset, dim1, dim2): the two dims moved last and merged, the diagonal's flat positions taken
    (its gradient: a scatter back); the diagonal is the result's last dim, as in PyTorch."""
    x = a["self"]
    n = ndim(x)
    d1, d2, off = a["dim1"] % n, a["dim2"] % n, a["offset"]
    shape = x.struct_info.shape
    if shape is None or not isinstance(shape[d1], int) or not isinstance(shape[d2], int):
        raise UnsupportedError("diagonal over symbolic dims")
    rows, cols = shape[d1], shape[d2]
    first_row, first_col = max(-off, 0), max(off, 0)
    length = max(0, min(rows - first_row, cols - first_col))
    rest = [d for d in range(n) if d not in (d1, d2)]
    moved = cx.emit(R.permute_dims(x, axes=rest + [d1, d2]))
    flat = cx.emit(R.reshape(moved, ShapeExpr(tuple(shape[d] for d in rest) + (rows * cols,))))
    at = (np.arange(length) + first_row) * cols + np.arange(length) + first_col
    return R.take(flat, const(at.astype("int64")), axis=-1, mode="fast")
