"""The ONNX converter table: op type -> function(g, node, inputs, attrs) building retrograd calls.

`g` is the GraphImporter (emit, const, value_of); inputs are retrograd expressions (None for an
omitted optional input). A converter returns one expression or NumPy array per node output.
This module holds the table and the elementwise / math families; the others register into it.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.expr import Constant
from retrograd.ops.api import R

CONVERTERS: dict = {}
# Input positions each op reads at import time (folded into attributes, never runtime parameters).
VALUE_INPUTS: dict[str, tuple[int, ...]] = {}


class OnnxNodeError(UnsupportedError):
    """A node retrograd cannot import: the message names the node (index, name, op type)."""


class NeedsConstant(OnnxNodeError):
    """A value read at import time (a shape, axes) is a runtime input; `name` is that input."""

    def __init__(self, name: str, message: str | None = None):
        super().__init__(message or f"input '{name}' must be a constant")
        self.name = name


def converter(*op_types: str, values: tuple[int, ...] = ()):
    def deco(fn):
        for t in op_types:
            CONVERTERS[t] = fn
            if values:
                VALUE_INPUTS[t] = values
        return fn

    return deco


def sinfo(e):
    return e.struct_info


def dtype_of(e) -> str:
    return e.struct_info.dtype


def ndim_of(e) -> int:
    return e.struct_info.ndim


def scalar(g, value, like) -> Constant:
    """A 0-d constant of `like`'s dtype."""
    return g.const(value, dtype_of(like))


def input_value(g, node, i: int, default=None):
    """The import-time content of optional input i (None/default when omitted)."""
    if i >= len(node.input) or not node.input[i]:
        return default
    return g.value_of(node.input[i])


def unsupported_attr(node, attrs, name, allowed) -> None:
    if name in attrs and attrs[name] not in allowed:
        raise UnsupportedError(f"attribute {name}={attrs[name]!r} is not supported")


# -- elementwise --------------------------------------------------------------------------------
_UNARY = {
    "Abs": R.abs, "Acos": R.acos, "Acosh": R.acosh, "Asin": R.asin, "Asinh": R.asinh, "Atan": R.atan,
    "Atanh": R.atanh, "Ceil": R.ceil, "Cos": R.cos, "Cosh": R.cosh, "Erf": R.erf, "Exp": R.exp,
    "Floor": R.floor, "Log": R.log, "Neg": R.negative, "Sigmoid": R.sigmoid, "Sign": R.sign, "Sin": R.sin,
    "Sinh": R.sinh, "Sqrt": R.sqrt, "Tan": R.tan, "Tanh": R.tanh, "Not": R.logical_not, "IsNaN": R.isnan,
    "Relu": R.nn.relu, "BitwiseNot": R.bitwise_not, "Round": R.round,
}
_BINARY = {
    "Add": R.add, "Sub": R.subtract, "Mul": R.multiply, "Pow": R.power, "And": R.logical_and,
    "Or": R.logical_or, "Xor": R.logical_xor, "Equal": R.equal, "Greater": R.greater, "Less": R.less,
    "GreaterOrEqual": R.greater_equal, "LessOrEqual": R.less_equal, "BitwiseAnd": R.bitwise_and,
    "BitwiseOr": R.bitwise_or, "BitwiseXor": R.bitwise_xor,
}


@converter(*_UNARY)
def _unary(g, node, inputs, attrs):
    return _UNARY[node.op_type](inputs[0])


@converter(*_BINARY)
def _binary(g, node, inputs, attrs):
    a, b = inputs
    if node.op_type == "Pow" and dtype_of(a) != dtype_of(b):
        b = R.astype(b, dtype=dtype_of(a))
    return _BINARY[node.op_type](a, b)


@converter("Div")
def _div(g, node, inputs, attrs):
    a, b = inputs
    if dtype_of(a).startswith(("int", "uint")):  # ONNX integer division truncates toward zero
        q = R.divide(R.astype(a, dtype="float64"), R.astype(b, dtype="float64"))
        return R.astype(R.trunc(q), dtype=dtype_of(a))
    return R.divide(a, b)


@converter("Mod")
def _mod(g, node, inputs, attrs):
    a, b = inputs
    if attrs.get("fmod", 0):
        # C fmod: the sign of the dividend, as a - trunc(a / b) * b
        if dtype_of(a).startswith(("int", "uint")):
            q = R.astype(R.trunc(R.divide(R.astype(a, dtype="float64"), R.astype(b, dtype="float64"))), dtype=dtype_of(a))
            return R.subtract(a, R.multiply(q, b))
        return R.subtract(a, R.multiply(R.trunc(R.divide(a, b)), b))
    if dtype_of(a).startswith(("float", "bfloat")):
        # NumPy's mod from C's fmod, exact where a - floor(a / b) * b is not (an infinite divisor)
        r = g.emit(R.mod(a, b))
        zero = scalar(g, 0, r)
        fix = g.emit(R.logical_and(R.not_equal(r, zero), R.not_equal(R.less(r, zero), R.less(b, zero))))
        return R.where(fix, R.add(r, b), r)
    return R.floor_mod(a, b)


@converter("BitShift")
def _bitshift(g, node, inputs, attrs):
    a, b = inputs
    dt = dtype_of(a)
    width = np.iinfo(dt).bits
    # a shift by a negative amount or by the bit width or more: 0 (a right shift of a negative
    # value: -1, the sign filling the result), as ONNX's reference; the kernels refuse such amounts
    outside = g.emit(R.logical_or(R.less(b, scalar(g, 0, b)), R.greater_equal(b, scalar(g, width, b))))
    safe = g.emit(R.where(outside, scalar(g, 0, b), b))
    shifted = g.emit((R.left_shift if attrs["direction"] == "LEFT" else R.right_shift)(a, safe))
    fill = scalar(g, 0, a)
    if attrs["direction"] != "LEFT" and dt.startswith("int"):
        fill = g.emit(R.where(R.less(a, scalar(g, 0, a)), scalar(g, -1, a), fill))
    return R.where(outside, fill, shifted)


@converter("IsInf")
def _isinf(g, node, inputs, attrs):
    x = inputs[0]
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    inf = R.isinf(x)
    if pos and neg:
        return inf
    zero = scalar(g, 0, x)
    if pos:
        return R.logical_and(inf, R.greater(x, zero))
    if neg:
        return R.logical_and(inf, R.less(x, zero))
    return R.logical_and(inf, R.logical_not(inf))


@converter("Reciprocal")
def _reciprocal(g, node, inputs, attrs):
    return R.divide(scalar(g, 1, inputs[0]), inputs[0])


@converter("Max", "Min", "Sum", "Mean")
def _variadic(g, node, inputs, attrs):
    fn = {"Max": R.maximum, "Min": R.minimum, "Sum": R.add, "Mean": R.add}[node.op_type]
    acc = inputs[0]
    for x in inputs[1:]:
        if fn is R.add or not dtype_of(acc).startswith(("float", "bfloat")):
            acc = g.emit(fn(acc, x))
        else:  # a NaN on either side gives NaN (onnxruntime, ONNX's reference); R.maximum drops one in acc
            acc = g.emit(R.where(g.emit(R.isnan(acc)), acc, g.emit(fn(acc, x))))
    if node.op_type == "Mean":
        return R.divide(acc, scalar(g, len(inputs), acc))
    if len(inputs) == 1:
        return R.add(acc, scalar(g, 0, acc))
    return acc


@converter("Where")
def _where(g, node, inputs, attrs):
    return R.where(*inputs)


@converter("Identity")
def _identity(g, node, inputs, attrs):
    return inputs[0]


@converter("Clip")
def _clip(g, node, inputs, attrs):
    x = inputs[0]
    lo = inputs[1] if len(inputs) > 1 else None
    hi = inputs[2] if len(inputs) > 2 else None
    if "min" in attrs:
        lo = scalar(g, attrs["min"], x)
    if "max" in attrs:
        hi = scalar(g, attrs["max"], x)
    return clip_keeping_nan(g, x, lo, hi)


def clip_keeping_nan(g, x, lo, hi):
    """x limited to [lo, hi] (either None: no limit) by two selects, so that a NaN in x stays NaN
    (onnxruntime, ONNX's reference) and x keeps the gradient at a bound; R.clip and R.maximum(x, lo)
    give the bound for a NaN (TVM's rule)."""
    for bound, past in ((lo, R.less), (hi, R.greater)):
        if bound is not None:
            x = g.emit(R.where(g.emit(past(x, bound)), bound, x))
    return x


# -- activations --------------------------------------------------------------------------------
@converter("LeakyRelu")
def _leaky(g, node, inputs, attrs):
    return R.nn.leakyrelu(inputs[0], alpha=float(attrs.get("alpha", 0.01)))


@converter("PRelu")
def _prelu(g, node, inputs, attrs):
    x, slope = inputs
    zero = scalar(g, 0, x)
    return R.where(R.less(x, zero), R.multiply(x, slope), x)


@converter("Elu", "Celu")
def _elu(g, node, inputs, attrs):
    x = inputs[0]
    alpha = float(attrs.get("alpha", 1.0))
    xs = x if node.op_type == "Elu" else g.emit(R.divide(x, scalar(g, alpha, x)))
    neg = R.multiply(scalar(g, alpha, x), R.subtract(R.exp(xs), scalar(g, 1, x)))
    return R.where(R.greater(x, scalar(g, 0, x)), x, g.emit(neg))


@converter("Selu")
def _selu(g, node, inputs, attrs):
    x = inputs[0]
    alpha = float(attrs.get("alpha", 1.67326319217681884765625))
    gamma = float(attrs.get("gamma", 1.05070102214813232421875))
    neg = g.emit(R.multiply(scalar(g, alpha, x), R.subtract(R.exp(x), scalar(g, 1, x))))
    return R.multiply(scalar(g, gamma, x), R.where(R.greater(x, scalar(g, 0, x)), x, neg))


@converter("ThresholdedRelu")
def _thresholded(g, node, inputs, attrs):
    x = inputs[0]
    return R.where(R.greater(x, scalar(g, float(attrs.get("alpha", 1.0)), x)), x, scalar(g, 0, x))


@converter("HardSigmoid", "HardSwish")
def _hard_sigmoid(g, node, inputs, attrs):
    x = inputs[0]
    alpha, beta = (float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))) if node.op_type == "HardSigmoid" else (1 / 6, 0.5)
    y = g.emit(R.add(R.multiply(x, scalar(g, alpha, x)), scalar(g, beta, x)))
    y = g.emit(R.minimum(R.maximum(y, scalar(g, 0, x)), scalar(g, 1, x)))
    return y if node.op_type == "HardSigmoid" else R.multiply(x, y)


@converter("Softplus")
def _softplus(g, node, inputs, attrs):
    x = inputs[0]
    return R.log(R.add(R.exp(x), scalar(g, 1, x)))


@converter("Softsign")
def _softsign(g, node, inputs, attrs):
    x = inputs[0]
    return R.divide(x, R.add(R.abs(x), scalar(g, 1, x)))


@converter("Mish")
def _mish(g, node, inputs, attrs):
    x = inputs[0]
    return R.multiply(x, R.tanh(R.log(R.add(R.exp(x), scalar(g, 1, x)))))


@converter("Gelu")
def _gelu(g, node, inputs, attrs):
    approx = attrs.get("approximate", "none")
    return R.nn.gelu_tanh(inputs[0]) if approx == "tanh" else R.nn.gelu(inputs[0])


@converter("Swish")
def _swish(g, node, inputs, attrs):
    x = inputs[0]
    return R.multiply(x, R.sigmoid(R.multiply(x, scalar(g, float(attrs.get("alpha", 1.0)), x))))


@converter("Shrink")
def _shrink(g, node, inputs, attrs):
    x = inputs[0]
    lambd, bias = float(attrs.get("lambd", 0.5)), float(attrs.get("bias", 0.0))
    lo = R.where(R.less(x, scalar(g, -lambd, x)), R.add(x, scalar(g, bias, x)), scalar(g, 0, x))
    return R.where(R.greater(x, scalar(g, lambd, x)), R.subtract(x, scalar(g, bias, x)), g.emit(lo))


def _axis_softmax(g, node, attrs, x, fn):
    axis = int(attrs.get("axis", -1 if g.opset >= 13 else 1))
    if g.opset >= 13:
        return fn(x, axis=axis)
    # opset < 13: over the flattened trailing dims (the input coerced to 2-D at `axis`)
    shape = x.struct_info.shape
    flat = g.emit(reshape(x, (int(np.prod(shape[:axis])) if axis else 1, -1)))
    return reshape(g.emit(fn(flat, axis=1)), shape)


@converter("Softmax")
def _softmax(g, node, inputs, attrs):
    return _axis_softmax(g, node, attrs, inputs[0], R.nn.softmax)


@converter("LogSoftmax")
def _log_softmax(g, node, inputs, attrs):
    return _axis_softmax(g, node, attrs, inputs[0], R.nn.log_softmax)


@converter("Hardmax")
def _hardmax(g, node, inputs, attrs):
    def hardmax(x, axis):
        axis %= ndim_of(x)
        idx = g.emit(R.argmax(x, axis=axis))
        return R.one_hot(idx, prim(1, dtype_of(x)), prim(0, dtype_of(x)), depth=x.struct_info.shape[axis], axis=axis)

    return _axis_softmax(g, node, attrs, inputs[0], hardmax)


def reshape(x, shape):
    from retrograd.ir.expr import ShapeExpr

    return R.reshape(x, ShapeExpr(tuple(int(d) if not isinstance(d, str) else d for d in shape)))


def broadcast_to(x, shape):
    from retrograd.ir.expr import Expr, ShapeExpr

    return R.broadcast_to(x, shape if isinstance(shape, Expr) else ShapeExpr(tuple(shape)))


def prim(value, dtype):
    from retrograd.ir.expr import PrimValue

    return PrimValue(float(value) if dtype.startswith(("float", "bfloat")) else int(value), dtype)


# register the other families into the table
from retrograd.frontend import onnx_ops_attention, onnx_ops_nn, onnx_ops_reduce, onnx_ops_rnn, onnx_ops_shape  # noqa: E402,F401
from retrograd.frontend import onnx_ops_dynamic, onnx_ops_grid_sample, onnx_ops_resize  # noqa: E402,F401  (after the others: the first wraps their converters)
