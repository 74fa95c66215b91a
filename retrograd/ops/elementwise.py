"""What the elementwise ops share: broadcasting inference, the kernel factories that wrap a NumPy ufunc
(`ufunc_kernel(np.add)`, ...) and the registration helpers. The ops are registered in unary.py,
binary.py, ternary.py and logical.py."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.registry import InferCtx, no_gradient, register
from retrograd.ops.shape_utils import broadcast_shapes, same_dtype

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
    # TVM: transcendental ops require a float input (an int tensor would silently truncate).
    return ctx.float_tensor(0)


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
