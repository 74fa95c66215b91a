"""1-D and 3-D max/avg pooling (TVM's attributes and defaults) with the 3-D backward ops."""

# 1-D gradients are the 2-D backward ops over a unit H axis; 3-D ones have their own backward ops.
# Second order: both backward ops are linear in output_grad. avg_pool3d_backward's adjoint is avg_pool3d;
# max_pool3d_backward's reads the gradient at each window's first maximum (grad.max_pool3d_backward_grad,
# whose adjoint is max_pool3d_backward again); as functions of the data both are piecewise constant.

from __future__ import annotations

from functools import partial

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import pool_nd
from retrograd.ops.kernels.conv_nd import with_h_axis
from retrograd.ops.kernels.pool_nan import nan_last
from retrograd.ops.nn.conv_nd import SPATIAL, n_ints, n_pads
from retrograd.ops.nn.pool import canonical_pool_attrs
from retrograd.ops.nn.shape import from_layout, to_layout, window_count
from retrograd.ops.cost import POOL, POOL_BACKWARD
from retrograd.ops.registry import Attr, InferCtx, get, register


def pool_attrs_nd(n: int, count_include_pad: bool) -> tuple:
    """TVM's pooling attributes in its printed order (dilation before padding)."""
    sp = SPATIAL[n]
    return (
        Attr("pool_size", n_ints(n, 1), (1,) * n),
        Attr("strides", n_ints(n, 1), (1,) * n),
        Attr("dilation", n_ints(n, 1), (1,) * n),
        Attr("padding", n_pads(n), (0,) * (2 * n)),
        Attr("ceil_mode", at.to_bool, False),
        Attr("count_include_pad", at.to_bool, count_include_pad),
        Attr("layout", at.layout("NC" + sp), "NC" + sp),
        Attr("out_layout", at.opt_layout("NC" + sp), None),
    )


# TVM's Python functions take padding before dilation.
_POSITIONAL = ("pool_size", "strides", "padding", "dilation", "ceil_mode", "count_include_pad", "layout", "out_layout")


def _pool_output(n: int, ctx: InferCtx, i: int = 0) -> TensorStructInfo:
    a = ctx.attrs
    sp = SPATIAL[n]
    x = ctx.tensor(i)
    if x.ndim not in (-1, n + 2):
        raise ctx.error(f"expected a {n + 2}-D tensor in layout {a['layout']}, got {x.ndim}-D", i)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, n + 2)
    b, c, *size = from_layout(x.shape, a["layout"], "NC" + sp)
    pads = a["padding"]
    dims = [window_count(ctx, size[j], a["pool_size"][j], a["strides"][j], pads[j], pads[n + j], a["dilation"][j],
                         a["ceil_mode"]) for j in range(n)]
    if any(d is None for d in dims):
        return TensorStructInfo(None, x.dtype, n + 2)
    return TensorStructInfo(to_layout((b, c, *dims), "NC" + sp, a["out_layout"]), x.dtype)


def _as_2d(call, g):
    """(g, data, attrs) of a 1-D pool as the 2-D pool over a unit H axis."""
    a = call.attrs
    lay, out = with_h_axis(a["layout"]), with_h_axis(a["out_layout"])
    attrs2d = dict(
        pool_size=(1,) + a["pool_size"], strides=(1,) + a["strides"], dilation=(1,) + a["dilation"],
        padding=(0, a["padding"][0], 0, a["padding"][1]), ceil_mode=a["ceil_mode"],
        count_include_pad=a["count_include_pad"], layout=lay, out_layout=out,
    )
    return R.expand_dims(g, axis=[out.index("H")]), R.expand_dims(call.args[0], axis=[lay.index("H")]), attrs2d, lay


def _pool1d_grad(backward):
    def rule(call, out, g):
        g4, x4, attrs2d, lay = _as_2d(call, g)
        return [R.squeeze(backward(g4, x4, **attrs2d), axis=[lay.index("H")])]

    return rule


def _pool3d_grad(name):
    def rule(call, out, g):
        return [getattr(R.grad, name)(g, call.args[0], **call.attrs)]

    return rule


def _register(name, n, count_include_pad, kernel, grad):
    return register(
        f"relax.{name}",
        ("data",),
        pool_attrs_nd(n, count_include_pad),
        infer=partial(_pool_output, n),
        kernel=kernel,
        grad=grad,
        canonicalize=canonical_pool_attrs,
        positional_attrs=_POSITIONAL,
        cost=POOL,
        threaded=True,  # its kernel splits the batch over the kernel threads
    )


max_pool1d = _register("nn.max_pool1d", 1, False, partial(pool_nd.pool1d, "max"),
                       _pool1d_grad(lambda *a, **k: R.grad.max_pool2d_backward(*a, **k)))
avg_pool1d = _register("nn.avg_pool1d", 1, True, partial(pool_nd.pool1d, "avg"),
                       _pool1d_grad(lambda *a, **k: R.grad.avg_pool2d_backward(*a, **k)))
max_pool3d = _register("nn.max_pool3d", 3, False, pool_nd.max_pool3d, _pool3d_grad("max_pool3d_backward"))
avg_pool3d = _register("nn.avg_pool3d", 3, True, pool_nd.avg_pool3d, _pool3d_grad("avg_pool3d_backward"))


def _infer_pool3d_backward(ctx: InferCtx) -> TensorStructInfo:
    expected = _pool_output(3, ctx, 1)
    g = ctx.tensor(0)
    if expected.shape is not None and g.shape is not None and g.shape != expected.shape or g.dtype != expected.dtype:
        raise ctx.error(f"output_grad must be shaped like the pooling result ({expected}), got {g}", 0)
    return ctx.tensor(1)


def _avg_pool3d_backward_grad(call, out, g):
    # Linear in output_grad; its adjoint is avg_pool3d itself. The data's values do not matter.
    return [R.nn.avg_pool3d(g, **call.attrs), None]


def _register_backward(name, kernel, grad, args=("output_grad", "data"), infer=_infer_pool3d_backward):
    return register(
        f"relax.grad.{name}",
        args,
        pool_attrs_nd(3, False),
        infer=infer,
        kernel=kernel,
        grad=grad,
        canonicalize=canonical_pool_attrs,
        positional_attrs=_POSITIONAL,
        cost=POOL_BACKWARD,
        threaded=True,  # its kernel splits the batch over the kernel threads
    )


def _max_pool3d_backward_grad(call, out, g):
    return [R.grad.max_pool3d_backward_grad(g, call.args[1], **call.attrs), None]


def _max_pool3d_backward_grad_grad(call, out, g):
    return [R.grad.max_pool3d_backward(g, call.args[1], **call.attrs), None]


@nan_last(pool_nd.max_pool3d, "NCDHW", adjoint=True)
def max_pool3d_backward_grad_kernel(input_grad, data, **attrs):
    """input_grad read at each window's first maximum of data, in max_pool3d_backward's (d, h, w) order:
    per depth tap, the 2-D kernel's read at the tap's first 2-D maximum, kept where that tap wins."""
    return pool_nd.max_pool3d_backward_grad(input_grad, data, get("relax.grad.max_pool2d_backward_grad").kernel, **attrs)


def _infer_pool3d_backward_grad(ctx: InferCtx) -> TensorStructInfo:
    x, g = ctx.tensor(1), ctx.tensor(0)
    if x.shape is not None and g.shape is not None and g.shape != x.shape or g.dtype != x.dtype:
        raise ctx.error(f"input_grad must be shaped like the data ({x}), got {g}", 0)
    return _pool_output(3, ctx, 1)


max_pool3d_backward = _register_backward("max_pool3d_backward", pool_nd.max_pool3d_backward, _max_pool3d_backward_grad)
max_pool3d_backward_grad = _register_backward(
    "max_pool3d_backward_grad", max_pool3d_backward_grad_kernel, _max_pool3d_backward_grad_grad,
    ("input_grad", "data"), _infer_pool3d_backward_grad,
)
avg_pool3d_backward = _register_backward("avg_pool3d_backward", pool_nd.avg_pool3d_backward, _avg_pool3d_backward_grad)
