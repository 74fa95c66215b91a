"""image.affine_grid and image.grid_sample (TVM's (N, 2, H_out, W_out) grids) with grad.grid_sample_backward."""

# affine_grid is linear in theta: its gradient contracts g with the constant coordinate basis. grid_sample
# (bilinear, nearest; zeros and border padding) differentiates in both the data and the grid (PyTorch's
# convention: nearest gives the grid no gradient). grid_sample_backward's own gradient (second order)
# differentiates grid_sample written with elementwise ops and gather_elements (ComposedVjp).

from __future__ import annotations

import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import TupleGetItem, const, prim_value, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.composed import ComposedVjp
from retrograd.ops.create import shape_arg
from retrograd.ops.kernels import sampling
from retrograd.ops.registry import Arg, Attr, InferCtx, register


def _infer_affine_grid(ctx: InferCtx) -> TensorStructInfo:
    theta = ctx.float_tensor(0)
    size = shape_arg(ctx, 1)
    if size.ndim not in (-1, 2, 3):
        raise ctx.error(f"size must have 2 (H, W) or 3 (D, H, W) entries, got {size.ndim}", 1)
    if theta.ndim not in (-1, 3):
        raise ctx.error(f"data must be 3-D (batch, ndim, ndim + 1), got {theta.ndim}-D", 0)
    if theta.shape is None or size.values is None:
        return TensorStructInfo(None, theta.dtype, -1 if size.ndim == -1 else size.ndim + 2)
    nd = len(size.values)
    for got, want in zip(theta.shape[1:], (nd, nd + 1)):
        if isinstance(got, int) and got != want:
            raise ctx.error(f"data must be (batch, {nd}, {nd + 1}) for a {nd}-D size, got {theta.shape}", 0)
    return TensorStructInfo((theta.shape[0], nd, *size.values), theta.dtype)


def _affine_grid_grad(call, out, g):
    # Linear in theta: d theta[n, d, c] = sum over positions of g[n, d, p] * basis[c, p].
    theta = call.args[0]
    s = out.struct_info
    if s.shape is None or not all(isinstance(d, int) for d in s.shape[1:]):
        raise GradientError(f"R.image.affine_grid: the gradient needs a static size, got {s}", call.span)
    size = s.shape[2:]
    nd = len(size)
    basis = sampling.grid_basis(size, call.attrs["align_corners"], s.dtype).reshape(nd + 1, -1)
    flat = R.reshape(g, shape_expr((s.shape[0], nd, basis.shape[1])))
    return [R.matmul(flat, const(basis.T.copy(), s.dtype)), None]


affine_grid = register(
    "relax.image.affine_grid",
    ("data", Arg("size", kind="shape")),
    (Attr("align_corners", at.to_bool, True),),
    infer=_infer_affine_grid,
    kernel=sampling.affine_grid,
    grad=_affine_grid_grad,
)

GRID_SAMPLE_ATTRS = (
    Attr("method", at.one_of("bilinear", "nearest", "bicubic"), "bilinear"),
    Attr("layout", at.layout("NCHW"), "NCHW"),
    Attr("padding_mode", at.one_of("zeros", "border", "reflection"), "zeros"),
    Attr("align_corners", at.to_bool, False),
)


def _grid_sample_out(ctx: InferCtx, d: int, gi: int) -> TensorStructInfo:
    data, grid = ctx.tensor(d), ctx.tensor(gi)
    for i, t, what in ((d, data, "data"), (gi, grid, "grid")):
        if t.ndim not in (-1, 4):
            raise ctx.error(f"the {what} must be 4-D, got {t.ndim}-D", i)
        if t.dtype and not is_float_dtype(t.dtype):
            raise ctx.error(f"the {what} must be a float tensor, got {t.dtype}", i)
    if data.shape is None or grid.shape is None:
        return TensorStructInfo(None, data.dtype, 4)
    layout = ctx.attrs["layout"]
    n, c = data.shape[layout.index("N")], data.shape[layout.index("C")]
    if isinstance(grid.shape[1], int) and grid.shape[1] != 2:
        raise ctx.error(f"the grid must be (batch, 2, H_out, W_out), got {grid.shape}", gi)
    dims = {"N": n, "C": c, "H": grid.shape[2], "W": grid.shape[3]}
    return TensorStructInfo(tuple(dims[ch] for ch in layout), data.dtype)


def _grid_sample_grad(call, out, g):
    back = R.grad.grid_sample_backward(g, *call.args, **call.attrs)
    return [TupleGetItem(back, 0), TupleGetItem(back, 1)]


grid_sample = register(
    "relax.image.grid_sample",
    ("data", "grid"),
    GRID_SAMPLE_ATTRS,
    infer=lambda ctx: _grid_sample_out(ctx, 0, 1),
    kernel=sampling.grid_sample,
    grad=_grid_sample_grad,
)


def _infer_grid_sample_backward(ctx: InferCtx) -> TupleStructInfo:
    expected = _grid_sample_out(ctx, 1, 2)
    g = ctx.tensor(0)
    if expected.shape is not None and g.shape is not None and g.shape != expected.shape or g.dtype != expected.dtype:
        raise ctx.error(f"output_grad must be shaped like grid_sample's result ({expected}), got {g}", 0)
    return TupleStructInfo((ctx.tensor(1), ctx.tensor(2)))


def _composed_grid_sample(data, grid, *, method, layout, padding_mode, align_corners, span=None):
    """grid_sample (NCHW; bilinear or nearest; zeros or border padding) with elementwise ops and
    gather_elements: the same taps and weights as the kernel, so the same derivatives."""
    ds, gs = data.struct_info.shape, grid.struct_info.shape
    if ds is None or gs is None or not all(isinstance(d, int) for d in (*ds, *gs)):
        raise GradientError(f"R.grad.grid_sample_backward: the gradient needs static shapes, got {ds} and {gs}", span)
    if layout != "NCHW" or method not in ("bilinear", "nearest") or padding_mode not in ("zeros", "border"):
        raise GradientError(
            f"R.grad.grid_sample_backward: no gradient for layout={layout}, method={method}, padding_mode="
            f"{padding_mode} (the kernel supports NCHW, bilinear/nearest, zeros/border)", span
        )
    (n, c, h, w), (_, _, ho, wo) = ds, gs
    dtype, length = data.struct_info.dtype, ho * wo
    num = lambda v: const(float(v), dtype)  # noqa: E731

    def coord(i, size):
        v = R.reshape(R.take(grid, const(np.array([i], "int64")), axis=1), shape_expr((n, length)))
        if align_corners:
            v = R.multiply(R.add(v, num(1)), num((size - 1) / 2))
        else:
            v = R.subtract(R.multiply(R.add(v, num(1)), num(size / 2)), num(0.5))
        return R.clip(v, prim_value(0.0), prim_value(float(size - 1))) if padding_mode == "border" else v

    ix, iy = coord(0, w), coord(1, h)
    if method == "nearest":
        taps = [(R.floor(R.add(ix, num(0.5))), R.floor(R.add(iy, num(0.5))), None)]
    else:
        x0, y0 = R.floor(ix), R.floor(iy)
        tx, ty = R.subtract(ix, x0), R.subtract(iy, y0)
        ux, uy = R.subtract(num(1), tx), R.subtract(num(1), ty)
        x1, y1 = R.add(x0, num(1)), R.add(y0, num(1))
        taps = [(x0, y0, R.multiply(ux, uy)), (x1, y0, R.multiply(tx, uy)),
                (x0, y1, R.multiply(ux, ty)), (x1, y1, R.multiply(tx, ty))]
    flat_data = R.reshape(data, shape_expr((n, c, h * w)))
    out = None
    for px, py, wt in taps:
        inside = R.logical_and(R.logical_and(R.greater_equal(px, num(0)), R.less_equal(px, num(w - 1))),
                               R.logical_and(R.greater_equal(py, num(0)), R.less_equal(py, num(h - 1))))
        inside = R.astype(inside, dtype)
        wt = inside if wt is None else R.multiply(wt, inside)
        clipped = [R.clip(p, prim_value(0.0), prim_value(float(size - 1))) for p, size in ((px, w), (py, h))]
        flat = R.astype(R.add(R.multiply(clipped[1], num(w)), clipped[0]), "int64")
        index = R.broadcast_to(R.expand_dims(flat, [1]), shape_expr((n, c, length)))
        term = R.multiply(R.gather_elements(flat_data, index, axis=2), R.expand_dims(wt, [1]))
        out = term if out is None else R.add(out, term)
    return R.reshape(out, shape_expr((n, c, ho, wo)))


def _grid_sample_backward_grad(call, out, g):
    form = lambda x, grid: _composed_grid_sample(x, grid, **call.attrs, span=call.span)  # noqa: E731
    return ComposedVjp(call.args[0], call.args[1:], form)


grid_sample_backward = register(
    "relax.grad.grid_sample_backward",
    ("output_grad", "data", "grid"),
    GRID_SAMPLE_ATTRS,
    infer=_infer_grid_sample_backward,
    kernel=sampling.grid_sample_backward,
    grad=_grid_sample_backward_grad,
)
