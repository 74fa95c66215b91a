"""Binary elementwise ops with broadcasting: arithmetic, comparisons, maximum / minimum, atan2, division
and modulo, log_add_exp (TVM's binary.py; the logical and bitwise ones are in logical.py)."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import is_int_dtype
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.elementwise import infer_binary, keep_dtype, register_binary, select_kernel, ufunc_kernel
from retrograd.ops.registry import register
from retrograd.ops.rule_helpers import scalar

# -- kernels ------------------------------------------------------------------------------------


def _divide(a, b):
    if is_int_dtype(str(a.dtype)):
        # TVM integer division truncates toward zero (C semantics), unlike NumPy's floor division.
        if np.any(b == 0):
            raise KernelError("R.divide: integer division by zero")
        q = np.floor_divide(a, b, order="C")
        q += ((np.remainder(a, b) != 0) & ((a < 0) ^ (b < 0))).astype(q.dtype)
        return np.asarray(q)
    with np.errstate(divide="ignore", invalid="ignore"):  # x/0 is inf or nan, as in TVM
        return np.asarray(np.divide(a, b, order="C"))


def _power(a, b):
    if is_int_dtype(str(a.dtype)) and np.any(b < 0):
        raise KernelError("R.power: negative exponent for an integer tensor")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # nan for (-2) ** 0.5, as in TVM
        return np.asarray(np.power(a, b, order="C"))


def not_equal_kernel(a, b):
    # TVM compares floats with LLVM's ordered predicates: x != NaN is false (NumPy says true).
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return np.asarray(np.logical_or(np.less(a, b), np.greater(a, b)), order="C")
    return np.asarray(np.not_equal(a, b, order="C"))


# -- gradient rules (call, out, g) -> one entry per argument; the driver un-broadcasts ----------


def _max_min_grad(compare: str):
    """maximum/minimum route g to x1 where `compare(x1, x2)`, else to x2: TVM's rules, under which a tie
    goes to x1 for maximum (x1 >= x2) and to x2 for minimum (x1 < x2)."""

    def grad(call, out, g):
        x1, x2 = call.args
        zero = scalar(0, out)
        first = getattr(R, compare)(x1, x2)
        return [R.where(first, g, zero), R.where(first, zero, g)]

    return grad


add = register_binary("add", np.add, lambda c, o, g: [g, g], inplace=True)
subtract = register_binary("subtract", np.subtract, lambda c, o, g: [g, R.negative(g)], inplace=True)
multiply = register_binary(
    "multiply", np.multiply, lambda c, o, g: [R.multiply(g, c.args[1]), R.multiply(g, c.args[0])], inplace=True
)
divide = register(
    "relax.divide",
    ("x1", "x2"),
    infer=infer_binary(None),
    kernel=keep_dtype("divide", _divide),
    grad=lambda c, o, g: [R.divide(g, c.args[1]), R.negative(R.divide(R.multiply(g, o), c.args[1]))],
    cost=ELEMENTWISE,
)
power = register(
    "relax.power",
    ("x1", "x2"),
    infer=infer_binary(None),
    kernel=keep_dtype("power", _power),
    grad=lambda c, o, g: _power_grad(c.args[0], c.args[1], o, g),
    cost=ELEMENTWISE,
)


def _power_grad(x1, x2, out, g):
    """PyTorch's convention (pow_backward_self / pow_backward_exponent), which finite differences share:
    where x2 == 0 the base gets 0 (not 0 * x1 ** -1 = nan at x1 = 0); where x1 == 0 and x2 >= 0
    the exponent gets 0 (x1 ** x2 is constant 0 or 1 there), not out * log(0) = 0 * -inf = nan.
    Elsewhere log(x1) is NaN for x1 < 0, as in TVM and PyTorch. The guards replace the operands
    (never the products), so no inf or NaN is computed and masked."""
    zero2 = R.equal(x2, scalar(0, x2))
    base_exp = R.subtract(R.where(zero2, scalar(1, x2), x2), scalar(1, x2))
    dx1 = R.multiply(R.multiply(g, x2), R.power(x1, base_exp))
    flat = R.logical_and(R.equal(x1, scalar(0, x1)), R.greater_equal(x2, scalar(0, x2)))
    dx2 = R.multiply(R.multiply(g, out), R.log(R.where(flat, scalar(1, x1), x1)))
    return [dx1, dx2]


maximum = register_binary("maximum", select_kernel("maximum", np.maximum, np.greater), _max_min_grad("greater_equal"), inplace=True)
minimum = register_binary("minimum", select_kernel("minimum", np.minimum, np.less), _max_min_grad("less"), inplace=True)
equal = register_binary("equal", np.equal, out_dtype="bool")
not_equal = register_binary("not_equal", not_equal_kernel, out_dtype="bool")
greater = register_binary("greater", np.greater, out_dtype="bool")
greater_equal = register_binary("greater_equal", np.greater_equal, out_dtype="bool")
less = register_binary("less", np.less, out_dtype="bool")
less_equal = register_binary("less_equal", np.less_equal, out_dtype="bool")


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


def _mod_grad(quotient: str):
    """x1 - q(x1 / x2) * x2: d/dx1 = 1, d/dx2 = -q(x1 / x2) (PyTorch's fmod/remainder rules); `quotient`
    names the rounding op (unary.py registers it)."""

    def grad(call, out, g):
        x1, x2 = call.args
        return [g, R.negative(R.multiply(g, getattr(R, quotient)(R.divide(x1, x2))))]

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
    "relax.mod", ("x1", "x2"), infer=infer_binary(None), kernel=no_int_zero_kernel("mod", np.fmod), grad=_mod_grad("trunc"), cost=ELEMENTWISE
)
floor_mod = register(
    "relax.floor_mod", ("x1", "x2"), infer=infer_binary(None),
    kernel=no_int_zero_kernel("floor_mod", _floor_mod), grad=_mod_grad("floor"),
    cost=ELEMENTWISE,
)
log_add_exp = register_binary("log_add_exp", keep_dtype("log_add_exp", ufunc_kernel(np.logaddexp)), _log_add_exp_grad)
