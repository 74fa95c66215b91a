"""2-D pooling ops: nn.max_pool2d and nn.avg_pool2d (inference, kernels, gradients), and their shared schema."""

from __future__ import annotations

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import pool as pool_kernels
from retrograd.ops.nn.shape import check_4d, from_layout, to_layout, window_count
from retrograd.ops.cost import POOL
from retrograd.ops.registry import Attr, InferCtx, register

# TVM prints pooling attributes in this order (dilation before padding) ...
POOL_ATTRS = (
    Attr("pool_size", at.at_least(at.fixed_ints(2), 1), (1, 1)),
    Attr("strides", at.at_least(at.fixed_ints(2), 1), (1, 1)),
    Attr("dilation", at.at_least(at.fixed_ints(2), 1), (1, 1)),
    Attr("padding", at.at_least(at.fixed_ints(4), 0), (0, 0, 0, 0)),
    Attr("ceil_mode", at.to_bool, False),
    Attr("count_include_pad", at.to_bool, False),
    Attr("layout", at.layout("NCHW"), "NCHW"),
    Attr("out_layout", at.opt_layout("NCHW"), None),
)
# ... but its Python functions take them positionally with padding before dilation.
POOL_POSITIONAL = ("pool_size", "strides", "padding", "dilation", "ceil_mode", "count_include_pad", "layout", "out_layout")


def canonical_pool_attrs(attrs: dict) -> dict:
    """out_layout defaults to layout, spelled out as TVM prints it."""
    if attrs["out_layout"] is None:
        attrs = {**attrs, "out_layout": attrs["layout"]}
    return attrs


def pool_output(ctx: InferCtx, data_index: int = 0) -> TensorStructInfo:
    """Struct info of a pooling op's result over argument `data_index`, in the op's out_layout."""
    a = ctx.attrs
    data = check_4d(ctx, data_index, a["layout"])
    if data.shape is None:
        return TensorStructInfo(None, data.dtype, 4)
    n, c, h, w = from_layout(data.shape, a["layout"], "NCHW")
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    pt, pl, pb, pr = a["padding"]
    oh = window_count(ctx, h, kh, sh, pt, pb, dh, a["ceil_mode"])
    ow = window_count(ctx, w, kw, sw, pl, pr, dw, a["ceil_mode"])
    if oh is None or ow is None:
        return TensorStructInfo(None, data.dtype, 4)
    return TensorStructInfo(to_layout((n, c, oh, ow), "NCHW", a["out_layout"]), data.dtype)


def pool_attrs(call) -> dict:
    """The pooling attributes of `call`, to forward to the matching backward op."""
    return {a.name: call.attrs[a.name] for a in POOL_ATTRS}


def _max_pool2d_grad(call, out, g):
    # The window maxima's positions are fixed locally, so the gradient routes g to them.
    return [R.grad.max_pool2d_backward(g, call.args[0], **pool_attrs(call))]


def _avg_pool2d_grad(call, out, g):
    # avg_pool2d is linear: its backward is the transposed averaging map applied to g.
    return [R.grad.avg_pool2d_backward(g, call.args[0], **pool_attrs(call))]


def _pool(name, kernel, grad):
    return register(
        f"relax.nn.{name}",
        ("data",),
        POOL_ATTRS,
        infer=pool_output,
        kernel=kernel,
        grad=grad,
        canonicalize=canonical_pool_attrs,
        positional_attrs=POOL_POSITIONAL,
        cost=POOL,
        threaded=True,  # its kernel splits the batch over the kernel threads
    )


max_pool2d = _pool("max_pool2d", pool_kernels.max_pool2d, _max_pool2d_grad)
avg_pool2d = _pool("avg_pool2d", pool_kernels.avg_pool2d, _avg_pool2d_grad)
