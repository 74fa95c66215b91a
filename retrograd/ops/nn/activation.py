"""Activation ops: nn.relu, nn.silu, nn.gelu, nn.softmax, nn.log_softmax."""

from __future__ import annotations

import math

import numpy as np

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import activation as act_kernels
from retrograd.ops.cost import ELEMENTWISE, Cost, times
from retrograd.ops.elementwise import infer_float_unary, infer_unary
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.rule_helpers import scalar
from retrograd.ops.shape_utils import normalize_axis


def _infer_softmax(ctx: InferCtx) -> TensorStructInfo:
    x = infer_float_unary(ctx)
    axis = ctx.attrs["axis"]
    if x.ndim == 0 or (x.ndim != -1 and normalize_axis(axis, x.ndim) is None):
        raise ctx.error(f"axis {axis} out of range for a {x.ndim}-D tensor", 0)
    return x


def relu_kernel(x):
    # TVM lowers relu to max(x, 0), a select on x > 0: NaN gives 0, as np.fmax does.
    x = np.asarray(x)
    return np.fmax(x, x.dtype.type(0), order="C")


def _relu_into(x, out):
    # The kernel's computation into `out`: the executor may pass a dying input's buffer.
    return np.fmax(x, x.dtype.type(0), out=out)


def _relu_grad(call, out, g):
    # g where x > 0, else 0: PyTorch's convention at x == 0 (TVM passes g through at 0). Read from the
    # result (relu(x) > 0 exactly where x > 0, NaN included) so the input can die at the relu, which
    # then overwrites it: a store-all adjoint keeps one activation per layer, not two.
    zero = scalar(0, out)
    return [R.where(R.greater(out, zero), g, zero)]


def _silu_grad(call, out, g):
    # silu = x * s with s = sigmoid(x): d/dx = s + x * s * (1 - s) = s + y * (1 - s) (TVM's rule).
    x = call.args[0]
    s = R.sigmoid(x)
    return [R.multiply(g, R.add(s, R.multiply(out, R.subtract(scalar(1, x), s))))]


def _gelu_grad(call, out, g):
    # gelu = x * Phi(x): d/dx = Phi(x) + x * phi(x), with Phi(x) = (1 + erf(x / sqrt 2)) / 2 and
    # phi(x) = exp(-x^2 / 2) / sqrt(2 pi). TVM has no rule; this needs erf (unary.py).
    x = call.args[0]
    cdf = R.multiply(scalar(0.5, x), R.add(scalar(1, x), R.erf(R.multiply(x, scalar(1 / math.sqrt(2), x)))))
    pdf = R.multiply(R.exp(R.multiply(R.multiply(x, x), scalar(-0.5, x))), scalar(1 / math.sqrt(2 * math.pi), x))
    return [R.multiply(g, R.add(cdf, R.multiply(x, pdf)))]


def _softmax_grad(call, out, g):
    # (g - sum(g * y, axis, keepdims)) * y, with y the softmax itself (TVM's rule).
    axis = call.attrs["axis"]
    return [R.multiply(R.subtract(g, R.sum(R.multiply(g, out), axis=[axis], keepdims=True)), out)]


def _log_softmax_grad(call, out, g):
    # g - exp(y) * sum(g, axis, keepdims), with y the log_softmax itself (TVM's rule).
    axis = call.attrs["axis"]
    return [R.subtract(g, R.multiply(R.sum(g, axis=[axis], keepdims=True), R.exp(out)))]


relu = register("relax.nn.relu", ("data",), infer=infer_unary, kernel=relu_kernel, grad=_relu_grad, inplace=_relu_into, cost=ELEMENTWISE)
silu = register("relax.nn.silu", ("data",), infer=infer_float_unary, kernel=act_kernels.silu, grad=_silu_grad, cost=ELEMENTWISE)
gelu = register("relax.nn.gelu", ("data",), infer=infer_float_unary, kernel=act_kernels.gelu, grad=_gelu_grad, cost=ELEMENTWISE)
softmax = register(
    "relax.nn.softmax",
    ("data",),
    (Attr("axis", at.to_int, -1),),
    infer=_infer_softmax,
    kernel=act_kernels.softmax,
    grad=_softmax_grad,
    cost=Cost("reduce", times(5.0)),
)
log_softmax = register(
    "relax.nn.log_softmax",
    ("data",),
    (Attr("axis", at.to_int, -1),),
    infer=_infer_softmax,
    kernel=act_kernels.log_softmax,
    grad=_log_softmax_grad,
    cost=Cost("reduce", times(5.0)),
)
