"""ONNX reductions, arg-reductions, CumSum, TopK, Einsum, MatMul, Gemm."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import converter, dtype_of, input_value, ndim_of, scalar
from retrograd.frontend.onnx_ops_shape import static_shape
from retrograd.ir.dtypes import reduction_identity
from retrograd.ir.expr import Tuple, TupleGetItem
from retrograd.ops.api import R

_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


@converter(*_REDUCE, values=(1,))
def _reduce(g, node, inputs, attrs):
    x = inputs[0]
    nd = ndim_of(x)
    if "axes" in attrs:
        axes = [int(a) % nd for a in attrs["axes"]]
    else:
        axes = input_value(g, node, 1)
        axes = None if axes is None else [int(a) % nd for a in np.asarray(axes).reshape(-1)]
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(nd))
    return reduce_composed(g, node.op_type, x, static_reducer(g, tuple(axes)), bool(attrs.get("keepdims", 1)))


def static_reducer(g, axis: tuple):
    """red(kind, y, keepdims) over axes known at import time (kind: sum, mean, max, min, prod).
    A max / min over an empty axis is its identity (-inf / +inf), as ONNX specifies."""

    def red(kind, y, keep):
        shape = y.struct_info.shape
        if kind in ("max", "min") and shape is not None and any(shape[a] == 0 for a in axis):
            if not all(isinstance(d, int) for d in shape):
                raise UnsupportedError(f"Reduce{kind.title()} over an empty axis of a tensor with symbolic dims")
            out = tuple(1 if a in axis else d for a, d in enumerate(shape) if keep or a not in axis)
            return g.const(np.full(out, reduction_identity(kind, dtype_of(y)), dtype=dtype_of(y)))
        return getattr(R, kind)(y, axis=axis, keepdims=keep)

    return red


def reduce_composed(g, op: str, x, red, keep: bool):
    """ONNX reduction `op` of x from the five plain reductions: `red(kind, y, keepdims)` reduces y
    over the node's axes (import-time axes, or axes given at run time)."""
    if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
        return red(op[len("Reduce"):].lower(), x, keep)
    if op == "ReduceL1":
        return red("sum", g.emit(R.abs(x)), keep)
    if op == "ReduceSumSquare":
        return red("sum", g.emit(R.multiply(x, x)), keep)
    if op == "ReduceL2":
        s = g.emit(red("sum", g.emit(R.multiply(x, x)), keep))
        if dtype_of(x).startswith("int"):
            return R.astype(R.sqrt(R.astype(s, dtype="float64")), dtype=dtype_of(x))
        return R.sqrt(s)
    if op == "ReduceLogSum":
        return R.log(g.emit(red("sum", x, keep)))
    # ReduceLogSumExp, stabilized by the max
    m = g.emit(red("max", x, True))
    s = g.emit(red("sum", g.emit(R.exp(g.emit(R.subtract(x, m)))), keep))
    mk = m if keep else g.emit(red("max", x, False))
    return R.add(R.log(s), mk)


@converter("ArgMax", "ArgMin")
def _arg(g, node, inputs, attrs):
    x = inputs[0]
    axis = int(attrs.get("axis", 0)) % ndim_of(x)
    keep = bool(attrs.get("keepdims", 1))
    fn = R.argmax if node.op_type == "ArgMax" else R.argmin
    if attrs.get("select_last_index", 0):
        n = static_shape(x)[axis]
        flipped = g.emit(R.flip(x, axis=axis))
        i = g.emit(fn(flipped, axis=axis, keepdims=keep))
        return R.subtract(scalar(g, n - 1, i), i)
    return fn(x, axis=axis, keepdims=keep)


@converter("CumSum", values=(1,))
def _cumsum(g, node, inputs, attrs):
    x = inputs[0]
    axis = int(np.asarray(g.value_of(node.input[1])).reshape(-1)[0]) % ndim_of(x)
    return scan(g, x, axis, attrs, R.cumsum)


@converter("CumProd", values=(1,))
def _cumprod(g, node, inputs, attrs):
    x = inputs[0]
    axis = int(np.asarray(g.value_of(node.input[1])).reshape(-1)[0]) % ndim_of(x)
    return scan(g, x, axis, attrs, R.cumprod)


def scan(g, x, axis: int, attrs, fn):
    """ONNX CumSum / CumProd (fn: R.cumsum / R.cumprod) along axis, with exclusive and reverse."""
    rev = attrs.get("reverse", 0)
    if rev:
        x = g.emit(R.flip(x, axis=axis))
    y = g.emit(fn(x, axis=axis, exclusive=bool(attrs.get("exclusive", 0))))
    return R.flip(y, axis=axis) if rev else y


@converter("TopK", values=(1,))
def _topk(g, node, inputs, attrs):
    x = inputs[0]
    k = int(np.asarray(g.value_of(node.input[1])).reshape(-1)[0])
    axis = int(attrs.get("axis", -1))
    largest = bool(attrs.get("largest", 1))
    out = g.emit(R.topk(x, k=k, axis=axis, ret_type="both", largest=largest, dtype="int64"))
    return [g.emit(TupleGetItem(out, 0)), g.emit(TupleGetItem(out, 1))]


@converter("Einsum")
def _einsum(g, node, inputs, attrs):
    return R.einsum(Tuple(tuple(inputs)), subscripts=attrs["equation"].replace(" ", ""))


@converter("MatMul")
def _matmul(g, node, inputs, attrs):
    return R.matmul(inputs[0], inputs[1])


@converter("Gemm")
def _gemm(g, node, inputs, attrs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if attrs.get("transA", 0):
        a = g.emit(R.permute_dims(a, axes=(1, 0)))
    if attrs.get("transB", 0):
        b = g.emit(R.permute_dims(b, axes=(1, 0)))
    y = g.emit(R.matmul(a, b))
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = g.emit(R.multiply(y, scalar(g, alpha, y)))
    if c is not None:
        if beta != 1.0:
            c = g.emit(R.multiply(c, scalar(g, beta, c)))
        y = R.add(y, c)
    return y
