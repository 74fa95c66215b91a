"""Torch kernels of the elementwise, math and logical families (ops/elementwise*.py, ops/logical.py)."""

from __future__ import annotations

import torch

from retrograd.errors import KernelError
from retrograd.ops.torch_kernels.select import select

_INT_KINDS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64)


def is_int(t) -> bool:
    return t.dtype in _INT_KINDS


def is_float(t) -> bool:
    return t.dtype.is_floating_point


def keep_dtype(name, fn):
    """Arithmetic in the arguments' dtype (docs/architecture.md): where NumPy would promote, an error."""

    def kernel(*xs):
        if not is_float(xs[0]):
            raise KernelError(f"R.{name}: not defined for {xs[0].dtype} tensors".replace("torch.", ""))
        return fn(*xs)

    return kernel


def _no_bool(name, fn):
    def kernel(*xs):
        if xs[0].dtype == torch.bool:
            raise KernelError(f"R.{name}: not defined for bool tensors")
        return fn(*xs)

    return kernel


def divide(a, b):
    if is_int(a):
        if bool((b == 0).any()):
            raise KernelError("R.divide: integer division by zero")
        if a.is_signed():
            # The least value over -1 overflows: x86's idiv traps (SIGFPE kills the process, int32 and
            # int64); NumPy wraps it to the least value itself, which -x is in two's complement.
            wraps = (b == -1) & (a == torch.iinfo(a.dtype).min)
            if bool(wraps.any()):
                return torch.where(wraps, a, torch.div(a, torch.where(wraps, 1, b), rounding_mode="trunc"))
        return torch.div(a, b, rounding_mode="trunc")
    if a.dtype == torch.bool:
        raise KernelError("R.divide: not defined for bool tensors")
    return torch.div(a, b)


def power(a, b):
    if is_int(a) and bool((b < 0).any()):
        raise KernelError("R.power: negative exponent for an integer tensor")
    return torch.pow(a, b)


def maximum(a, b):
    # One comparison and a select, as TVM lowers it: a NaN in x1 gives x2 (see ops/elementwise.py).
    if is_float(a):
        return select(a > b, a, b).contiguous()
    return torch.maximum(a, b)


def minimum(a, b):
    if is_float(a):
        return select(a < b, a, b).contiguous()
    return torch.minimum(a, b)


def not_equal(a, b):
    if is_float(a) or is_float(b):
        return torch.logical_or(a < b, a > b)  # ordered: x != NaN is false, as in TVM
    return torch.ne(a, b)


def _int_safe(fn):
    def kernel(x):
        return x.clone() if not is_float(x) else fn(x)

    return kernel


def sign(x):
    if x.dtype == torch.bool:
        return x.clone()
    out = torch.sign(x)
    if is_float(x):
        out = out.nan_to_num_(nan=0.0, posinf=1.0, neginf=-1.0)  # NaN gives 0 (TVM's sign); no infinities here
    return out


def _bound(value, t):
    if is_int(t):
        info = torch.iinfo(t.dtype)
        value = info.max if value >= info.max else info.min if value <= info.min else int(value)
    return torch.tensor(value, device=t.device).to(t.dtype)


def clip(x, min, max):
    return maximum(minimum(x, _bound(max, x)), _bound(min, x))


def _no_int_zero(name, fn):
    def kernel(a, b):
        if is_int(a) and bool((b == 0).any()):
            raise KernelError(f"R.{name}: integer division by zero")
        return fn(a, b)

    return kernel


def floor_divide(a, b):
    if is_float(a):
        return torch.floor(torch.div(a, b))
    return torch.div(a, b, rounding_mode="floor")


def floor_mod(a, b):
    if is_float(a):
        return a - torch.floor(torch.div(a, b)) * b
    return torch.remainder(a, b)


def _same_dtype(fn):
    def kernel(*xs):
        return fn(*xs).to(xs[0].dtype)

    return kernel


def _shift(fn, name):
    def kernel(a, b):
        bits = a.element_size() * 8
        if bool(((b < 0) | (b >= bits)).any()):
            raise KernelError(f"R.{name}: shift amounts must be in [0, {bits})")
        return fn(a, b).to(a.dtype)

    return kernel


def abs_(x):
    return x.clone() if x.dtype == torch.bool else torch.abs(x)  # |bool| is itself (NumPy); ATen has no bool abs


def rsqrt(x):
    return 1 / torch.sqrt(x)


def sigmoid(x):
    return torch.div(1.0, 1.0 + torch.exp(-x)).to(x.dtype)


KERNELS = {
    "relax.add": torch.add,
    "relax.subtract": _no_bool("subtract", torch.subtract),
    "relax.multiply": torch.multiply,
    "relax.divide": divide,
    "relax.power": _no_bool("power", power),
    "relax.maximum": maximum,
    "relax.minimum": minimum,
    "relax.equal": torch.eq,
    "relax.not_equal": not_equal,
    "relax.greater": torch.gt,
    "relax.greater_equal": torch.ge,
    "relax.less": torch.lt,
    "relax.less_equal": torch.le,
    "relax.abs": abs_,
    "relax.negative": _no_bool("negative", torch.negative),
    "relax.cos": torch.cos,
    "relax.sin": torch.sin,
    "relax.exp": torch.exp,
    "relax.log": torch.log,
    "relax.sqrt": torch.sqrt,
    "relax.tanh": torch.tanh,
    "relax.sigmoid": sigmoid,
    "relax.clip": clip,
    "relax.acos": torch.acos,
    "relax.acosh": torch.acosh,
    "relax.asin": torch.asin,
    "relax.asinh": torch.asinh,
    "relax.atan": torch.atan,
    "relax.atanh": torch.atanh,
    "relax.cosh": torch.cosh,
    "relax.sinh": torch.sinh,
    "relax.tan": torch.tan,
    "relax.rsqrt": rsqrt,
    "relax.square": _no_bool("square", torch.square),
    "relax.ceil": _int_safe(torch.ceil),
    "relax.floor": _int_safe(torch.floor),
    "relax.round": _int_safe(torch.round),
    "relax.trunc": _int_safe(torch.trunc),
    "relax.sign": sign,
    "relax.isfinite": torch.isfinite,
    "relax.isinf": torch.isinf,
    "relax.isnan": torch.isnan,
    "relax.atan2": keep_dtype("atan2", torch.atan2),
    "relax.floor_divide": _no_bool("floor_divide", _no_int_zero("floor_divide", floor_divide)),
    "relax.mod": _no_bool("mod", _no_int_zero("mod", torch.fmod)),
    "relax.floor_mod": _no_bool("floor_mod", _no_int_zero("floor_mod", floor_mod)),
    "relax.log_add_exp": keep_dtype("log_add_exp", torch.logaddexp),
    "relax.ewise_fma": lambda x1, x2, x3: x1 * x2 + x3,
    "relax.logical_and": _same_dtype(torch.logical_and),
    "relax.logical_or": _same_dtype(torch.logical_or),
    "relax.logical_xor": _same_dtype(torch.logical_xor),
    "relax.logical_not": _same_dtype(torch.logical_not),
    "relax.bitwise_and": torch.bitwise_and,
    "relax.bitwise_or": torch.bitwise_or,
    "relax.bitwise_xor": torch.bitwise_xor,
    "relax.bitwise_not": torch.bitwise_not,
    "relax.left_shift": _shift(torch.bitwise_left_shift, "left_shift"),
    "relax.right_shift": _shift(torch.bitwise_right_shift, "right_shift"),
}


# Kernels that can write their result over a dying argument's buffer (the plan's in-place target,
# runtime/inplace.py): float arithmetic keeping its arguments' dtype, computed by ATen into `out`.
# The executor calls them only when every tensor argument has the buffer's dtype and the broadcast
# shape is the buffer's, so the result is the kernel's own, bit for bit.
INTO = {
    "relax.add": lambda out, a, b: torch.add(a, b, out=out),
    "relax.subtract": lambda out, a, b: torch.subtract(a, b, out=out),
    "relax.multiply": lambda out, a, b: torch.multiply(a, b, out=out),
    "relax.exp": lambda out, x: torch.exp(x, out=out),
    "relax.negative": lambda out, x: torch.negative(x, out=out),
}
