"""More elementwise math: clip, inverse/hyperbolic trigonometry, rounding, checks, modular arithmetic, fma."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import PrimStructInfo, TensorStructInfo, is_int_dtype
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.elementwise import register_binary, quiet_ufunc_kernel, infer_binary, infer_unary, register_unary, ufunc_kernel, keep_dtype, scalar
from retrograd.ops.registry import Arg, InferCtx, no_gradient, register

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

# -- binary math --------------------------------------------------------------------------------


def _atan2_grad(call, out, g):
    y, x = call.args
    denom = R.add(R.multiply(y, y), R.multiply(x, x))
    return [R.divide(R.multiply(g, x), denom), R.negative(R.divide(R.multiply(g, y), denom))]


def no_int_zero_kernel(name, fn):
    """Integer division by zero is an error (NumPy would warn and give 0); floats give inf/nan as TVM."""

    def kernel(a, b):
        if is_int_dtype(str(a.dtype)) and np.any(b == 0):
            raise KernelError(f"R.{name}: integer division by zero")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(fn(a, b))

    kernel.__name__ = name
    return keep_dtype(name, kernel)


def _log_add_exp_grad(call, out, g):
    x1, x2 = call.args
    return [R.multiply(g, R.exp(R.subtract(x1, out))), R.multiply(g, R.exp(R.subtract(x2, out)))]


def _mod_grad(quotient):
    """x1 - q(x1 / x2) * x2: d/dx1 = 1, d/dx2 = -q(x1 / x2) (PyTorch's fmod/remainder rules)."""

    def grad(call, out, g):
        x1, x2 = call.args
        return [g, R.negative(R.multiply(g, quotient(R.divide(x1, x2))))]

    return grad


def _floor_divide_grad(call, out, g):
    # Piecewise constant: zero gradients, as PyTorch's floor_divide (TVM has no rule).
    return [R.zeros_like(call.args[0]), R.zeros_like(call.args[1])]


def _floor_divide(a, b):
    # TVM lowers float floordiv to floor(x1 / x2), which differs from NumPy's (fmod-based) floor
    # division at infinities (-inf // 2 is -inf, not NaN) and for quotients beyond 2**mantissa.
    if a.dtype.kind == "f":
        return np.floor(np.divide(a, b, order="C"))
    return np.floor_divide(a, b, order="C")


def _floor_mod(a, b):
    # TVM lowers float floormod to x1 - floor(x1 / x2) * x2 (x % inf is NaN, not x).
    if a.dtype.kind == "f":
        return a - np.floor(np.divide(a, b)) * b
    return np.mod(a, b, order="C")


atan2 = register_binary("atan2", keep_dtype("atan2", ufunc_kernel(np.arctan2)), _atan2_grad)
floor_divide = register(
    "relax.floor_divide", ("x1", "x2"), infer=infer_binary(None),
    kernel=no_int_zero_kernel("floor_divide", _floor_divide), grad=_floor_divide_grad,
    cost=ELEMENTWISE,
)
# TVM's mod truncates (C fmod: the sign of x1); floor_mod floors (Python's %: the sign of x2).
mod = register(
    "relax.mod", ("x1", "x2"), infer=infer_binary(None), kernel=no_int_zero_kernel("mod", np.fmod), grad=_mod_grad(R.trunc), cost=ELEMENTWISE
)
floor_mod = register(
    "relax.floor_mod", ("x1", "x2"), infer=infer_binary(None),
    kernel=no_int_zero_kernel("floor_mod", _floor_mod), grad=_mod_grad(R.floor),
    cost=ELEMENTWISE,
)
log_add_exp = register_binary("log_add_exp", keep_dtype("log_add_exp", ufunc_kernel(np.logaddexp)), _log_add_exp_grad)


def _infer_fma(ctx: InferCtx) -> TensorStructInfo:
    # TVM: no broadcasting; the three ndims, shapes and dtypes must agree.
    xs = [ctx.tensor(i) for i in range(3)]
    dtypes = {x.dtype for x in xs if x.dtype}
    if len(dtypes) > 1:
        raise ctx.error(f"dtypes {', '.join(x.dtype for x in xs)} must be equal")
    ndims = {x.ndim for x in xs if x.ndim != -1}
    if len(ndims) > 1:
        raise ctx.error("the three arguments must have the same number of dimensions")
    dtype = dtypes.pop() if dtypes else ""
    shapes = [x.shape for x in xs]
    if all(s is not None for s in shapes):
        for a, b, c in zip(*shapes):
            if not a == b == c:
                raise ctx.error("the three arguments must have the same shape")
        return TensorStructInfo(shapes[0], dtype)
    return TensorStructInfo(None, dtype, ndims.pop() if ndims else -1)


def ewise_fma_kernel(x1, x2, x3):
    return np.asarray(x1 * x2 + x3)


ewise_fma = register(
    "relax.ewise_fma",
    ("x1", "x2", "x3"),
    infer=_infer_fma,
    kernel=ewise_fma_kernel,
    grad=lambda c, o, g: [R.multiply(g, c.args[1]), R.multiply(g, c.args[0]), g],
    cost=ELEMENTWISE,
)
