"""1-D and 3-D convolutions and their transposes: TVM's attributes, inference, kernels, gradients."""

# The gradients are TVM's conv2d formulation in n dimensions: the data gradient is the transposed
# convolution of g (output_padding restores what the strides dropped), the weight gradient a convolution
# of the data (read as C N spatial) with g (read as an I O spatial kernel), strides and dilation swapped.

from __future__ import annotations

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import conv_nd
from retrograd.ops.nn.conv import SPATIAL, canonical_conv_attrs, permute_layout, static_dims, weight_grad
from retrograd.ops.nn.shape import from_layout, to_layout, transposed_size, window_count
from retrograd.ops.cost import CONV, CONV_TRANSPOSE
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import same_dtype



def n_ints(n: int, minimum: int):
    """n ints (one int, or a 1-list, stands for all of them), each >= minimum."""
    return at.at_least(at.fixed_ints(n), minimum)


def n_pads(n: int):
    """2n paddings (begins, then ends) from 1, n (symmetric) or 2n ints, as TVM expands them."""

    def convert(v):
        vals = at.to_ints(v)
        if len(vals) == 1:
            vals = vals * (2 * n)
        elif len(vals) == n:
            vals = vals * 2
        if len(vals) != 2 * n:
            raise ValueError(f"expected 1, {n} or {2 * n} integers, got {len(vals)}")
        if any(x < 0 for x in vals):
            raise ValueError("every value must be >= 0")
        return vals

    return convert


def conv_attrs(n: int, transpose: bool) -> tuple:
    sp = SPATIAL[n]
    out = [Attr("strides", n_ints(n, 1), (1,) * n), Attr("padding", n_pads(n), (0,) * (2 * n))]
    if transpose:
        out.append(Attr("output_padding", n_ints(n, 0), (0,) * n))
    return tuple(out) + (
        Attr("dilation", n_ints(n, 1), (1,) * n),
        Attr("groups", at.to_int, 1),
        Attr("data_layout", at.layout("NC" + sp), "NC" + sp),
        Attr("kernel_layout", at.layout("OI" + sp), ("IO" if transpose else "OI") + sp),
        Attr("out_layout", at.opt_layout("NC" + sp), None),
        Attr("out_dtype", at.to_opt_dtype, None),
    )


def _known(*dims) -> bool:
    return all(isinstance(d, int) for d in dims)


# -- inference -------------------------------------------------------------------------------


def _operands(ctx: InferCtx, n: int, kernel_order: str):
    a = ctx.attrs
    for i, layout in ((0, a["data_layout"]), (1, a["kernel_layout"])):
        t = ctx.tensor(i)
        if t.ndim not in (-1, n + 2):
            raise ctx.error(f"expected a {n + 2}-D tensor in layout {layout}, got {t.ndim}-D", i)
    data, weight = ctx.tensor(0), ctx.tensor(1)
    dtype = same_dtype(data, weight)
    if dtype is None:
        raise ctx.error(f"data and weight must have the same dtype, got {data.dtype} and {weight.dtype}")
    dtype = a["out_dtype"] or dtype
    if data.shape is None or weight.shape is None:
        return dtype, None, None
    sp = SPATIAL[n]
    return (dtype, from_layout(data.shape, a["data_layout"], "NC" + sp),
            from_layout(weight.shape, a["kernel_layout"], kernel_order))


def _infer_conv(n: int):
    def infer(ctx: InferCtx) -> TensorStructInfo:
        a = ctx.attrs
        sp = SPATIAL[n]
        dtype, x, w = _operands(ctx, n, "OI" + sp)
        if x is None:
            return TensorStructInfo(None, dtype, n + 2)
        (b, c, *size), (o, i, *k), groups = x, w, a["groups"]
        if _known(c, i) and c != i * groups:
            raise ctx.error(f"data has {c} channels but the weight expects {i} input channels per group x "
                            f"{groups} group(s) = {i * groups}")
        if _known(o) and o % groups:
            raise ctx.error(f"the weight's {o} output channels are not divisible by groups={groups}", 1)
        if not _known(*k):
            return TensorStructInfo(None, dtype, n + 2)
        pads = a["padding"]
        dims = [window_count(ctx, size[j], k[j], a["strides"][j], pads[j], pads[n + j], a["dilation"][j])
                for j in range(n)]
        return TensorStructInfo(to_layout((b, o, *dims), "NC" + sp, a["out_layout"]), dtype)

    return infer


def _infer_conv_transpose(n: int):
    def infer(ctx: InferCtx) -> TensorStructInfo:
        a = ctx.attrs
        sp = SPATIAL[n]
        if any(p >= s for p, s in zip(a["output_padding"], a["strides"])):
            raise ctx.error(f"output_padding {a['output_padding']} must be smaller than strides {a['strides']}")
        dtype, x, w = _operands(ctx, n, "IO" + sp)
        if x is None:
            return TensorStructInfo(None, dtype, n + 2)
        (b, c, *size), (i, o, *k), groups = x, w, a["groups"]
        if _known(c, i) and c != i:
            raise ctx.error(f"data has {c} channels but the weight expects {i} input channels")
        if _known(c) and c % groups:
            raise ctx.error(f"data's {c} channels are not divisible by groups={groups}", 0)
        if not _known(*k):
            return TensorStructInfo(None, dtype, n + 2)
        pads = a["padding"]
        dims = [transposed_size(size[j], k[j], a["strides"][j], pads[j], pads[n + j], a["dilation"][j],
                                a["output_padding"][j]) for j in range(n)]
        if any(isinstance(d, int) and d < 1 for d in dims):
            raise ctx.error(f"the output would be empty ({dims}): padding exceeds the transposed extent")
        oc = o * groups if isinstance(o, int) else (o if groups == 1 else f"{o} * {groups}")
        return TensorStructInfo(to_layout((b, oc, *dims), "NC" + sp, a["out_layout"]), dtype)

    return infer


# -- gradients -------------------------------------------------------------------------------


def _conv_op(n: int, transpose: bool = False):
    return getattr(R.nn, f"conv{n}d{'_transpose' if transpose else ''}")


def _conv_grad(n: int, transpose: bool):
    sp = SPATIAL[n]
    kernel_order = ("IO" if transpose else "OI") + sp

    def rule(call, out, g):
        a = call.attrs
        data, weight = call.args
        x_shape = static_dims(call, data, "the data", a["data_layout"], "NC" + sp)
        w_shape = static_dims(call, weight, "the weight", a["kernel_layout"], kernel_order)
        y_shape = static_dims(call, out, "the result", a["out_layout"], "NC" + sp)
        if out.struct_info.dtype != data.struct_info.dtype:
            g = R.astype(g, data.struct_info.dtype)
        x = permute_layout(data, a["data_layout"], "NC" + sp)
        w = permute_layout(weight, a["kernel_layout"], kernel_order)
        g = permute_layout(g, a["out_layout"], "NC" + sp)
        common = dict(strides=a["strides"], padding=a["padding"], dilation=a["dilation"], groups=a["groups"])
        k = w_shape[2:]
        if transpose:
            dx = _conv_op(n)(g, w, **common)
            dw = weight_grad(g, y_shape, x, k, a["strides"], a["padding"], a["dilation"], a["groups"], w_shape,
                             data.struct_info.dtype)
        else:
            pads = a["padding"]
            covered = [(y_shape[2 + j] - 1) * a["strides"][j] - pads[j] - pads[n + j] + a["dilation"][j] * (k[j] - 1) + 1
                       for j in range(n)]
            op_ = tuple(x_shape[2 + j] - covered[j] for j in range(n))
            dx = _conv_op(n, True)(g, w, output_padding=op_, **common)
            dw = weight_grad(x, x_shape, g, k, a["strides"], a["padding"], a["dilation"], a["groups"], w_shape,
                             data.struct_info.dtype)
        return [permute_layout(dx, "NC" + sp, a["data_layout"]), permute_layout(dw, kernel_order, a["kernel_layout"])]

    return rule


def _register(n: int, transpose: bool):
    kind = "_transpose" if transpose else ""
    return register(
        f"relax.nn.conv{n}d{kind}",
        ("data", "weight"),
        conv_attrs(n, transpose),
        infer=(_infer_conv_transpose if transpose else _infer_conv)(n),
        kernel=getattr(conv_nd, f"conv{n}d{kind}"),
        grad=_conv_grad(n, transpose),
        canonicalize=canonical_conv_attrs,
        cost=CONV_TRANSPOSE if transpose else CONV,
        threaded=True,  # its kernel splits the batch over the kernel threads
    )


conv1d = _register(1, False)
conv1d_transpose = _register(1, True)
conv3d = _register(3, False)
conv3d_transpose = _register(3, True)
