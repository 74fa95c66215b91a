"""Convolution ops: nn.conv2d and nn.conv2d_transpose (inference, layout-aware kernels, gradients)."""

from __future__ import annotations

from retrograd.errors import GradientError
from retrograd.ir.expr import shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import conv as conv_kernels
from retrograd.ops.nn.shape import check_4d, from_layout, to_layout, transposed_size, window_count
from retrograd.ops.cost import CONV, CONV_TRANSPOSE
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.runtime_dims import axis_positions
from retrograd.ops.shape_utils import dim_mul, same_dtype

_PAIR = at.at_least(at.fixed_ints(2), 1)
_PAD = at.at_least(at.fixed_ints(4), 0)
_GROUPS_AND_DATA_LAYOUT = (
    Attr("groups", at.to_int, 1),
    Attr("data_layout", at.layout("NCHW"), "NCHW"),
)

CONV2D_ATTRS = (
    Attr("strides", _PAIR, (1, 1)),
    Attr("padding", _PAD, (0, 0, 0, 0)),
    Attr("dilation", _PAIR, (1, 1)),
    *_GROUPS_AND_DATA_LAYOUT,
    Attr("kernel_layout", at.layout("OIHW"), "OIHW"),
    Attr("out_layout", at.opt_layout("NCHW"), None),
    Attr("out_dtype", at.to_opt_dtype, None),
)
CONV2D_TRANSPOSE_ATTRS = (
    Attr("strides", _PAIR, (1, 1)),
    Attr("padding", _PAD, (0, 0, 0, 0)),
    Attr("output_padding", at.at_least(at.fixed_ints(2), 0), (0, 0)),
    Attr("dilation", _PAIR, (1, 1)),
    *_GROUPS_AND_DATA_LAYOUT,
    Attr("kernel_layout", at.layout("OIHW"), "IOHW"),
    Attr("out_layout", at.opt_layout("NCHW"), None),
    Attr("out_dtype", at.to_opt_dtype, None),
)


def canonical_conv_attrs(attrs: dict) -> dict:
    """out_layout defaults to data_layout, spelled out as TVM prints it; groups must be positive."""
    if attrs["groups"] < 1:
        raise ValueError(f"groups must be >= 1, got {attrs['groups']}")
    if attrs["out_layout"] is None:
        attrs = {**attrs, "out_layout": attrs["data_layout"]}
    return attrs


# -- inference -------------------------------------------------------------------------------


def _operands(ctx: InferCtx, kernel_order: str):
    """(dtype, data dims as NCHW, weight dims in `kernel_order`), dims None when not known."""
    a = ctx.attrs
    data = check_4d(ctx, 0, a["data_layout"])
    weight = check_4d(ctx, 1, a["kernel_layout"])
    dtype = same_dtype(data, weight)
    if dtype is None:
        raise ctx.error(f"data and weight must have the same dtype, got {data.dtype} and {weight.dtype}")
    dtype = a["out_dtype"] or dtype
    if data.shape is None or weight.shape is None:
        return dtype, None, None
    return dtype, from_layout(data.shape, a["data_layout"], "NCHW"), from_layout(weight.shape, a["kernel_layout"], kernel_order)


def _known(*dims) -> bool:
    return all(isinstance(d, int) for d in dims)


def _infer_conv2d(ctx: InferCtx) -> TensorStructInfo:
    a = ctx.attrs
    dtype, x, w = _operands(ctx, "OIHW")
    if x is None:
        return TensorStructInfo(None, dtype, 4)
    (n, c, h, wd), (o, i, kh, kw), groups = x, w, a["groups"]
    if _known(c, i) and c != i * groups:
        raise ctx.error(
            f"data has {c} channels but the weight expects {i} input channels per group x {groups} group(s) = {i * groups}"
        )
    if _known(o) and o % groups:
        raise ctx.error(f"the weight's {o} output channels are not divisible by groups={groups}", 1)
    if not _known(kh, kw):
        return TensorStructInfo(None, dtype, 4)
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilation"], a["padding"]
    oh = window_count(ctx, h, kh, sh, pt, pb, dh)
    ow = window_count(ctx, wd, kw, sw, pl, pr, dw)
    return TensorStructInfo(to_layout((n, o, oh, ow), "NCHW", a["out_layout"]), dtype)


def _infer_conv2d_transpose(ctx: InferCtx) -> TensorStructInfo:
    a = ctx.attrs
    (sh, sw), (oph, opw) = a["strides"], a["output_padding"]
    if oph >= sh or opw >= sw:
        raise ctx.error(f"output_padding {a['output_padding']} must be smaller than strides {a['strides']}")
    dtype, x, w = _operands(ctx, "IOHW")
    if x is None:
        return TensorStructInfo(None, dtype, 4)
    (n, c, h, wd), (i, o, kh, kw), groups = x, w, a["groups"]
    if _known(c, i) and c != i:
        raise ctx.error(f"data has {c} channels but the weight expects {i} input channels")
    if _known(c) and c % groups:
        raise ctx.error(f"data's {c} channels are not divisible by groups={groups}", 0)
    if not _known(kh, kw):
        return TensorStructInfo(None, dtype, 4)
    (dh, dw), (pt, pl, pb, pr) = a["dilation"], a["padding"]
    oh = transposed_size(h, kh, sh, pt, pb, dh, oph)
    ow = transposed_size(wd, kw, sw, pl, pr, dw, opw)
    if (isinstance(oh, int) and oh < 1) or (isinstance(ow, int) and ow < 1):
        raise ctx.error(f"the output would be empty ({oh} x {ow}): padding exceeds the transposed extent")
    oc = o * groups if isinstance(o, int) else (o if groups == 1 else f"{o} * {groups}")
    return TensorStructInfo(to_layout((n, oc, oh, ow), "NCHW", a["out_layout"]), dtype)


# -- gradients -------------------------------------------------------------------------------


def static_dims(call, expr, what: str, layout: str, canonical: str, free: str = "N") -> tuple:
    """The shape of `expr` (laid out as `layout`) in `canonical` order; only dims named in `free` may be symbolic."""
    s = expr.struct_info
    dims = from_layout(s.shape, layout, canonical) if isinstance(s, TensorStructInfo) and s.shape is not None else None
    if dims is None or not all(isinstance(d, int) for c, d in zip(canonical, dims) if c not in free):
        raise GradientError(
            f"{call.op.script_name}: the gradient needs static channel and spatial dims for {what}, got {s}", call.span
        )
    return dims


def permute_layout(expr, src: str, dst: str):
    """expr (laid out as src) with its axes in dst order; no binding when they already agree."""
    return expr if src == dst else R.permute_dims(expr, axes=[src.index(c) for c in dst])


SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def weight_grad(data, data_shape, out_grad, kernel, strides, padding, dilation, groups, result_shape, dtype):
    """d conv(data, W) / dW contracted with out_grad (both N C spatial), as an O I spatial tensor of
    `result_shape`: TVM's formulation.

    A convolution whose "batch" is the input channel and whose "channels" are the batch: data is read
    as C N spatial (grouped: (groups * N, C / groups, ...)), out_grad as an I O spatial kernel, and
    strides and dilation swap roles. Positions the forward never read are trimmed from the end padding,
    then from the data, so that the result is exactly the kernel's size and no larger result is computed
    (a 1x1 stride-2 kernel would otherwise give 2x2, a huge padding a huge one); the result is zeros when
    the forward read no data at all. Cropped only when a spatial dim is symbolic.
    """
    n = len(kernel)
    b, c, *size = data_shape
    if groups != 1:
        cg = c // groups
        data = R.reshape(data, shape_expr((b, groups, cg, *size)))
        data = R.permute_dims(data, axes=[1, 0] + list(range(2, n + 3)))
        data = R.reshape(data, shape_expr((dim_mul(groups, b), cg, *size)))
    ends, keep, crop = list(padding[n:]), list(size), False
    for j in range(n):
        if not isinstance(size[j], int):
            crop = True  # what the forward left unread is known at run time only: crop the result
            continue
        unread = (size[j] + padding[j] + padding[n + j] - dilation[j] * (kernel[j] - 1) - 1) % strides[j]
        from_pad = min(unread, padding[n + j])
        ends[j] -= from_pad
        keep[j] -= unread - from_pad
        if keep[j] <= 0:
            return R.zeros(shape_expr(tuple(result_shape)), dtype)
    if keep != list(size):
        data = R.strided_slice(data, axes=list(range(2, n + 2)), begin=[0] * n, end=keep)
    sp = SPATIAL[n]
    dw = getattr(R.nn, f"conv{n}d")(
        data, out_grad, strides=tuple(dilation), padding=tuple(padding[:n]) + tuple(ends), dilation=tuple(strides),
        groups=groups, data_layout="CN" + sp, kernel_layout="IO" + sp, out_layout="CN" + sp,
    )
    if crop:
        dw = R.strided_slice(dw, axes=list(range(2, n + 2)), begin=[0] * n, end=list(kernel))
    return dw


def _conv_grad(core, kernel_order: str, free: str = "N"):
    """A rule that brings data, weight and g to NCHW / kernel_order, applies `core`, and permutes back.
    Dims of data and result named in `free` may be symbolic (the core then handles them)."""

    def rule(call, out, g):
        a = call.attrs
        data, weight = call.args
        shapes = (
            static_dims(call, data, "the data", a["data_layout"], "NCHW", free),
            static_dims(call, weight, "the weight", a["kernel_layout"], kernel_order),
            static_dims(call, out, "the result", a["out_layout"], "NCHW", free),
        )
        if out.struct_info.dtype != data.struct_info.dtype:  # out_dtype: differentiate in the data's dtype
            g = R.astype(g, data.struct_info.dtype)
        x = permute_layout(data, a["data_layout"], "NCHW")
        w = permute_layout(weight, a["kernel_layout"], kernel_order)
        g = permute_layout(g, a["out_layout"], "NCHW")
        dx, dw_ = core(x, w, g, *shapes, a, data.struct_info.dtype)
        return [permute_layout(dx, "NCHW", a["data_layout"]), permute_layout(dw_, kernel_order, a["kernel_layout"])]

    return rule


def _conv2d_grad_core(x, w, g, x_shape, w_shape, y_shape, a, dtype):
    # data: the transposed convolution of g, with output_padding restoring rows the strides dropped.
    # weight: weight_grad (a convolution of the data with g).
    (_, _, h, wd), (_, _, kh, kw), (_, _, oh, ow) = x_shape, w_shape, y_shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilation"], a["padding"]
    # A symbolic spatial dim: pad by stride - 1 (the most rows the strides can drop), then keep the
    # input's rows, counted at run time; the extra rows hold no gradient (the forward never read them).
    dynamic = [not (isinstance(n, int) and isinstance(o, int)) for n, o in ((h, oh), (wd, ow))]
    pads = [
        s - 1 if dyn else n - ((o - 1) * s - p0 - p1 + d * (k - 1) + 1)
        for dyn, n, o, s, p0, p1, d, k in ((dynamic[0], h, oh, sh, pt, pb, dh, kh), (dynamic[1], wd, ow, sw, pl, pr, dw, kw))
    ]
    dx = R.nn.conv2d_transpose(
        g,
        w,
        strides=a["strides"],
        padding=a["padding"],
        output_padding=tuple(pads),
        dilation=a["dilation"],
        groups=a["groups"],
    )
    for axis, dyn in ((2, dynamic[0]), (3, dynamic[1])):
        if dyn:
            dx = R.take(dx, axis_positions(x, axis), axis=axis)
    return dx, weight_grad(x, x_shape, g, (kh, kw), a["strides"], a["padding"], a["dilation"], a["groups"],
                           w_shape, dtype)


def _conv2d_transpose_grad_core(x, w, g, x_shape, w_shape, y_shape, a, dtype):
    # conv2d_transpose is the adjoint of conv2d(y, W) with W read as OIHW: its data gradient is that
    # conv2d of g, and its weight gradient is conv2d's weight gradient with g as the data and x as the
    # output gradient, which comes out as (C_in, C_out / groups, kh, kw): the transposed op's IOHW.
    kh, kw = w_shape[2:]
    dx = R.nn.conv2d(g, w, strides=a["strides"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
    return dx, weight_grad(g, y_shape, x, (kh, kw), a["strides"], a["padding"], a["dilation"], a["groups"],
                           w_shape, dtype)


conv2d = register(
    "relax.nn.conv2d",
    ("data", "weight"),
    CONV2D_ATTRS,
    infer=_infer_conv2d,
    kernel=conv_kernels.conv2d,
    grad=_conv_grad(_conv2d_grad_core, "OIHW", free="NHW"),
    canonicalize=canonical_conv_attrs,
    cost=CONV,
    threaded=True,  # its kernel splits the batch over the kernel threads
)
conv2d_transpose = register(
    "relax.nn.conv2d_transpose",
    ("data", "weight"),
    CONV2D_TRANSPOSE_ATTRS,
    infer=_infer_conv2d_transpose,
    kernel=conv_kernels.conv2d_transpose,
    grad=_conv_grad(_conv2d_transpose_grad_core, "IOHW"),
    canonicalize=canonical_conv_attrs,
    cost=CONV_TRANSPOSE,
    threaded=True,  # its kernel splits the batch over the kernel threads
)
