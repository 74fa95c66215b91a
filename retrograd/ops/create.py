"""Tensor creation (TVM's create.py): zeros, ones, full from a shape; zeros_like, ones_like, full_like from a
tensor; arange, eye, eye_like, hamming_window, meshgrid, one_hot from prim values and index tensors; triu /
tril, whose `k` is an attribute printed positionally as TVM does (`R.triu(x, 0)`: `print_positional`)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.expr import Tuple, TupleGetItem
from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.attr_types import to_dtype, to_opt_dtype
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.index.gather_scatter import index_tensor
from retrograd.ops.registry import Arg, Attr, InferCtx, no_gradient, register


def shape_arg(ctx: InferCtx, i: int, allow_minus_one: bool = False) -> ShapeStructInfo:
    """The struct info of a shape argument, with its static values checked (no negative sizes)."""
    s = ctx.sinfo[i]
    if not isinstance(s, ShapeStructInfo):
        raise ctx.error(f"expected a shape such as R.shape([2, 3]), got {type(s).__name__}", i)
    for d in s.values or ():
        if isinstance(d, int) and d < 0 and not (allow_minus_one and d == -1):
            raise ctx.error(f"negative dimension {d} in shape {list(s.values)}", i)
    return s


def _from_shape(s: ShapeStructInfo, dtype: str) -> TensorStructInfo:
    return TensorStructInfo(s.values, dtype, s.ndim)


def _fill_value(ctx: InferCtx, i: int) -> TensorStructInfo:
    v = ctx.tensor(i)
    if v.ndim not in (0, -1):
        raise ctx.error(f"fill_value must be a scalar (0-d) tensor, got ndim {v.ndim}", i)
    return v


def _infer_const_shape(ctx: InferCtx) -> TensorStructInfo:
    return _from_shape(shape_arg(ctx, 0), ctx.attrs["dtype"])


def _infer_full(ctx: InferCtx) -> TensorStructInfo:
    s, v = shape_arg(ctx, 0), _fill_value(ctx, 1)
    return _from_shape(s, ctx.attrs["dtype"] or v.dtype)


def _infer_like(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    if len(ctx.sinfo) > 1:
        _fill_value(ctx, 1)
    return TensorStructInfo(x.shape, ctx.attrs["dtype"] or x.dtype, x.ndim)


# -- kernels ------------------------------------------------------------------------------------


def np_dtype(dtype: str, op: str) -> np.dtype:
    """A NumPy dtype for a Relax dtype name (bfloat16 / float8 through ml_dtypes)."""
    try:
        return numpy_dtype(dtype)
    except TypeError:
        raise KernelError(f"{op}: dtype {dtype} is not supported by the NumPy kernels") from None


def zeros_kernel(shape, dtype):
    return np.zeros(shape, np_dtype(dtype, "R.zeros"))


def ones_kernel(shape, dtype):
    return np.ones(shape, np_dtype(dtype, "R.ones"))


def full_kernel(shape, fill_value, dtype=None):
    return np.full(shape, fill_value, np_dtype(dtype, "R.full") if dtype else fill_value.dtype)


def zeros_like_kernel(x, dtype=None):
    return np.zeros(x.shape, np_dtype(dtype, "R.zeros_like") if dtype else x.dtype)


def ones_like_kernel(x, dtype=None):
    return np.ones(x.shape, np_dtype(dtype, "R.ones_like") if dtype else x.dtype)


def full_like_kernel(x, fill_value, dtype=None):
    return np.full(x.shape, fill_value, np_dtype(dtype, "R.full_like") if dtype else x.dtype)


# -- gradient rules -----------------------------------------------------------------------------


def _fill_grad(call, out, g):
    """The fill value is used everywhere: its gradient is the sum of g (TVM gives none)."""
    v = call.args[1]
    total = R.sum(g, axis=None, keepdims=False)
    if v.struct_info.dtype != out.struct_info.dtype:
        total = R.astype(total, v.struct_info.dtype)
    return [None, total]


_SHAPE = Arg("shape", kind="shape")

zeros = register("relax.zeros", (_SHAPE,), (Attr("dtype", to_dtype),), infer=_infer_const_shape, kernel=zeros_kernel, grad=no_gradient, cost=ELEMENTWISE)
ones = register("relax.ones", (_SHAPE,), (Attr("dtype", to_dtype),), infer=_infer_const_shape, kernel=ones_kernel, grad=no_gradient, cost=ELEMENTWISE)
full = register(
    "relax.full",
    (_SHAPE, "fill_value"),
    (Attr("dtype", to_opt_dtype, None),),
    infer=_infer_full,
    kernel=full_kernel,
    grad=_fill_grad,
    cost=ELEMENTWISE,
)
zeros_like = register(
    "relax.zeros_like", ("x",), (Attr("dtype", to_opt_dtype, None),), infer=_infer_like, kernel=zeros_like_kernel, grad=no_gradient, cost=ELEMENTWISE
)
ones_like = register(
    "relax.ones_like", ("x",), (Attr("dtype", to_opt_dtype, None),), infer=_infer_like, kernel=ones_like_kernel, grad=no_gradient, cost=ELEMENTWISE
)
full_like = register(
    "relax.full_like",
    ("x", "fill_value"),
    (Attr("dtype", to_opt_dtype, None),),
    infer=_infer_like,
    kernel=full_like_kernel,
    grad=_fill_grad,
    cost=ELEMENTWISE,
)


def prim_arg(ctx: InferCtx, i: int) -> PrimStructInfo | None:
    """Argument i as a prim value (None when the optional argument is absent)."""
    if i >= len(ctx.sinfo):
        return None
    s = ctx.sinfo[i]
    if not isinstance(s, PrimStructInfo):
        raise ctx.error("expects a scalar prim value (a number, R.prim_value or T.<dtype>(...))", i)
    return s


def _is_int(p: PrimStructInfo | None) -> bool:
    return p is None or p.dtype.startswith(("int", "uint"))


# -- arange ---------------------------------------------------------------------------------------


def _arange_args(start, end, step):
    """TVM's Python API: arange(n) counts from 0; step defaults to 1."""
    if end is None:
        start, end = 0, start
    return start, end, 1 if step is None else step


def _arange_dtype(ctx: InferCtx, prims) -> str:
    # TVM's wrapper: int64 when every bound is an integer, else float32.
    return ctx.attrs["dtype"] or ("int64" if all(_is_int(p) for p in prims) else "float32")


def _infer_arange(ctx: InferCtx) -> TensorStructInfo:
    prims = [prim_arg(ctx, i) for i in range(3)]
    dtype = _arange_dtype(ctx, prims)
    start, end, step = _arange_args(*(None if p is None else p.value for p in prims))
    if any(v is None for v in (start, end, step)):
        return TensorStructInfo(None, dtype, 1)
    if step == 0:
        raise ctx.error("step must be non-zero", 2)
    return TensorStructInfo((max(0, math.ceil((end - start) / step)),), dtype)


def arange_kernel(start, end=None, step=None, dtype=None):
    start, end, step = _arange_args(start, end, step)
    if dtype is None:
        dtype = "int64" if all(np.asarray(v).dtype.kind in "iu" for v in (start, end, step)) else "float32"
    return np.arange(start, end, step, dtype=np_dtype(dtype, "R.arange"))


arange = register(
    "relax.arange",
    (Arg("start", "prim"), Arg("end", "prim", optional=True), Arg("step", "prim", optional=True)),
    (Attr("dtype", at.to_opt_dtype, None),),
    infer=_infer_arange,
    kernel=arange_kernel,
    grad=no_gradient,
)

# -- eye, eye_like ----------------------------------------------------------------------------------


def _infer_eye(ctx: InferCtx) -> TensorStructInfo:
    n, m, _ = (prim_arg(ctx, i) for i in range(3))
    rows = n.value
    cols = rows if m is None else m.value
    if rows is None or cols is None:
        return TensorStructInfo(None, ctx.attrs["dtype"], 2)
    if rows < 0 or cols < 0:
        raise ctx.error(f"sizes must be non-negative, got {rows} x {cols}")
    return TensorStructInfo((rows, cols), ctx.attrs["dtype"])


def eye_kernel(n, m=None, k=None, dtype="float32"):
    return np.eye(n, n if m is None else m, 0 if k is None else k, dtype=np_dtype(dtype, "R.eye"))


def _infer_eye_like(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    prim_arg(ctx, 1)
    if x.ndim not in (2, -1):
        raise ctx.error(f"expects a 2-D tensor, got ndim {x.ndim}", 0)
    return TensorStructInfo(x.shape, ctx.attrs["dtype"] or x.dtype, x.ndim)


def eye_like_kernel(x, k=None, dtype=None):
    return np.eye(x.shape[0], x.shape[1], 0 if k is None else k, dtype=np_dtype(dtype or str(x.dtype), "R.eye_like"))


eye = register(
    "relax.eye",
    (Arg("n", "prim"), Arg("m", "prim", optional=True), Arg("k", "prim", optional=True)),
    (Attr("dtype", at.to_dtype, "float32"),),
    infer=_infer_eye,
    kernel=eye_kernel,
    grad=no_gradient,
)
# The result does not depend on x's values: no gradient reaches x.
eye_like = register(
    "relax.eye_like",
    ("x", Arg("k", "prim", optional=True)),
    (Attr("dtype", at.to_opt_dtype, None),),
    infer=_infer_eye_like,
    kernel=eye_like_kernel,
    grad=no_gradient,
)

# -- hamming_window ---------------------------------------------------------------------------------


def _infer_hamming(ctx: InferCtx) -> TensorStructInfo:
    size = prim_arg(ctx, 0)
    for i in (1, 2, 3):
        prim_arg(ctx, i)
    dtype = ctx.attrs["dtype"]
    if not is_float_dtype(dtype):
        raise ctx.error(f"expects a float dtype, got {dtype}")
    if size.value is not None and size.value < 1:
        raise ctx.error(f"window_size must be greater than zero, got {size.value}", 0)
    return TensorStructInfo((size.value,) if size.value is not None else None, dtype, 1)


def hamming_window_kernel(window_size, periodic, alpha, beta, dtype):
    # TVM's topi: a window of one is [1]; periodic windows are the symmetric window of N + 1, cut.
    if window_size == 1:
        return np.ones(1, np_dtype(dtype, "R.hamming_window"))
    n = window_size + 1 if periodic else window_size
    w = alpha - beta * np.cos(2 * np.pi * np.arange(n) / (n - 1))
    return w[:window_size].astype(dtype)


hamming_window = register(
    "relax.hamming_window",
    (Arg("window_size", "prim"), Arg("periodic", "prim"), Arg("alpha", "prim"), Arg("beta", "prim")),
    (Attr("dtype", at.to_dtype),),
    infer=_infer_hamming,
    kernel=hamming_window_kernel,
    grad=no_gradient,
)

# -- meshgrid ----------------------------------------------------------------------------------------


def _infer_meshgrid(ctx: InferCtx) -> TupleStructInfo:
    fields = ctx.tuple(0).fields
    if not fields:
        raise ctx.error("needs at least one 1-D tensor", 0)
    dtypes = set()
    for i, f in enumerate(fields):
        if not isinstance(f, TensorStructInfo) or f.ndim not in (1, -1):
            raise ctx.error(f"expects 1-D tensors; field {i} is {f}", 0)
        if f.dtype:
            dtypes.add(f.dtype)
    if len(dtypes) > 1:
        raise ctx.error(f"tensors have different dtypes {sorted(dtypes)}", 0)
    dtype = dtypes.pop() if dtypes else ""
    n = len(fields)
    if any(f.shape is None for f in fields):
        return TupleStructInfo([TensorStructInfo(None, dtype, n)] * n)
    dims = [f.shape[0] for f in fields]
    if ctx.attrs["indexing"] == "xy" and n >= 2:
        dims[0], dims[1] = dims[1], dims[0]
    return TupleStructInfo([TensorStructInfo(tuple(dims), dtype)] * n)


def meshgrid_kernel(tensors, indexing="ij"):
    return tuple(np.array(g) for g in np.meshgrid(*tensors, indexing=indexing))


def _meshgrid_grad(call, out, g):
    """Each grid repeats its input along the other axes: sum those axes out of its adjoint."""
    n = len(call.args[0].struct_info.fields)
    xy = call.attrs["indexing"] == "xy" and n >= 2
    grads = []
    for i in range(n):
        axis = {0: 1, 1: 0}.get(i, i) if xy else i
        others = [a for a in range(n) if a != axis]
        gi = TupleGetItem(g, i)
        grads.append(R.sum(gi, axis=others) if others else gi)
    return [Tuple(grads)]


meshgrid = register(
    "relax.meshgrid",
    ("tensors",),
    (Attr("indexing", at.one_of("ij", "xy"), "ij"),),
    infer=_infer_meshgrid,
    kernel=meshgrid_kernel,
    grad=_meshgrid_grad,
)

# -- one_hot -----------------------------------------------------------------------------------------


def _infer_one_hot(ctx: InferCtx) -> TensorStructInfo:
    idx = index_tensor(ctx, 0)
    on, off = prim_arg(ctx, 1), prim_arg(ctx, 2)
    if on.dtype != off.dtype:
        raise ctx.error(f"on_value and off_value must have the same dtype, got {on.dtype} and {off.dtype}", 2)
    depth, axis = ctx.attrs["depth"], ctx.attrs["axis"]
    if depth <= 0:
        raise ctx.error(f"depth must be positive, got {depth}")
    if idx.ndim == -1:
        return TensorStructInfo(None, on.dtype, -1)
    if not -idx.ndim - 1 <= axis <= idx.ndim:
        raise ctx.error(f"axis {axis} is out of range for a result of ndim {idx.ndim + 1}")
    if idx.shape is None:
        return TensorStructInfo(None, on.dtype, idx.ndim + 1)
    axis %= idx.ndim + 1
    return TensorStructInfo(idx.shape[:axis] + (depth,) + idx.shape[axis:], on.dtype)


def one_hot_kernel(indices, on_value, off_value, depth, axis=-1):
    # An index outside [0, depth) matches no position (all off), as in TVM's topi.
    axis %= indices.ndim + 1
    positions = np.arange(depth).reshape((depth,) + (1,) * (indices.ndim - axis))
    hot = np.expand_dims(indices, axis) == positions
    # The result has on_value's dtype: a Python number is int64/float64/bool, a NumPy scalar its own.
    return np.where(hot, on_value, off_value).astype(np.asarray(on_value).dtype)


one_hot = register(
    "relax.one_hot",
    ("indices", Arg("on_value", "prim"), Arg("off_value", "prim")),
    (Attr("depth", at.to_int), Attr("axis", at.to_int, -1)),
    infer=_infer_one_hot,
    kernel=one_hot_kernel,
    grad=no_gradient,
)


# -- triu, tril: a tensor's upper / lower triangle (TVM's create.py) ---------------------------------


def _infer_tri(ctx: InferCtx) -> TensorStructInfo:
    x = ctx.tensor(0)
    if x.ndim != -1 and x.ndim < 2:
        raise ctx.error(f"expects a tensor of at least two dimensions, got ndim {x.ndim}", 0)
    return x


def tri_kernel(fn):
    """np.triu / np.tril under TVM's keyword `k`, the result in C order."""

    def kernel(x, k=0):
        return np.asarray(fn(x, k), order="C")

    return kernel


def _tri(name, fn):
    return register(
        f"relax.{name}",
        ("x",),
        (Attr("k", at.to_int, 0),),
        infer=_infer_tri,
        kernel=tri_kernel(fn),
        grad=lambda call, out, g: [getattr(R, name)(g, k=call.attrs["k"])],
        print_positional=("k",),
        cost=ELEMENTWISE,
    )


triu = _tri("triu", np.triu)
tril = _tri("tril", np.tril)
