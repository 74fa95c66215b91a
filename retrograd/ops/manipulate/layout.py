"""TVM 0.27's layout_transform: out[index_map(i)] = x[i], the positions no input reaches holding pad_value.

The map is an IndexMap (ops/manipulate/index_map.py), printed as TVM prints it, `T.index_map(lambda i0, i1: ...)`.
The output shape is each result's range over the input's index box (TVM's inference for static shapes;
for symbolic dims, a result that is one parameter keeps that dim, others leave the shape unknown). The
transform is linear and injective: its gradient gathers the output gradient at each input's position.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import GradientError, KernelError
from retrograd.ir.expr import const, shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R
from retrograd.ops.manipulate.index_map import IndexMap
from retrograd.ops.registry import REQUIRED, Attr, InferCtx, register


def _to_index_map(v) -> IndexMap:
    if not isinstance(v, IndexMap):
        raise TypeError("expected an index map, T.index_map(lambda i, j: (j, i))")
    return v


def _to_pad(v):
    if v is None or (isinstance(v, int | float) and not isinstance(v, bool)):
        return v
    raise TypeError("expected a number or None")


def _out_shape(m: IndexMap, shape) -> tuple | None:
    """Each result's extent: its range over the index box (a result that is one parameter keeps that
    dim, symbolic or not; one reading a symbolic dim otherwise makes the shape unknown)."""
    if any(d == 0 for d in shape):
        return None
    static = [d if isinstance(d, int) else 1 for d in shape]
    out = []
    for r, (lo, hi) in zip(m.results, m.bounds(static)):
        if isinstance(r, str):
            out.append(shape[int(r[1:])])
            continue
        if any(not isinstance(shape[int(p[1:])], int) for p in m.params_of(len(out))):
            return None
        if lo < 0:
            raise ValueError(f"the index map sends indices below zero (result {len(out)} reaches {lo})")
        out.append(hi + 1)
    return tuple(out)


def _infer(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    m = ctx.attrs["index_map"]
    if x.ndim >= 0 and x.ndim != m.ndim:
        raise ctx.error(f"the index map takes {m.ndim} indices but the tensor has ndim {x.ndim}", 0)
    shape = None
    if x.shape is not None:
        try:
            shape = _out_shape(m, x.shape)
        except (ValueError, ZeroDivisionError) as err:
            raise ctx.error(str(err), 0) from None
    return TensorStructInfo(shape, x.dtype, len(m.results))


def positions(m: IndexMap, shape) -> tuple[list, tuple]:
    """Where each input element goes (one index array per output dim, shaped like the input), and the
    output shape: host-side, shared by the NumPy and torch kernels and the gradient rule."""
    out_shape = _out_shape(m, shape)
    grids = np.indices(shape, dtype=np.int64, sparse=True)
    return [np.broadcast_to(r, shape) for r in m.evaluate(list(grids))], out_shape


def _layout_transform(x, index_map, pad_value=None):
    if x.size == 0:
        raise KernelError(f"R.layout_transform: the tensor of shape {x.shape} is empty")
    pos, out_shape = positions(index_map, x.shape)
    out = np.full(out_shape, 0 if pad_value is None else pad_value, dtype=x.dtype)
    out[tuple(pos)] = x
    return out


def _grad(call, out, g):
    x = call.args[0]
    shape = x.struct_info.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise GradientError("R.layout_transform: the gradient needs a static shape")
    if 0 in shape:  # no element moves (and the result's shape is unknown): an empty gradient
        return [R.zeros(shape_expr(list(shape)), x.struct_info.dtype)]
    pos, out_shape = positions(call.attrs["index_map"], shape)
    flat = np.ravel_multi_index(tuple(pos), out_shape).astype(np.int64)
    picked = R.take(R.reshape(g, shape_expr([int(np.prod(out_shape))])), const(flat.reshape(-1)), axis=0)
    return [R.reshape(picked, shape_expr(list(shape)))]


layout_transform = register(
    "relax.layout_transform", ("x",),
    (Attr("index_map", _to_index_map, REQUIRED), Attr("pad_value", _to_pad, None)),
    infer=_infer, kernel=_layout_transform, grad=_grad,
)
