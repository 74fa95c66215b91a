"""Quantization and sampling as TVM 0.27 defines them: quantize, dequantize, multinomial_from_uniform.

`quantize(x, scale, zero_point)` is clip(round(x / scale) + zero_point) in the integer out_dtype (round
half to even; float8 outputs are not rounded first, only cast); `dequantize` is scale * (x - zero_point)
computed in float32 (float16 results clipped to +-65504). scale and zero_point are scalars or 1-D along
`axis`. Beyond TVM, float64 is accepted wherever TVM takes float32 (float64 finite differences need it).

TVM registers no gradient for either. quantize's result is piecewise constant in its inputs (integer, or
float8 rounded), so its derivative is zero almost everywhere: no gradient reaches its arguments.
dequantize is differentiable in scale, in float data and in a float16 zero_point, and gets those.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.expr import const
from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.cost import ELEMENTWISE
from retrograd.ops.create import np_dtype
from retrograd.ops.registry import Attr, InferCtx, no_gradient, register
from retrograd.ops.shape_utils import normalize_axis

_QUANT_OUT = ("int8", "uint8", "int16", "uint16", "float8_e4m3fn", "float8_e5m2")
_FLOATS = ("float16", "float32", "float64")
_DEQUANT_IN = ("int8", "uint8", "int16", "uint16", "int32", "float8_e4m3fn", "float8_e5m2") + _FLOATS
_ZERO_POINT = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "float16", "float64")
_FLOAT16_MAX = 65504.0


def _infer_qdq(ctx: InferCtx, inputs, outputs, what: str) -> TensorStructInfo:
    out_dtype = ctx.attrs["out_dtype"]
    if out_dtype not in outputs:
        raise ctx.error(f"out_dtype must be one of {', '.join(outputs)}, got {out_dtype}")
    x, scale, zp = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    if x.dtype and x.dtype not in inputs:
        raise ctx.error(f"{what} data of dtype {x.dtype} (expected one of {', '.join(inputs)})", 0)
    if scale.dtype and scale.dtype not in _FLOATS:
        raise ctx.error(f"scale must be float16 or float32, got {scale.dtype}", 1)
    if zp.dtype and zp.dtype not in _ZERO_POINT:
        raise ctx.error(f"zero_point must be one of {', '.join(_ZERO_POINT[:-1])}, got {zp.dtype}", 2)
    axis = ctx.attrs["axis"]
    if x.ndim >= 0:
        if normalize_axis(axis, x.ndim) is None:
            raise ctx.error(f"axis {axis} is out of range for ndim {x.ndim}", 0)
        for i, p in ((1, scale), (2, zp)):
            if p.ndim == 0:
                continue
            if p.ndim != 1:
                raise ctx.error(f"expects a scalar or a 1-D tensor along axis {axis}, got ndim {p.ndim}", i)
            if x.shape is not None and p.shape is not None and x.shape[axis] != p.shape[0]:
                raise ctx.error(f"has {p.shape[0]} values but the data has {x.shape[axis]} along axis {axis}", i)
    return TensorStructInfo(x.shape, out_dtype, x.ndim)


def _along(p, x, axis):
    """A scale or zero point shaped to broadcast against x along `axis`."""
    if p.ndim == 0 or x.ndim == 0:
        return p.reshape(())
    if p.ndim != 1 or p.shape[0] not in (1, x.shape[axis]):
        raise KernelError(f"scale / zero_point of shape {p.shape} do not match data of shape {x.shape} along axis {axis}")
    shape = [1] * x.ndim
    shape[axis] = p.shape[0]
    return p.reshape(shape)


def _clip_cast(v, dtype: str):
    """TVM's clip_cast: min then max as comparisons and selects (NaN goes to the top), then the cast."""
    target = np_dtype(dtype, "R.quantize")
    info = np.iinfo(target) if np.issubdtype(target, np.integer) else np.finfo(target)
    hi, lo = v.dtype.type(info.max), v.dtype.type(info.min)
    v = np.where(v < hi, v, hi)
    v = np.where(v > lo, v, lo)
    return v.astype(target)


def _quantize(data, scale, zero_point, out_dtype="int8", axis=-1):
    if data.dtype.kind != "f":
        raise KernelError(f"R.quantize: data must be float16 or float32, got {data.dtype}")
    ax = axis % data.ndim if data.ndim else 0
    scaled = data / _along(scale, data, ax).astype(data.dtype)
    if out_dtype.startswith(("int", "uint")):
        scaled = np.rint(scaled)
    return np.ascontiguousarray(_clip_cast(scaled + _along(zero_point, data, ax).astype(data.dtype), out_dtype))


def _dequantize(data, scale, zero_point, out_dtype="float32", axis=-1):
    ax = axis % data.ndim if data.ndim else 0
    real = np.float64 if out_dtype == "float64" else np.float32
    work = real if data.dtype.kind == "f" or str(data.dtype).startswith(("float8", "bfloat")) else np.int32
    sub = data.astype(work) - _along(zero_point, data, ax).astype(work)
    out = sub.astype(real) * _along(scale, data, ax).astype(real)
    if out_dtype != "float16":
        return np.ascontiguousarray(out)
    return np.ascontiguousarray(np.clip(out, -_FLOAT16_MAX, _FLOAT16_MAX).astype(np.float16))


def _broadcast_along(p, x_sinfo: TensorStructInfo, axis: int):
    """IR: a scale or zero point reshaped to broadcast along axis (a scalar as it is)."""
    if p.struct_info.ndim == 0 or x_sinfo.ndim <= 1:
        return p
    return R.expand_dims(p, axis=[i for i in range(x_sinfo.ndim) if i != axis])


def _as(e, have: str, dtype: str):
    """e (of dtype `have`) in `dtype`: rules build unnormalized calls, whose dtype is not inferred yet."""
    return e if have == dtype else R.astype(e, dtype)


def _sum_to_param(t, p, x_sinfo: TensorStructInfo, axis: int):
    """IR: t (shaped like the data) summed onto the parameter p's shape (scalar, or 1-D along axis)."""
    if p.struct_info.ndim == 0:
        return R.sum(t, axis=None)
    others = [i for i in range(x_sinfo.ndim) if i != axis]
    return R.sum(t, axis=others) if others else t


def _dequantize_grad(call, out, g):
    x, scale, zp = call.args
    xs = x.struct_info
    axis = call.attrs["axis"] % xs.ndim if xs.ndim > 0 else 0
    out_dtype = call.attrs["out_dtype"]
    sdt, zdt = scale.struct_info.dtype, zp.struct_info.dtype
    real = "float64" if out_dtype == "float64" else "float32"
    g32 = _as(g, out_dtype, real)
    if out_dtype == "float16":  # the clip's derivative
        inside = R.less(R.abs(_as(out, out_dtype, real)), const(_FLOAT16_MAX, real))
        g32 = R.where(inside, g32, R.zeros_like(g32))
    s32 = _as(_broadcast_along(scale, xs, axis), sdt, real)
    gx = _as(R.multiply(g32, s32), real, xs.dtype) if xs.dtype in _FLOATS else None
    centred = R.subtract(_as(x, xs.dtype, real), _as(_broadcast_along(zp, xs, axis), zdt, real))
    gscale = _as(_sum_to_param(R.multiply(g32, centred), scale, xs, axis), real, sdt)
    gzp = None
    if is_float_dtype(zdt):
        gzp = _as(_sum_to_param(R.negative(R.multiply(g32, s32)), zp, xs, axis), real, zdt)
    return [gx, gscale, gzp]


# TVM's QuantizeAttrs print out_dtype before axis; its Python signature takes axis first.
_QDQ_POSITIONAL = ("axis", "out_dtype")

quantize = register(
    "relax.quantize", ("data", "scale", "zero_point"),
    (Attr("out_dtype", at.to_dtype, "int8"), Attr("axis", at.to_int, -1)),
    infer=lambda ctx: _infer_qdq(ctx, _FLOATS, _QUANT_OUT, "quantizes float16 or float32, got"),
    kernel=_quantize, grad=no_gradient, positional_attrs=_QDQ_POSITIONAL, cost=ELEMENTWISE,
)
dequantize = register(
    "relax.dequantize", ("data", "scale", "zero_point"),
    (Attr("out_dtype", at.to_dtype, "float32"), Attr("axis", at.to_int, -1)),
    infer=lambda ctx: _infer_qdq(ctx, _DEQUANT_IN, _FLOATS, "cannot dequantize"),
    kernel=_dequantize, grad=_dequantize_grad, positional_attrs=_QDQ_POSITIONAL, cost=ELEMENTWISE,
)

# -- multinomial_from_uniform ------------------------------------------------------------------------


def _infer_multinomial(ctx: InferCtx) -> TensorStructInfo:
    prob, u, idx = ctx.tensor(0), ctx.tensor(1), ctx.tensor(2)
    dtype = ctx.attrs["dtype"]
    if prob.dtype and not is_float_dtype(prob.dtype):
        raise ctx.error(f"expects float probabilities, got {prob.dtype}", 0)
    if u.dtype and not is_float_dtype(u.dtype):
        raise ctx.error(f"expects float uniform samples, got {u.dtype}", 1)
    if idx.dtype and not idx.dtype.startswith("int"):
        raise ctx.error(f"expects integer sample indices, got {idx.dtype}", 2)
    if -1 in (prob.ndim, u.ndim, idx.ndim):
        return TensorStructInfo(None, dtype, -1)
    for i, s in enumerate((prob, u, idx)):
        if s.ndim != 2:
            raise ctx.error(f"expects a 2-D tensor, got ndim {s.ndim}", i)
    if prob.shape is None or u.shape is None or idx.shape is None:
        return TensorStructInfo(None, dtype, 2)
    if u.shape[0] != idx.shape[0]:
        raise ctx.error(f"uniform_sample has {u.shape[0]} rows but sample_indices {idx.shape[0]}", 2)
    if u.shape[1] != 1 or idx.shape[1] != 1:
        raise ctx.error(f"uniform_sample and sample_indices must be (n, 1), got {u.shape} and {idx.shape}", 1)
    return TensorStructInfo((u.shape[0], 1), dtype)


def _multinomial_from_uniform(prob, uniform_sample, sample_indices, dtype="int64"):
    """TVM's CPU kernel: the first vocabulary index whose cumulative probability exceeds the sample (the
    last one when none does), from the row sample_indices[i] of prob."""
    batch, vocab = prob.shape
    rows = sample_indices.reshape(-1)
    if rows.size and (rows.min() < 0 or rows.max() >= batch):
        raise KernelError(f"R.multinomial_from_uniform: sample_indices must lie in [0, {batch}), got {rows.min()}..{rows.max()}")
    if vocab == 0:
        raise KernelError("R.multinomial_from_uniform: the vocabulary (prob's second dimension) is empty")
    cumulative = np.cumsum(prob, axis=1, dtype=prob.dtype)[rows]
    index = np.count_nonzero(cumulative[:, :-1] <= uniform_sample.reshape(-1, 1), axis=1)
    return index.astype(np_dtype(dtype, "R.multinomial_from_uniform")).reshape(-1, 1)


multinomial_from_uniform = register(
    "relax.multinomial_from_uniform", ("prob", "uniform_sample", "sample_indices"),
    (Attr("dtype", at.to_dtype, "int64"),),
    infer=_infer_multinomial, kernel=_multinomial_from_uniform, grad=no_gradient,
)
