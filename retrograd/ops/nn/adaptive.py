"""nn.adaptive_avg_pool1d/2d/3d over TVM's bins [floor(i * n / out), ceil((i + 1) * n / out))."""

# The op is linear and separable: its gradient contracts g with each axis's averaging matrix (constants),
# so every order of differentiation works.

from __future__ import annotations

from functools import partial

from retrograd.errors import GradientError
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.expr import const
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import adaptive
from retrograd.ops.nn.shape import from_layout, to_layout
from retrograd.ops.registry import Attr, InferCtx, register

SPATIAL = {1: "W", 2: "HW", 3: "DHW"}
# The gradient holds each axis's (out, in) averaging matrix as a constant (printed in the module's text):
# past this it would take minutes to build, print and read back, for a result few runs could hold.
MAX_MATRIX_ELEMENTS = 1 << 18


def _sizes(n: int):
    def convert(v):
        if v is None:
            return None
        vals = at.to_ints(v)
        if len(vals) == 1:
            vals = vals * n
        if len(vals) != n or any(x < 1 for x in vals):
            raise ValueError(f"expected None or 1 or {n} positive integers, got {v!r}")
        return vals

    return convert


def _canonical(attrs: dict) -> dict:
    if attrs["out_layout"] is None:
        attrs = {**attrs, "out_layout": attrs["layout"]}
    return attrs


def _infer(n: int, ctx: InferCtx) -> TensorStructInfo:
    a = ctx.attrs
    sp = SPATIAL[n]
    x = ctx.tensor(0)
    if x.ndim not in (-1, n + 2):
        raise ctx.error(f"expected a {n + 2}-D tensor in layout {a['layout']}, got {x.ndim}-D", 0)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, n + 2)
    b, c, *size = from_layout(x.shape, a["layout"], "NC" + sp)
    out = list(size) if a["output_size"] is None else list(a["output_size"])
    return TensorStructInfo(to_layout((b, c, *out), "NC" + sp, a["out_layout"]), x.dtype)


def spatial_dims(call, layout: str, n: int) -> tuple:
    """The static spatial dims of the call's data (laid out as `layout`); a clear error otherwise."""
    s = call.args[0].struct_info
    dims = from_layout(s.shape, layout, "NC" + SPATIAL[n]) if s.shape is not None else None
    if dims is None or not all(isinstance(d, int) for d in dims[2:]):
        raise GradientError(f"{call.op.script_name}: the gradient needs static spatial dims, got {s}", call.span)
    return dims[2:]


def contract_back(g, mats, n: int, layout: str, out_layout: str, dtype: str):
    """The adjoint of contracting each spatial axis j with mats[j] (out_j, in_j) (None: identity):
    g (laid out as out_layout) contracted with the transposed matrices, laid out as `layout`."""
    canon = "NC" + SPATIAL[n]
    if out_layout != canon:
        g = R.permute_dims(g, axes=[out_layout.index(ch) for ch in canon])
    last = n + 1
    for j, m in enumerate(mats):
        if m is None:
            continue
        perm = list(range(n + 2))
        perm[2 + j], perm[last] = perm[last], perm[2 + j]
        moved = g if 2 + j == last else R.permute_dims(g, axes=perm)
        moved = R.matmul(moved, const(m.astype(numpy_dtype(dtype)), dtype))
        g = moved if 2 + j == last else R.permute_dims(moved, axes=perm)
    if layout != canon:
        g = R.permute_dims(g, axes=[canon.index(ch) for ch in layout])
    return g


def _grad(n: int, call, out, g):
    # Linear: dx = g contracted with each axis's averaging matrix (transposed), constants in the IR.
    a = call.attrs
    sizes = spatial_dims(call, a["layout"], n)
    outs = sizes if a["output_size"] is None else a["output_size"]
    for s, o in zip(sizes, outs):
        if s != o and s * o > MAX_MATRIX_ELEMENTS:
            raise GradientError(
                f"{call.op.script_name}: the gradient's averaging matrix would be {o} x {s} "
                f"(over {MAX_MATRIX_ELEMENTS:,} elements); output_size {list(outs)} is far beyond the data",
                call.span,
            )
    mats = [None if s == o else adaptive.averaging_matrix(s, o) for s, o in zip(sizes, outs)]
    return [contract_back(g, mats, n, a["layout"], a["out_layout"], call.args[0].struct_info.dtype)]


def _register(n: int):
    sp = SPATIAL[n]
    return register(
        f"relax.nn.adaptive_avg_pool{n}d",
        ("data",),
        (
            Attr("output_size", _sizes(n), None),
            Attr("layout", at.layout("NC" + sp), "NC" + sp),
            Attr("out_layout", at.opt_layout("NC" + sp), None),
        ),
        infer=partial(_infer, n),
        kernel=partial(adaptive.adaptive_avg_pool, spatial=sp),
        grad=partial(_grad, n),
        canonicalize=_canonical,
    )


adaptive_avg_pool1d = _register(1)
adaptive_avg_pool2d = _register(2)
adaptive_avg_pool3d = _register(3)
