"""image.resize2d and image.resize3d (TVM's attributes; nearest, linear and cubic methods)."""

# Resizing is linear and separable: grad.resize2d_backward / resize3d_backward contract g with each
# axis's transposed interpolation matrix; their own adjoint is the resize, so every order works. tf_crop_and_resize (roi) is not supported by the kernel.

from __future__ import annotations

from functools import partial

from retrograd.errors import GradientError
from retrograd.ir.expr import shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.create import shape_arg
from retrograd.ops.kernels import resample
from retrograd.ops.nn.adaptive import SPATIAL
from retrograd.ops.nn.shape import from_layout, to_layout
from retrograd.ops.registry import Arg, Attr, InferCtx, register


def _roi(n: int):
    def convert(v):
        if v is None:
            return (0.0,) * (2 * n)
        vals = (v,) if isinstance(v, int | float) else tuple(v)
        vals = tuple(at.to_float(x) for x in vals)
        if len(vals) == 1:
            vals = vals * (2 * n)
        if len(vals) != 2 * n:
            raise ValueError(f"expected {2 * n} numbers, got {len(vals)}")
        return vals

    return convert


def resize_attrs(n: int) -> tuple:
    sp = SPATIAL[n]
    return (
        Attr("roi", _roi(n), (0.0,) * (2 * n)),
        Attr("layout", at.layout("NC" + sp), "NC" + sp),
        Attr("method", at.one_of(*resample.METHODS), "linear"),
        Attr("coordinate_transformation_mode", at.one_of(*resample.COORDINATE_MODES), "half_pixel"),
        Attr("rounding_method", at.one_of(*resample.ROUNDING), "round" if n == 2 else ""),
        Attr("cubic_alpha", at.to_float, -0.75),
        Attr("cubic_exclude", at.to_int, 0),
        Attr("extrapolation_value", at.to_float, 0.0),
        Attr("out_dtype", at.to_opt_dtype, None),
    )


def _infer_resize(n: int, ctx: InferCtx) -> TensorStructInfo:
    a = ctx.attrs
    sp = SPATIAL[n]
    x = ctx.tensor(0)
    if x.ndim not in (-1, n + 2):
        raise ctx.error(f"expected a {n + 2}-D tensor in layout {a['layout']}, got {x.ndim}-D", 0)
    size = shape_arg(ctx, 1)
    if size.ndim not in (-1, 1, n):
        raise ctx.error(f"size must have 1 or {n} entries, got {size.ndim}", 1)
    dtype = a["out_dtype"] or x.dtype
    if x.shape is None or size.values is None:
        return TensorStructInfo(None, dtype, n + 2)
    values = tuple(size.values) * (n if len(size.values) == 1 else 1)
    b, c, *_ = from_layout(x.shape, a["layout"], "NC" + sp)
    return TensorStructInfo(to_layout((b, c, *values), "NC" + sp, a["layout"]), dtype)


def resize_kernel(n, data, size, **attrs):
    size = tuple(size) * (n if len(tuple(size)) == 1 else 1)
    return resample.resize(data, size, spatial=SPATIAL[n], **attrs)


def _resize_grad(n: int, call, out, g):
    # Linear: the adjoint contracts g with each axis's transposed interpolation matrix (the backward
    # op). The size argument is a shape: no gradient.
    x = call.args[0]
    if out.struct_info.dtype != x.struct_info.dtype:
        g = R.astype(g, x.struct_info.dtype)
    attrs = {**call.attrs, "out_dtype": None}
    return [getattr(R.grad, f"resize{n}d_backward")(g, x, **attrs), None]


def _infer_backward(n: int, ctx: InferCtx) -> TensorStructInfo:
    a = ctx.attrs
    x, g = ctx.tensor(1), ctx.tensor(0)
    for i, t in ((0, g), (1, x)):
        if t.ndim not in (-1, n + 2):
            raise ctx.error(f"expected a {n + 2}-D tensor in layout {a['layout']}, got {t.ndim}-D", i)
    if g.dtype and x.dtype and g.dtype != x.dtype:
        raise ctx.error(f"output_grad must have the data's dtype {x.dtype}, got {g.dtype}", 0)
    if x.shape is not None and g.shape is not None:
        canon = "NC" + SPATIAL[n]
        gd, xd = from_layout(g.shape, a["layout"], canon), from_layout(x.shape, a["layout"], canon)
        if any(isinstance(p, int) and isinstance(q, int) and p != q for p, q in zip(gd[:2], xd[:2])):
            raise ctx.error(f"output_grad's batch and channels must be the data's, got {g} for {x}", 0)
    return x


def _backward_grad(n: int, call, out, g):
    # Linear in output_grad; its adjoint is the resize itself, to output_grad's spatial size.
    a = call.attrs
    shape = call.args[0].struct_info.shape
    if shape is None:
        raise GradientError(f"{call.op.script_name}: the gradient needs output_grad's shape", call.span)
    size = from_layout(shape, a["layout"], "NC" + SPATIAL[n])[2:]
    return [getattr(R.image, f"resize{n}d")(g, shape_expr(size), **a), None]


def resize_backward_kernel(n, output_grad, data, **attrs):
    return resample.resize_backward(output_grad, data, spatial=SPATIAL[n], **attrs)


def _register(n: int):
    return register(
        f"relax.image.resize{n}d",
        ("data", Arg("size", kind="shape")),
        resize_attrs(n),
        infer=partial(_infer_resize, n),
        kernel=partial(resize_kernel, n),
        grad=partial(_resize_grad, n),
    )


resize2d = _register(2)
resize3d = _register(3)


def _register_backward(n: int):
    return register(
        f"relax.grad.resize{n}d_backward",
        ("output_grad", "data"),
        resize_attrs(n),
        infer=partial(_infer_backward, n),
        kernel=partial(resize_backward_kernel, n),
        grad=partial(_backward_grad, n),
    )


resize2d_backward = _register_backward(2)
resize3d_backward = _register_backward(3)
