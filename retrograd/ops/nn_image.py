"""image.resize2d and image.resize3d (TVM's attributes; nearest, linear and cubic methods).

Resizing is linear and separable: the gradient contracts g with each axis's interpolation matrix
(constants in the IR), so every order works. tf_crop_and_resize (roi) is not supported by the kernel.
"""

from __future__ import annotations

from functools import partial

from retrograd.errors import GradientError
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.create import shape_arg
from retrograd.ops.kernels import resample
from retrograd.ops.nn_adaptive import SPATIAL, contract_back, spatial_dims
from retrograd.ops.nn_shape import from_layout, to_layout
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


def _kernel(n, data, size, **attrs):
    size = tuple(size) * (n if len(tuple(size)) == 1 else 1)
    return resample.resize(data, size, spatial=SPATIAL[n], **attrs)


def _resize_grad(n: int, call, out, g):
    a = call.attrs
    x = call.args[0]
    dtype = x.struct_info.dtype
    if out.struct_info.dtype != dtype:
        g = R.astype(g, dtype)
    sizes = spatial_dims(call, a["layout"], n)
    shape = out.struct_info.shape
    outs = None if shape is None else from_layout(shape, a["layout"], "NC" + SPATIAL[n])[2:]
    if outs is None or not all(isinstance(d, int) for d in outs):
        raise GradientError(f"{call.op.script_name}: the gradient needs a static output size, got {out.struct_info}",
                            call.span)
    mats = [resample.resize_matrix(s, o, a["method"], a["coordinate_transformation_mode"], a["rounding_method"],
                                   a["cubic_alpha"], a["cubic_exclude"]) for s, o in zip(sizes, outs)]
    # The size argument is a shape: no gradient.
    return [contract_back(g, mats, n, a["layout"], a["layout"], dtype), None]


def _register(n: int):
    return register(
        f"relax.image.resize{n}d",
        ("data", Arg("size", kind="shape")),
        resize_attrs(n),
        infer=partial(_infer_resize, n),
        kernel=partial(_kernel, n),
        grad=partial(_resize_grad, n),
    )


resize2d = _register(2)
resize3d = _register(3)
