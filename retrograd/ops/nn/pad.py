"""nn.pad (TVM's constant, reflect, replicate and circular modes) and grad.pad_backward, its adjoint."""

from __future__ import annotations

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import pad as pad_kernels
from retrograd.ops.nn.shape import affine
from retrograd.ops.registry import Attr, InferCtx, register

PAD_ATTRS = (
    Attr("pad_width", at.to_ints),
    Attr("pad_value", at.to_float, 0.0),
    Attr("pad_mode", at.one_of("constant", "reflect", "replicate", "circular"), "constant"),
)
# TVM's Python signature takes pad_mode before pad_value (its printer puts pad_value first).
PAD_POSITIONAL = ("pad_width", "pad_mode", "pad_value")


def _padded(ctx: InferCtx, i: int) -> TensorStructInfo:
    x = ctx.tensor(i)
    widths = ctx.attrs["pad_width"]
    if x.ndim == -1:
        return x
    if len(widths) != 2 * x.ndim:
        raise ctx.error(f"pad_width needs two entries (before, after) per axis: {2 * x.ndim}, got {len(widths)}", i)
    if x.shape is None:
        return x
    dims = []
    for d, b, a in zip(x.shape, widths[0::2], widths[1::2]):
        out = affine(d, 1, b + a)
        if isinstance(out, int) and out < 0:
            raise ctx.error(f"negative widths ({b}, {a}) remove more than the axis's {d} elements", i)
        dims.append(out)
    return TensorStructInfo(tuple(dims), x.dtype)


def _infer_pad(ctx: InferCtx) -> TensorStructInfo:
    return _padded(ctx, 0)


def _pad_grad(call, out, g):
    # The padding value is a constant; the data's gradient folds g back onto the positions each
    # padded element reads.
    return [R.grad.pad_backward(g, call.args[0], **call.attrs)]


def _infer_pad_backward(ctx: InferCtx) -> TensorStructInfo:
    expected = _padded(ctx, 1)
    g = ctx.tensor(0)
    if expected.shape is not None and g.shape is not None and g.shape != expected.shape or g.dtype != expected.dtype:
        raise ctx.error(f"output_grad must be shaped like the padded data ({expected}), got {g}", 0)
    return ctx.tensor(1)


def _pad_backward_grad(call, out, g):
    # Linear in output_grad, whose adjoint is the padding itself (with zeros: no constant term).
    return [R.nn.pad(g, **{**call.attrs, "pad_value": 0.0}), None]


pad = register(
    "relax.nn.pad",
    ("data",),
    PAD_ATTRS,
    infer=_infer_pad,
    kernel=pad_kernels.pad,
    grad=_pad_grad,
    positional_attrs=PAD_POSITIONAL,
)
pad_backward = register(
    "relax.grad.pad_backward",
    ("output_grad", "data"),
    PAD_ATTRS,
    infer=_infer_pad_backward,
    kernel=pad_kernels.pad_backward,
    grad=_pad_backward_grad,
    positional_attrs=PAD_POSITIONAL,
)
