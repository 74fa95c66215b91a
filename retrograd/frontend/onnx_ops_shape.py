"""ONNX shape and indexing ops: Reshape, Transpose, Slice, Gather, Concat, Split, Pad, Cast, ..."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import broadcast_to, clip_keeping_nan, converter, reshape, dtype_of, input_value, ndim_of, prim, scalar
from retrograd.ir.dtypes import float_max
from retrograd.ir.expr import Tuple
from retrograd.ops.api import R


def static_shape(x) -> tuple:
    shape = x.struct_info.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        raise UnsupportedError(f"needs a static input shape, got {shape}")
    return tuple(shape)


def _onnx_dtype(g, to) -> str:
    from retrograd.frontend.onnx_import import np_dtype

    return np_dtype(int(to))


def is_static(x) -> bool:
    shape = x.struct_info.shape
    return shape is not None and all(isinstance(d, int) for d in shape)


@converter("Shape")
def _shape(g, node, inputs, attrs):
    x = inputs[0]
    n = ndim_of(x)
    if n < 0:
        raise UnsupportedError("Shape of a tensor of unknown rank")
    start = int(attrs.get("start", 0))
    end = int(attrs.get("end", n))
    start, end = (max(0, min(n, v + n if v < 0 else v)) for v in (start, end))
    if is_static(x):
        return np.array(static_shape(x)[start:end], dtype=np.int64)
    dims = x_dims(g, x, n)  # extents known only at run time: R.shape_of, as a tensor
    return R.strided_slice(dims, axes=(0,), begin=(start,), end=(max(start, end),))


@converter("Size")
def _size(g, node, inputs, attrs):
    if is_static(inputs[0]):
        return np.array(int(np.prod(static_shape(inputs[0]))), dtype=np.int64)
    return R.size(inputs[0])


@converter("Constant")
def _constant(g, node, inputs, attrs):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            v = attrs[key]
            if key in ("value_float", "value_floats"):
                return np.array(v, dtype=np.float32)
            if key in ("value_int", "value_ints"):
                return np.array(v, dtype=np.int64)
            return np.asarray(v)
    raise UnsupportedError(f"Constant with attributes {sorted(attrs)} is not supported")


def x_dims(g, x, k: int, front: bool = True):
    """x's shape as a run-time int64 tensor, cut or padded with ones (in front, or at the end) to length k."""
    dims = g.emit(R.shape_to_tensor(g.emit(R.shape_of(x))))
    n = ndim_of(x)
    if k < n:
        return g.emit(R.strided_slice(dims, axes=(0,), begin=(0,), end=(k,)))
    if k > n:
        ones = g.const(np.ones(k - n, np.int64))
        return g.emit(R.concat(Tuple((ones, dims) if front else (dims, ones)), axis=0))
    return dims


def runtime_shape(g, shape_tensor):
    """A shape computed at run time (an int64 tensor) as a shape value: R.Shape(ndim=k)."""
    if dtype_of(shape_tensor) != "int64":
        shape_tensor = g.emit(R.astype(shape_tensor, dtype="int64"))
    return g.emit(R.tensor_to_shape(shape_tensor))


def _length(x) -> int:
    return static_shape(x)[0]


@converter("ConstantOfShape", values=(0,))
def _constant_of_shape(g, node, inputs, attrs):
    value = attrs.get("value", np.zeros(1, np.float32))
    if not g.known(node.input[0]):
        fill = g.const(value.reshape(-1)[0], str(value.dtype))
        return R.full(runtime_shape(g, inputs[0]), fill, dtype=str(value.dtype))
    shape = tuple(int(d) for d in g.value_of(node.input[0]))
    return g.const(np.full(shape, value.reshape(-1)[0], dtype=value.dtype))


@converter("Cast")
def _cast(g, node, inputs, attrs):
    return cast(g, inputs[0], _onnx_dtype(g, attrs["to"]), attrs)


@converter("CastLike")
def _cast_like(g, node, inputs, attrs):
    return cast(g, inputs[0], dtype_of(inputs[1]), attrs)


_FLOAT8 = ("float8_e4m3fn", "float8_e5m2")  # the float8 dtypes retrograd holds (ir/dtypes.EXTENSION_DTYPES)


def cast(g, x, to: str, attrs):
    """ONNX's Cast to `to`. To float8 with `saturate` (the default), values beyond the range, infinities
    included, become the largest finite value of their sign (NaN stays NaN); without it they follow the
    plain conversion (E4M3FN: NaN, E5M2: infinity), which is what R.astype does."""
    if to in _FLOAT8 and int(attrs.get("saturate", 1)) and dtype_of(x) not in _FLOAT8:
        m = float_max(to)
        x = clip_keeping_nan(g, x, scalar(g, -m, x), scalar(g, m, x))
    return R.astype(x, dtype=to)


@converter("Reshape", values=(1,))
def _reshape(g, node, inputs, attrs):
    x = inputs[0]
    if not g.known(node.input[1]):
        s = inputs[1]
        if not attrs.get("allowzero", 0):  # a 0 copies x's extent at that position
            k = _length(s)
            zero = g.emit(R.equal(s, g.const(0, dtype_of(s))))
            s = g.emit(R.where(zero, g.emit(R.astype(x_dims(g, x, k, front=False), dtype=dtype_of(s))), s))
        return R.reshape(x, runtime_shape(g, s))
    shape = [int(d) for d in g.value_of(node.input[1])]
    old = static_shape(x) if not attrs.get("allowzero", 0) and 0 in shape else None
    if old is not None:
        shape = [old[i] if d == 0 else d for i, d in enumerate(shape)]
    return reshape(x, tuple(shape))


@converter("Flatten")
def _flatten(g, node, inputs, attrs):
    x = inputs[0]
    shape = static_shape(x)
    axis = int(attrs.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis  # ONNX: a negative axis counts from the end (-1: before the last dim)
    lead = int(np.prod(shape[:axis]))
    return reshape(x, (lead, int(np.prod(shape[axis:]))))


@converter("Transpose")
def _transpose(g, node, inputs, attrs):
    perm = attrs.get("perm")
    return R.permute_dims(inputs[0], axes=tuple(perm) if perm is not None else None)


def _axes(g, node, attrs, slot, ndim=None):
    if "axes" in attrs:
        axes = list(attrs["axes"])
    else:
        axes = input_value(g, node, slot)
        axes = None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    if axes is not None and ndim is not None:
        axes = [a % ndim for a in axes]
    return axes


@converter("Squeeze", values=(1,))
def _squeeze(g, node, inputs, attrs):
    x = inputs[0]
    axes = _axes(g, node, attrs, 1, ndim_of(x))
    return R.squeeze(x, axis=tuple(axes) if axes is not None else None)


@converter("Unsqueeze", values=(1,))
def _unsqueeze(g, node, inputs, attrs):
    x = inputs[0]
    axes = _axes(g, node, attrs, 1)
    out_ndim = ndim_of(x) + len(axes)
    return R.expand_dims(x, axis=tuple(sorted(a % out_ndim for a in axes)))


@converter("Concat")
def _concat(g, node, inputs, attrs):
    return R.concat(Tuple(tuple(inputs)), axis=int(attrs["axis"]))


@converter("Split", values=(1,))
def _split(g, node, inputs, attrs):
    x = inputs[0]
    axis = int(attrs.get("axis", 0)) % ndim_of(x)
    length = static_shape(x)[axis]
    sizes = attrs.get("split")
    if sizes is None:
        sizes = input_value(g, node, 1)
    n = len(node.output)
    if sizes is None:
        parts = attrs.get("num_outputs", n)
        step = -(-length // parts)
        sizes = [min(step, length - i * step) for i in range(parts)]
    indices = tuple(int(i) for i in np.cumsum(np.asarray(sizes, dtype=np.int64))[:-1])
    out = g.emit(R.split(x, indices_or_sections=indices, axis=axis))
    from retrograd.ir.expr import TupleGetItem

    return [g.emit(TupleGetItem(out, i)) for i in range(len(indices) + 1)]


@converter("Slice", values=(1, 2, 3, 4))
def _slice(g, node, inputs, attrs):
    x = inputs[0]
    shape = static_shape(x)
    if g.opset < 10 or "starts" in attrs:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        starts = input_value(g, node, 1)
        ends = input_value(g, node, 2)
        axes = input_value(g, node, 3)
        steps = input_value(g, node, 4)
    starts = [int(v) for v in np.asarray(starts).reshape(-1)]
    ends = [int(v) for v in np.asarray(ends).reshape(-1)]
    axes = list(range(len(starts))) if axes is None else [int(a) % len(shape) for a in np.asarray(axes).reshape(-1)]
    steps = [1] * len(starts) if steps is None else [int(s) for s in np.asarray(steps).reshape(-1)]
    index = [slice(None)] * len(shape)
    for a, b, e, s in zip(axes, starts, ends, steps):
        index[a] = slice(b, e, s)
    # normalize against the static extent (python slicing clamps exactly as ONNX specifies)
    begin, end, stride = [], [], []
    for a in axes:
        b, e, s = index[a].indices(shape[a])
        if s < 0 and e < 0:
            e = -shape[a] - 1  # through index 0
        begin.append(b)
        end.append(e)
        stride.append(s)
    return R.strided_slice(x, axes=tuple(axes), begin=tuple(begin), end=tuple(end), strides=tuple(stride))


def _wrap_indices(g, idx, extent):
    """ONNX indices may be negative: idx + extent where idx < 0."""
    zero = scalar(g, 0, idx)
    return R.where(R.less(idx, zero), R.add(idx, scalar(g, extent, idx)), idx)


@converter("Gather")
def _gather(g, node, inputs, attrs):
    x, idx = inputs
    axis = int(attrs.get("axis", 0)) % ndim_of(x)
    idx = g.emit(_wrap_indices(g, idx, static_shape(x)[axis]))
    return R.take(x, idx, axis=axis)


@converter("GatherElements")
def _gather_elements(g, node, inputs, attrs):
    x, idx = inputs
    axis = int(attrs.get("axis", 0)) % ndim_of(x)
    idx = g.emit(_wrap_indices(g, idx, static_shape(x)[axis]))
    return R.gather_elements(x, idx, axis=axis)


@converter("GatherND")
def _gather_nd(g, node, inputs, attrs):
    return R.gather_nd(inputs[0], inputs[1], batch_dims=int(attrs.get("batch_dims", 0)))


@converter("ScatterElements", "Scatter")
def _scatter_elements(g, node, inputs, attrs):
    x, idx, upd = inputs
    axis = int(attrs.get("axis", 0)) % ndim_of(x)
    red = attrs.get("reduction", "none")
    red = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}[red]
    idx = g.emit(_wrap_indices(g, idx, static_shape(x)[axis]))
    return R.scatter_elements(x, idx, upd, axis=axis, reduction=red)


@converter("ScatterND")
def _scatter_nd(g, node, inputs, attrs):
    red = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}[attrs.get("reduction", "none")]
    return R.scatter_nd(*inputs, reduction=red)


@converter("Expand", values=(1,))
def _expand(g, node, inputs, attrs):
    x = inputs[0]
    if not g.known(node.input[1]):  # bidirectional broadcast, computed at run time
        s = g.emit(R.astype(inputs[1], dtype="int64"))
        k, n = _length(s), ndim_of(x)
        if k < n:
            s = g.emit(R.concat(Tuple((g.const(np.ones(n - k, np.int64)), s)), axis=0))
        if n < k:
            x = g.emit(reshape(x, (1,) * (k - n) + static_shape(x)))
        out = g.emit(R.maximum(s, x_dims(g, x, max(k, n))))
        return broadcast_to(x, runtime_shape(g, out))
    shape = [int(d) for d in g.value_of(node.input[1])]
    old = list(static_shape(x))
    n = max(len(shape), len(old))
    shape = [1] * (n - len(shape)) + shape
    old = [1] * (n - len(old)) + old
    out = tuple(o if s == 1 else s for s, o in zip(shape, old))
    if len(old) != ndim_of(x):
        x = g.emit(reshape(x, tuple(old)))
    return broadcast_to(x, out)


@converter("Tile", values=(1,))
def _tile(g, node, inputs, attrs):
    reps = tuple(int(r) for r in g.value_of(node.input[1]))
    return R.tile(inputs[0], repeats=reps)


@converter("Pad", values=(1, 2, 3))
def _pad(g, node, inputs, attrs):
    x = inputs[0]
    nd = ndim_of(x)
    pads = attrs.get("pads")
    if pads is None:
        pads = [int(p) for p in g.value_of(node.input[1])]
    axes = input_value(g, node, 3)
    axes = list(range(nd)) if axes is None else [int(a) % nd for a in axes]
    k = len(axes)
    width = [0] * (2 * nd)
    for j, a in enumerate(axes):
        width[a], width[nd + a] = int(pads[j]), int(pads[k + j])
    value = attrs.get("value", 0.0)
    cv = input_value(g, node, 2)
    if cv is not None:
        value = np.asarray(cv).reshape(-1)[0].item() if np.asarray(cv).size else 0.0
    mode = attrs.get("mode", "constant")
    mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}[mode]
    if min(width) < 0:
        raise UnsupportedError("negative pads are not supported")
    pad_width = tuple(v for a in range(nd) for v in (width[a], width[nd + a]))
    return R.nn.pad(x, pad_width=pad_width, pad_value=float(value), pad_mode=mode)


@converter("Range", values=(0, 1, 2))
def _range(g, node, inputs, attrs):
    start, limit, delta = (g.value_of(n) for n in node.input)
    return np.arange(start, limit, delta).astype(start.dtype)


@converter("EyeLike")
def _eye_like(g, node, inputs, attrs):
    x = inputs[0]
    dtype = _onnx_dtype(g, attrs["dtype"]) if "dtype" in attrs else dtype_of(x)
    n, m = static_shape(x)
    return g.const(np.eye(n, m, k=int(attrs.get("k", 0)), dtype=dtype))


@converter("Trilu", values=(1,))
def _trilu(g, node, inputs, attrs):
    k = input_value(g, node, 1)
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    return (R.triu if attrs.get("upper", 1) else R.tril)(inputs[0], k=k)


@converter("OneHot", values=(1, 2))
def _one_hot(g, node, inputs, attrs):
    idx = inputs[0]
    depth = int(np.asarray(g.value_of(node.input[1])).reshape(-1)[0])
    values = g.value_of(node.input[2])
    idx = g.emit(R.astype(idx, dtype="int64")) if dtype_of(idx) != "int64" else idx
    idx = g.emit(_wrap_indices(g, idx, depth))
    dt = str(values.dtype)
    return R.one_hot(idx, prim(values[1].item(), dt), prim(values[0].item(), dt), depth=depth, axis=int(attrs.get("axis", -1)))


@converter("DepthToSpace", "SpaceToDepth")
def _depth_space(g, node, inputs, attrs):
    x = inputs[0]
    b = int(attrs["blocksize"])
    n, c, h, w = static_shape(x)
    if node.op_type == "SpaceToDepth":
        y = g.emit(reshape(x, (n, c, h // b, b, w // b, b)))
        crd = attrs.get("mode", "DCR") == "CRD"  # the channel outermost, then the block offsets
        y = g.emit(R.permute_dims(y, axes=(0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)))
        return reshape(y, (n, c * b * b, h // b, w // b))
    if attrs.get("mode", "DCR") == "DCR":
        y = g.emit(reshape(x, (n, b, b, c // (b * b), h, w)))
        y = g.emit(R.permute_dims(y, axes=(0, 3, 4, 1, 5, 2)))
    else:
        y = g.emit(reshape(x, (n, c // (b * b), b, b, h, w)))
        y = g.emit(R.permute_dims(y, axes=(0, 1, 4, 2, 5, 3)))
    return reshape(y, (n, c // (b * b), h * b, w * b))


@converter("ReverseSequence")
def _reverse_sequence(g, node, inputs, attrs):
    return R.reverse_sequence(inputs[0], inputs[1], seq_axis=int(attrs.get("time_axis", 0)), batch_axis=int(attrs.get("batch_axis", 1)))


@converter("Compress", values=(1,))
def _compress(g, node, inputs, attrs):
    cond = np.asarray(g.value_of(node.input[1])).astype(bool)
    x = inputs[0]
    axis = attrs.get("axis")
    if axis is None:
        x, axis = g.emit(reshape(x, (-1,))), 0
    keep = np.nonzero(cond)[0].astype(np.int64)
    return R.take(x, g.const(keep), axis=int(axis) % ndim_of(x))


@converter("NonZero")
def _nonzero(g, node, inputs, attrs):
    """The indices of the non-zero elements, (rank, count): the count is known at run time only."""
    return R.nonzero(inputs[0])
