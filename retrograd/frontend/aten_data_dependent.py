"""ATen's data-dependent ops (nonzero, unique) and PT2E's decomposed quantization ops
(quantized_decomposed.quantize_per_tensor / dequantize_per_tensor / ..._per_channel) as retrograd's TVM-typed
ops (ops/data_dependent.py, ops/quantize.py). The sizes of nonzero's and unique's results are known only at
run time: torch.export records them as unbacked symbols, the IR as tensors of known rank."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import ndim, registrar
from retrograd.ir.expr import TupleGetItem, const, prim_value
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


@op("nonzero")
def _nonzero(cx, a):
    # ATen gives one row per element (k, ndim); TVM's nonzero one row per dimension (ndim, k).
    if ndim(a["self"]) == 0:
        raise UnsupportedError("aten.nonzero of a 0-d tensor (PyTorch gives (k, 0), TVM's nonzero (1, k))")
    return R.permute_dims(R.nonzero(a["self"]), axes=[1, 0])


@op("_unique2", "unique_dim")
def _unique(cx, a):
    x, dim = a["self"], a.get("dim")
    inverse, counts = bool(a.get("return_inverse", False)), bool(a.get("return_counts", False))
    flags = [prim_value(bool(f), "bool") for f in (a.get("sorted", True), False, inverse, counts)]
    if dim is not None:
        flags.append(prim_value(dim % ndim(x), "int64"))
    out = cx.emit(R.unique(x, *flags)) if inverse or counts else None
    fields = [TupleGetItem(out, i) for i in range(1 + inverse + counts)] if out is not None else [R.unique(x, *flags)]
    # ATen returns three tensors whatever is asked; the ones not asked for are empty (and unused).
    empty = const(np.zeros(0, "int64"))
    inv = fields[1] if inverse else empty
    if inverse and dim is None:
        inv = R.reshape(inv, cx.out_shape(1))  # TVM's inverse is 1-D, ATen's shaped like the input
    return fields[0], inv, fields[-1] if counts else empty


# -- PT2E quantization (torch.ao's quantized_decomposed ops) -------------------------------------------
def _full_range(a, dtype: str) -> None:
    """R.quantize clips to the whole range of its dtype; PT2E names the range explicitly."""
    info = np.iinfo(dtype)
    lo, hi = a.get("quant_min"), a.get("quant_max")
    if (lo, hi) != (info.min, info.max):
        raise UnsupportedError(f"quantization to {dtype} over [{lo}, {hi}] (R.quantize clips to the dtype's range "
                               f"[{info.min}, {info.max}])")


def _qparams(cx, a, per_channel: bool):
    if per_channel:
        return cx.tensor(a["scales"], "float32"), cx.tensor(a["zero_points"], "int32"), a["axis"]
    return cx.tensor(a["scale"], "float32"), cx.tensor(a["zero_point"], "int32"), -1


def _dtype(a) -> str:
    return str(a["dtype"]).replace("torch.", "")


_QD = "quantized_decomposed."


@op(_QD + "quantize_per_tensor.default", _QD + "quantize_per_tensor.tensor", _QD + "quantize_per_channel.default")
def _quantize(cx, a):
    dtype = _dtype(a)
    _full_range(a, dtype)
    scale, zp, axis = _qparams(cx, a, "per_channel" in cx.node.target._schema.name)
    return R.quantize(cx.tensor(a["input"], "float32"), scale, zp, axis=axis, out_dtype=dtype)


@op(_QD + "dequantize_per_tensor.default", _QD + "dequantize_per_tensor.tensor", _QD + "dequantize_per_channel.default")
def _dequantize(cx, a):
    _full_range(a, _dtype(a))
    scale, zp, axis = _qparams(cx, a, "per_channel" in cx.node.target._schema.name)
    return R.dequantize(a["input"], scale, zp, axis=axis, out_dtype=cx.out_dtype())
