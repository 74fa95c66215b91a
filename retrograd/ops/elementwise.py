"""Elementwise ops: binary arithmetic and comparison with broadcasting, and unary math."""

from __future__ import annotations

import numpy as np

from retrograd.errors import GradientError, KernelError
from retrograd.ir.expr import Expr, ShapeExpr, const, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype, is_int_dtype
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.registry import InferCtx, no_gradient, register
from retrograd.ops.shape_utils import broadcast_shapes, same_dtype

# -- helpers shared by the gradient rules of every core family ----------------------------------


def scalar(value, like: Expr) -> Expr:
    """A 0-d constant with the dtype of `like` (rules must not mix dtypes: TVM's binary ops refuse)."""
    return const(value, like.struct_info.dtype)


def shape_of(expr: Expr, call=None) -> ShapeExpr:
    """The (static or symbolic) shape of a tensor expression, for broadcast_to / reshape / zeros."""
    s = expr.struct_info
    if not isinstance(s, TensorStructInfo) or s.shape is None:
        span = getattr(call, "span", None)
        raise GradientError(f"the gradient needs the shape of a tensor whose shape is unknown ({s})", span)
    return shape_expr(s.shape)


# -- inference ----------------------------------------------------------------------------------


def infer_binary(out_dtype: str | None):
    def infer(ctx: InferCtx) -> TensorStructInfo:
        a, b = ctx.tensor(0), ctx.tensor(1)
        dtype = same_dtype(a, b)
        # TVM's comparisons take mixed dtypes (int32 < float32 compares the values): only arithmetic
        # needs one dtype.
        if dtype is None and out_dtype != "bool":
            raise ctx.error(f"dtypes {a.dtype} and {b.dtype} differ")
        dtype = out_dtype or dtype
        if a.shape is None or b.shape is None:
            ndim = -1 if a.ndim == -1 or b.ndim == -1 else max(a.ndim, b.ndim)
            return TensorStructInfo(None, dtype, ndim)
        shape = broadcast_shapes(a.shape, b.shape)
        if shape is None:
            raise ctx.error("shapes cannot be broadcast together")
        return TensorStructInfo(shape, dtype)

    return infer


def infer_unary(ctx: InferCtx) -> TensorStructInfo:
    return ctx.tensor(0)


def infer_float_unary(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    # TVM: transcendental ops require a float input (an int tensor would silently truncate).
    if x.dtype and not is_float_dtype(x.dtype):
        raise ctx.error(f"expects a float tensor, got dtype {x.dtype}", 0)
    return x


# -- kernels ------------------------------------------------------------------------------------


def ufunc_kernel(ufunc):
    """NumPy returns scalars for 0-d inputs; kernels return arrays of the input dtype.

    Results are in C order whatever the inputs' layout (NumPy's default follows the inputs), so that
    whether a later reshape can view them is known statically (retrograd.analysis).
    """

    def kernel(*arrays):
        try:
            return np.asarray(ufunc(*arrays, order="C"))
        except TypeError:  # NumPy has no loop for these dtypes (bool subtract/negative): nor has TVM a kernel
            dtypes = ", ".join(sorted({str(a.dtype) for a in arrays}))
            raise KernelError(f"R.{ufunc.__name__}: not defined for {dtypes} tensors") from None

    kernel.__name__ = ufunc.__name__
    return kernel


def keep_dtype(name, kernel):
    """Arithmetic stays in the arguments' dtype as in TVM; where NumPy would promote instead (bool / bool
    is float64, atan2 of ints a float), TVM has no kernel either: an error, not a result of another dtype."""

    def checked(*arrays):
        out = kernel(*arrays)
        if out.dtype != arrays[0].dtype:
            raise KernelError(f"R.{name}: not defined for {arrays[0].dtype} tensors")
        return out

    checked.__name__ = name
    return checked


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


def sigmoid_kernel(x):
    # exp(-x) overflows to inf for very negative x, giving the correct limit 0: silence the warning.
    with np.errstate(over="ignore"):
        return np.asarray(np.divide(1.0, 1.0 + np.exp(-x), order="C"), dtype=x.dtype)


def quiet_ufunc_kernel(ufunc):
    """log/sqrt of out-of-domain values give NaN/-inf like TVM; NumPy's warnings are noise here."""

    def kernel(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(ufunc(x, order="C"))

    kernel.__name__ = ufunc.__name__
    return kernel


def select_kernel(name, ufunc, compare):
    """maximum/minimum as TVM lowers them, one comparison and a select (x1 > x2 ? x1 : x2): for floats
    a NaN in x1 gives x2 and a NaN in x2 gives NaN (NumPy's ufuncs propagate either NaN). The kernel
    also takes `out=` (the executor's in-place form), which may be either argument's buffer."""

    def kernel(a, b, out=None):
        if a.dtype.kind != "f":
            return np.asarray(ufunc(a, b, out=out, order="C") if out is not None else ufunc(a, b, order="C"))
        take_a = compare(a, b)
        if out is None:
            return np.asarray(np.where(take_a, a, b), order="C")
        if out is a:
            np.copyto(out, b, where=~take_a)
        elif out is b:
            np.copyto(out, a, where=take_a)
        else:
            np.copyto(out, b)
            np.copyto(out, a, where=take_a)
        return out

    kernel.__name__ = name
    return kernel


def not_equal_kernel(a, b):
    # TVM compares floats with LLVM's ordered predicates: x != NaN is false (NumPy says true).
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return np.asarray(np.logical_or(np.less(a, b), np.greater(a, b)), order="C")
    return np.asarray(np.not_equal(a, b, order="C"))


# -- gradient rules (call, out, g) -> one entry per argument; the driver un-broadcasts ----------


def _max_min_grad(compare: str):
    """maximum/minimum route g to x1 where it won (ties go to x1, as TVM), else to x2."""

    def grad(call, out, g):
        x1, x2 = call.args
        zero = scalar(0, out)
        first = getattr(R, compare)(x1, x2)
        return [R.where(first, g, zero), R.where(first, zero, g)]

    return grad


def register_binary(name, ufunc, grad=no_gradient, out_dtype=None, inplace=False):
    """`ufunc` is a NumPy ufunc or a kernel taking `out=`; `inplace`: the kernel is exactly `ufunc`, so
    the executor may write it over a dying float input."""
    kernel = ufunc_kernel(ufunc) if isinstance(ufunc, np.ufunc) else ufunc
    return register(
        f"relax.{name}",
        ("x1", "x2"),
        infer=infer_binary(out_dtype),
        kernel=kernel,
        grad=grad,
        inplace=ufunc if inplace else None,
        cost=ELEMENTWISE,
    )


def register_unary(name, kernel, grad, infer=infer_float_unary, inplace=None):
    return register(f"relax.{name}", ("x",), infer=infer, kernel=kernel, grad=grad, inplace=inplace, cost=ELEMENTWISE)


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
minimum = register_binary("minimum", select_kernel("minimum", np.minimum, np.less), _max_min_grad("less_equal"), inplace=True)
equal = register_binary("equal", np.equal, out_dtype="bool")
not_equal = register_binary("not_equal", not_equal_kernel, out_dtype="bool")
greater = register_binary("greater", np.greater, out_dtype="bool")
greater_equal = register_binary("greater_equal", np.greater_equal, out_dtype="bool")
less = register_binary("less", np.less, out_dtype="bool")
less_equal = register_binary("less_equal", np.less_equal, out_dtype="bool")

abs = register_unary(
    "abs",
    ufunc_kernel(np.abs),
    lambda c, o, g: [R.multiply(g, R.where(R.less(c.args[0], scalar(0, o)), scalar(-1, o), scalar(1, o)))],
    infer=infer_unary,
    inplace=np.absolute,
)
negative = register_unary("negative", ufunc_kernel(np.negative), lambda c, o, g: [R.negative(g)], infer=infer_unary, inplace=np.negative)
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
