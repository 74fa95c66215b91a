"""Pointwise activations: nn.gelu_tanh, nn.leakyrelu, nn.prelu, nn.selu, nn.softplus."""

# Gradients (TVM has none) follow PyTorch: at x == 0 leakyrelu, prelu and selu take their negative-side
# slope; softplus switches to the identity where beta * x > threshold.

from __future__ import annotations

from retrograd.ir.expr import shape_expr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import pointwise as pw
from retrograd.ops.elementwise import infer_float_unary
from retrograd.ops.rule_helpers import scalar
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import normalize_axis


def _positive(x):
    return R.greater(x, scalar(0, x))


def _gelu_tanh_grad(call, out, g):
    # y = 0.5 x (1 + t), t = tanh(u), u = c (x + a x^3):
    # dy/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2).
    x = call.args[0]
    x2 = R.multiply(x, x)
    u = R.multiply(R.multiply(x, scalar(pw.GELU_TANH_C, x)), R.add(scalar(1, x), R.multiply(x2, scalar(pw.GELU_TANH_A, x))))
    t = R.tanh(u)
    du = R.multiply(scalar(pw.GELU_TANH_C, x), R.add(scalar(1, x), R.multiply(x2, scalar(3 * pw.GELU_TANH_A, x))))
    left = R.multiply(scalar(0.5, x), R.add(scalar(1, x), t))
    right = R.multiply(R.multiply(R.multiply(scalar(0.5, x), x), R.subtract(scalar(1, x), R.multiply(t, t))), du)
    return [R.multiply(g, R.add(left, right))]


def _leakyrelu_grad(call, out, g):
    x = call.args[0]
    return [R.where(_positive(x), g, R.multiply(g, scalar(call.attrs["alpha"], x)))]


def _infer_prelu(ctx: InferCtx) -> TensorStructInfo:
    x = infer_float_unary(ctx)
    alpha = ctx.tensor(1)
    if alpha.dtype and x.dtype and alpha.dtype != x.dtype:
        raise ctx.error(f"alpha must have the data's dtype {x.dtype}, got {alpha.dtype}", 1)
    if x.ndim == -1:
        return x
    axis = normalize_axis(ctx.attrs["axis"], x.ndim) if x.ndim else None
    if axis is None:
        raise ctx.error(f"axis {ctx.attrs['axis']} out of range for a {x.ndim}-D tensor", 0)
    if alpha.ndim not in (-1, 1):
        raise ctx.error(f"alpha must be 1-D (one slope per channel, or one for all), got {alpha.ndim}-D", 1)
    if alpha.shape is not None and x.shape is not None:
        c, a = x.shape[axis], alpha.shape[0]
        if isinstance(c, int) and isinstance(a, int) and a not in (c, 1):
            raise ctx.error(f"alpha must have {c} entries (the channels along axis {ctx.attrs['axis']}) or 1, got {a}", 1)
    return x


def _prelu_grad(call, out, g):
    # dx = g where x > 0 else alpha * g; d alpha[c] = sum over everything but channel c of
    # (x <= 0) * x * g.
    x, alpha = call.args
    xs = x.struct_info
    axis = call.attrs["axis"] % xs.ndim
    shape = [1] * xs.ndim
    a = alpha.struct_info.shape[0] if alpha.struct_info.shape is not None else None
    shape[axis] = a if a is not None else xs.shape[axis]
    alpha_b = R.reshape(alpha, shape_expr(shape))
    pos = _positive(x)
    dx = R.where(pos, g, R.multiply(g, alpha_b))
    neg_part = R.where(pos, scalar(0, x), R.multiply(x, g))
    others = [i for i in range(xs.ndim) if i != axis or a == 1]
    da = R.sum(neg_part, axis=others)
    if a == 1:
        da = R.reshape(da, shape_expr((1,)))
    return [dx, da]


def _selu_grad(call, out, g):
    # scale where x > 0, else scale * alpha * exp(x) = y + scale * alpha.
    x = call.args[0]
    neg = R.add(out, scalar(pw.SELU_SCALE * pw.SELU_ALPHA, x))
    return [R.multiply(g, R.where(_positive(x), scalar(pw.SELU_SCALE, x), neg))]


def _softplus_grad(call, out, g):
    # sigmoid(beta x), and 1 where beta x > threshold (the identity branch).
    x = call.args[0]
    bx = R.multiply(x, scalar(call.attrs["beta"], x))
    slope = R.where(R.greater(bx, scalar(call.attrs["threshold"], x)), scalar(1, x), R.sigmoid(bx))
    return [R.multiply(g, slope)]


gelu_tanh = register("relax.nn.gelu_tanh", ("data",), infer=infer_float_unary, kernel=pw.gelu_tanh, grad=_gelu_tanh_grad)
leakyrelu = register(
    "relax.nn.leakyrelu",
    ("data",),
    (Attr("alpha", at.to_float, 0.01),),
    infer=infer_float_unary,
    kernel=pw.leakyrelu,
    grad=_leakyrelu_grad,
)
prelu = register(
    "relax.nn.prelu",
    ("data", "alpha"),
    (Attr("axis", at.to_int, 1),),
    infer=_infer_prelu,
    kernel=pw.prelu,
    grad=_prelu_grad,
)
selu = register("relax.nn.selu", ("data",), infer=infer_float_unary, kernel=pw.selu, grad=_selu_grad)
softplus = register(
    "relax.nn.softplus",
    ("data",),
    (Attr("beta", at.to_float, 1.0), Attr("threshold", at.to_float, 20.0)),
    infer=infer_float_unary,
    kernel=pw.softplus,
    grad=_softplus_grad,
)
