"""Unary elementwise ops: abs, negation, trigonometry, exp / log / sqrt, erf, sigmoid, clip, rounding, sign,
finiteness checks (TVM's unary.py; logical_not and bitwise_not are in logical.py)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.ir.struct_info import PrimStructInfo, TensorStructInfo
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.kernels import special
from retrograd.ops.kernels.index import negative_into
from retrograd.ops.elementwise import infer_unary, keep_dtype, quiet_ufunc_kernel, register_unary, ufunc_kernel
from retrograd.ops.registry import Arg, InferCtx, no_gradient, register
from retrograd.ops.rule_helpers import scalar


def sigmoid_kernel(x):
    # exp(-x) overflows to inf for very negative x, giving the correct limit 0: silence the warning.
    with np.errstate(over="ignore"):
        return np.asarray(np.divide(1.0, 1.0 + np.exp(-x), order="C"), dtype=x.dtype)


abs = register_unary(
    "abs",
    ufunc_kernel(np.abs),
    lambda c, o, g: [R.multiply(g, R.where(R.less(c.args[0], scalar(0, o)), scalar(-1, o), scalar(1, o)))],
    infer=infer_unary,
    inplace=np.absolute,
)
negative = register_unary("negative", ufunc_kernel(np.negative), lambda c, o, g: [R.negative(g)], infer=infer_unary, inplace=negative_into)
cos = register_unary("cos", ufunc_kernel(np.cos), lambda c, o, g: [R.negative(R.multiply(g, R.sin(c.args[0])))], inplace=np.cos)
sin = register_unary("sin", ufunc_kernel(np.sin), lambda c, o, g: [R.multiply(g, R.cos(c.args[0]))], inplace=np.sin)
exp = register_unary("exp", quiet_ufunc_kernel(np.exp), lambda c, o, g: [R.multiply(g, o)])
log = register_unary("log", quiet_ufunc_kernel(np.log), lambda c, o, g: [R.divide(g, c.args[0])])
sqrt = register_unary("sqrt", quiet_ufunc_kernel(np.sqrt), lambda c, o, g: [R.divide(R.multiply(scalar(0.5, o), g), o)])
tanh = register_unary(
    "tanh", ufunc_kernel(np.tanh), lambda c, o, g: [R.multiply(g, R.subtract(scalar(1, o), R.multiply(o, o)))], inplace=np.tanh
)
sigmoid = register_unary(
    "sigmoid", sigmoid_kernel, lambda c, o, g: [R.multiply(R.multiply(g, o), R.subtract(scalar(1, o), o))]
)

# -- clip ---------------------------------------------------------------------------------------


def _infer_clip(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    for i in (1, 2):
        if not isinstance(ctx.sinfo[i], PrimStructInfo):
            raise ctx.error("expects a scalar prim value (R.prim_value or a number)", i)
    return x


def _bound(value, dtype):
    """A clip bound in x's dtype; integer bounds beyond the dtype's range saturate (a cast would wrap
    300 to 44 for uint8, where TVM refuses the literal); an infinite bound is no bound (PyTorch's
    clamp(min=0) of an int64 tensor exports with max=inf, which a cast would turn into INT64_MIN)."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        value = info.max if value >= info.max else info.min if value <= info.min else value
    return np.asarray(value).astype(dtype)


def clip_kernel(x, min, max):
    # TVM computes max(min(x, hi), lo) in x's dtype with its select-based max/min: NaN gives max(hi, lo).
    lo, hi = _bound(min, x.dtype), _bound(max, x.dtype)
    return np.asarray(R.maximum.kernel(R.minimum.kernel(x, hi), lo), dtype=x.dtype)


def _clip_grad(call, out, g):
    # PyTorch's clamp: the gradient passes where min <= x <= max (both ends inclusive), which is
    # exactly where the result equals x; this also holds for bounds known only at run time.
    return [R.where(R.equal(out, call.args[0]), g, scalar(0, out)), None, None]


clip = register(
    "relax.clip", ("x", Arg("min", "prim"), Arg("max", "prim")), infer=_infer_clip, kernel=clip_kernel, grad=_clip_grad, cost=ELEMENTWISE
)

# -- unary math ---------------------------------------------------------------------------------


def _one(x):
    return scalar(1, x)


acos = register_unary(
    "acos", quiet_ufunc_kernel(np.arccos),
    lambda c, o, g: [R.negative(R.divide(g, R.sqrt(R.subtract(_one(o), R.multiply(c.args[0], c.args[0])))))],
)
acosh = register_unary(
    "acosh", quiet_ufunc_kernel(np.arccosh),
    lambda c, o, g: [R.divide(g, R.sqrt(R.subtract(R.multiply(c.args[0], c.args[0]), _one(o))))],
)
asin = register_unary(
    "asin", quiet_ufunc_kernel(np.arcsin),
    lambda c, o, g: [R.divide(g, R.sqrt(R.subtract(_one(o), R.multiply(c.args[0], c.args[0]))))],
)
asinh = register_unary(
    "asinh", ufunc_kernel(np.arcsinh), lambda c, o, g: [R.divide(g, R.sqrt(R.add(R.multiply(c.args[0], c.args[0]), _one(o))))]
)
atan = register_unary("atan", ufunc_kernel(np.arctan), lambda c, o, g: [R.divide(g, R.add(_one(o), R.multiply(c.args[0], c.args[0])))])
atanh = register_unary(
    "atanh", quiet_ufunc_kernel(np.arctanh), lambda c, o, g: [R.divide(g, R.subtract(_one(o), R.multiply(c.args[0], c.args[0])))]
)
cosh = register_unary("cosh", quiet_ufunc_kernel(np.cosh), lambda c, o, g: [R.multiply(g, R.sinh(c.args[0]))])
sinh = register_unary("sinh", quiet_ufunc_kernel(np.sinh), lambda c, o, g: [R.multiply(g, R.cosh(c.args[0]))])
tan = register_unary("tan", ufunc_kernel(np.tan), lambda c, o, g: [R.multiply(g, R.add(_one(o), R.multiply(o, o)))])
# d erf(x) / dx = 2 / sqrt(pi) * exp(-x^2) (gelu's gradient emits erf).
erf = register_unary(
    "erf", special.erf,
    lambda c, o, g: [R.multiply(g, R.multiply(R.exp(R.negative(R.multiply(c.args[0], c.args[0]))), scalar(2 / math.sqrt(math.pi), o)))],
)


def rsqrt_kernel(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(1 / np.sqrt(x), dtype=x.dtype)


rsqrt = register_unary(
    "rsqrt", rsqrt_kernel, lambda c, o, g: [R.multiply(R.multiply(scalar(-0.5, o), g), R.multiply(o, R.multiply(o, o)))]
)
square = register_unary(
    "square", keep_dtype("square", ufunc_kernel(np.square)), lambda c, o, g: [R.multiply(R.multiply(scalar(2, o), g), c.args[0])], infer=infer_unary,
    inplace=np.square,
)


def _zero_grad(call, out, g):
    """Piecewise-constant ops (floor, sign, ...): a zero gradient, as PyTorch gives (TVM has no rule)."""
    return [R.zeros_like(call.args[0])]


def int_safe_kernel(ufunc):
    """Rounding ops are the identity on integers (NumPy's ceil would turn them into floats)."""

    def kernel(x):
        return np.array(x, copy=True) if x.dtype.kind in "iub" else np.asarray(ufunc(x))

    kernel.__name__ = ufunc.__name__
    return kernel


ceil = register_unary("ceil", int_safe_kernel(np.ceil), _zero_grad, infer=infer_unary)
floor = register_unary("floor", int_safe_kernel(np.floor), _zero_grad, infer=infer_unary)
# TVM lowers round to nearbyint: halves go to the even neighbour, as np.round and torch.round do.
round = register_unary("round", int_safe_kernel(np.round), _zero_grad, infer=infer_unary)
trunc = register_unary("trunc", int_safe_kernel(np.trunc), _zero_grad, infer=infer_unary)


def sign_kernel(x):
    # TVM lowers sign to selects on x > 0 and x < 0: NaN gives 0 (NumPy and PyTorch give NaN); a bool
    # is its own sign (NumPy has no sign for bools).
    if x.dtype == np.bool_:
        return x.copy()
    out = np.asarray(np.sign(x, order="C"))  # a fresh array, also for a 0-d x (np.sign gives a scalar)
    if x.dtype.kind == "f":
        out[np.isnan(x)] = 0
    return np.asarray(out)


sign = register_unary("sign", sign_kernel, _zero_grad, infer=infer_unary)


def _infer_check(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    return TensorStructInfo(x.shape, "bool", x.ndim)


isfinite = register_unary("isfinite", ufunc_kernel(np.isfinite), no_gradient, infer=_infer_check)
isinf = register_unary("isinf", ufunc_kernel(np.isinf), no_gradient, infer=_infer_check)
isnan = register_unary("isnan", ufunc_kernel(np.isnan), no_gradient, infer=_infer_check)
