"""image.affine_grid and image.grid_sample (TVM's (N, 2, H_out, W_out) grids) with grad.grid_sample_backward."""

# affine_grid is linear in theta: its gradient contracts g with the constant coordinate basis. grid_sample
# (bilinear, nearest; zeros and border padding) differentiates in both the data and the grid (PyTorch's
# convention: nearest gives the grid no gradient). Second order through grid_sample_backward is not provided.

from __future__ import annotations

from retrograd.errors import GradientError
from retrograd.ir.expr import TupleGetItem, const, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.create import shape_arg
from retrograd.ops.kernels import sampling
from retrograd.ops.registry import Arg, Attr, InferCtx, register


def _infer_affine_grid(ctx: InferCtx) -> TensorStructInfo:
    theta = ctx.tensor(0)
    size = shape_arg(ctx, 1)
    if theta.dtype and not is_float_dtype(theta.dtype):
        raise ctx.error(f"requires a float tensor, got dtype {theta.dtype}", 0)
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


grid_sample_backward = register(
    "relax.grad.grid_sample_backward",
    ("output_grad", "data", "grid"),
    GRID_SAMPLE_ATTRS,
    infer=_infer_grid_sample_backward,
    kernel=sampling.grid_sample_backward,
)
