"""ONNX inputs that TVM needs as constants, taken at run time instead: Slice's starts / ends / axes /
steps, reduction / Squeeze / Unsqueeze axes, Pad's pads, TopK's k, Tile's repeats, Range, OneHot's
depth, Split's sizes, Trilu's k, CumSum's axis, Compress's condition.

Each converter here is registered over the import-time one (`runtime_variant`) and used only when one
of those inputs is not known at import time. They are composed from ops with kernels and gradient
rules: a size computed at run time becomes an index vector (`arange_n`) that `take` gathers with,
or a shape value (`R.tensor_to_shape`); results whose extents depend on input values are typed as
TVM types them, with a known rank and unknown extents (R.Tensor(ndim=k)).
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import CONVERTERS, dtype_of, ndim_of, reshape
from retrograd.frontend.onnx_ops_reduce import reduce_composed, scan, static_reducer
from retrograd.frontend.onnx_ops_shape import runtime_shape, x_dims
from retrograd.ir.dtypes import reduction_identity
from retrograd.ir.expr import Tuple
from retrograd.ops.api import R

INT64_MAX = np.iinfo(np.int64).max


def runtime_variant(*op_types: str, slots: tuple[int, ...]):
    """Register fn for op_types when an input at one of `slots` is computed at run time; the
    import-time converter keeps every other case."""

    def deco(fn):
        for t in op_types:
            static = CONVERTERS[t]

            def conv(g, node, inputs, attrs, static=static):
                if any(i < len(node.input) and node.input[i] and not g.known(node.input[i]) for i in slots):
                    return fn(g, node, inputs, attrs)
                return static(g, node, inputs, attrs)

            CONVERTERS[t] = conv
        return fn

    return deco


# -- helpers: sizes and index vectors computed at run time -----------------------------------------
def i64(g, e):
    return e if dtype_of(e) == "int64" else g.emit(R.astype(e, dtype="int64"))


def c64(g, value):
    return g.const(np.asarray(value, dtype=np.int64))


def scalar_of(g, e):
    """A 0-d int64 tensor from a 0-d or one-element input (ONNX gives both)."""
    e = i64(g, e)
    return e if ndim_of(e) == 0 else g.emit(reshape(e, ()))


def pick(g, vec, i: int):
    """vec[i] as a 0-d tensor."""
    return g.emit(R.take(vec, c64(g, i), axis=0))


def static_length(e) -> int:
    """The length of a 1-D input whose values are runtime but whose length the graph fixes."""
    shape = e.struct_info.shape
    if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
        raise UnsupportedError(f"needs a 1-D input of static length, got {e.struct_info}")
    return shape[0]


def arange_n(g, n):
    """0, 1, ..., n - 1 (int64) for a 0-d int64 tensor n known only at run time (empty when n <= 0)."""
    n = g.emit(R.maximum(n, c64(g, 0)))
    ones = g.emit(R.full(runtime_shape(g, g.emit(reshape(n, (1,)))), c64(g, 1), dtype="int64"))
    return g.emit(R.subtract(g.emit(R.cumsum(ones, axis=0)), c64(g, 1)))


def wrap_axes(g, axes, nd):
    """Axes in [-nd, nd) made non-negative."""
    axes = i64(g, axes)
    return g.emit(R.where(R.less(axes, c64(g, 0)), R.add(axes, c64(g, nd)), axes))


def axes_mask(g, axes, nd: int):
    """A bool vector of length nd: which dims the (runtime) axes name."""
    a = g.emit(R.expand_dims(wrap_axes(g, axes, nd), axis=(1,)))
    hits = g.emit(R.astype(R.equal(a, c64(g, np.arange(nd).reshape(1, nd))), dtype="int64"))
    return g.emit(R.greater(g.emit(R.sum(hits, axis=(0,))), c64(g, 0)))


def kept_dims(g, dims, mask, n_kept: int):
    """The entries of dims where mask is False, in order (n_kept of them)."""
    order = g.emit(R.argsort(R.astype(mask, dtype="int64"), axis=0, dtype="int64"))
    keep = g.emit(R.take(order, c64(g, np.arange(n_kept)), axis=0))
    return g.emit(R.take(dims, keep, axis=0))


def scatter_vec(g, base, positions, values):
    """base (1-D) with values written at positions."""
    return g.emit(R.scatter_elements(base, positions, i64(g, values), axis=0))


def take_along(g, x, idx, axis: int):
    return g.emit(R.take(x, idx, axis=axis))


# -- reductions, Squeeze, Unsqueeze with runtime axes ----------------------------------------------
def _reduce_masked(g, kind: str, x, mask):
    """Reduce x (keeping dims) over the dims mask marks, one axis at a time: axis i takes either x's
    n entries or the reduction appended after them (index n), chosen by mask[i] at run time."""
    nd = ndim_of(x)
    dims = x_dims(g, x, nd)
    fn = getattr(R, kind)
    for i in range(nd):
        part = x
        if kind in ("max", "min"):  # the identity element appended: an empty axis reduces to it
            slab = g.emit(R.sum(x, axis=(i,), keepdims=True))
            part = g.emit(R.concat(Tuple((x, g.emit(R.full_like(slab, g.const(reduction_identity(kind, dtype_of(x)), dtype_of(x)))))), axis=i))
        r = g.emit(fn(part, axis=(i,), keepdims=True))
        both = g.emit(R.concat(Tuple((x, r)), axis=i))
        on, n = pick(g, mask, i), pick(g, dims, i)
        length = g.emit(R.where(on, c64(g, 1), n))
        idx = g.emit(R.add(arange_n(g, length), g.emit(R.where(on, n, c64(g, 0)))))
        x = take_along(g, both, idx, i)
    return x


@runtime_variant("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                 "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", slots=(1,))
def _reduce_runtime_axes(g, node, inputs, attrs):
    x, axes = inputs[0], inputs[1]
    nd = ndim_of(x)
    k = static_length(axes)
    keep = bool(attrs.get("keepdims", 1))
    if k == 0:  # no axes: every axis, or none with noop_with_empty_axes
        if attrs.get("noop_with_empty_axes", 0):
            return x
        return reduce_composed(g, node.op_type, x, static_reducer(g, tuple(range(nd))), keep)
    mask = axes_mask(g, axes, nd)
    dims = x_dims(g, x, nd)

    def red(kind, y, keep):
        if kind == "mean":
            total = g.emit(red("sum", y, keep))
            count = g.emit(R.prod(R.where(mask, dims, c64(g, 1))))
            return R.divide(total, R.astype(count, dtype=dtype_of(y)))
        out = _reduce_masked(g, kind, y, mask)
        if keep:
            return out
        shape = kept_dims(g, x_dims(g, out, nd), mask, nd - k)
        return R.reshape(out, runtime_shape(g, shape))

    return reduce_composed(g, node.op_type, x, red, keep)


@runtime_variant("Squeeze", slots=(1,))
def _squeeze_runtime(g, node, inputs, attrs):
    x, axes = inputs
    nd = ndim_of(x)
    shape = kept_dims(g, x_dims(g, x, nd), axes_mask(g, axes, nd), nd - static_length(axes))
    return R.reshape(x, runtime_shape(g, shape))


@runtime_variant("Unsqueeze", slots=(1,))
def _unsqueeze_runtime(g, node, inputs, attrs):
    x, axes = inputs
    out_nd = ndim_of(x) + static_length(axes)
    mask = axes_mask(g, axes, out_nd)
    # output dim j reads x's dim (number of non-inserted dims before j); a trailing 1 keeps 0-d x safe
    src = g.emit(R.subtract(g.emit(R.cumsum(R.astype(R.logical_not(mask), dtype="int64"), axis=0)), c64(g, 1)))
    src = g.emit(R.maximum(src, c64(g, 0)))
    dims = g.emit(R.concat(Tuple((x_dims(g, x, ndim_of(x)), c64(g, [1]))), axis=0))
    shape = g.emit(R.where(mask, c64(g, 1), g.emit(R.take(dims, src, axis=0))))
    return R.reshape(x, runtime_shape(g, shape))


# -- Slice, Split, Tile, Compress: index vectors -------------------------------------------------
@runtime_variant("Slice", slots=(1, 2, 3, 4))
def _slice_runtime(g, node, inputs, attrs):
    x = inputs[0]
    nd = ndim_of(x)
    starts, ends = i64(g, inputs[1]), i64(g, inputs[2])
    k = static_length(starts)
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else c64(g, np.arange(k))
    axes = wrap_axes(g, axes, nd)
    steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else c64(g, np.ones(k))
    begin = scatter_vec(g, c64(g, np.zeros(nd)), axes, starts)
    end = scatter_vec(g, c64(g, np.full(nd, INT64_MAX)), axes, ends)
    strides = scatter_vec(g, c64(g, np.ones(nd)), axes, steps)
    # Python slicing clamps begin/end exactly as ONNX specifies, for either sign of the step
    return R.dynamic_strided_slice(x, begin, end, strides)


@runtime_variant("Split", slots=(1,))
def _split_runtime(g, node, inputs, attrs):
    x, sizes = inputs[0], i64(g, inputs[1])
    axis = int(attrs.get("axis", 0)) % ndim_of(x)
    offsets = g.emit(R.cumsum(sizes, axis=0, exclusive=True))
    outs = []
    for j in range(len(node.output)):
        idx = g.emit(R.add(arange_n(g, pick(g, sizes, j)), pick(g, offsets, j)))
        outs.append(take_along(g, x, idx, axis))
    return outs


@runtime_variant("Tile", slots=(1,))
def _tile_runtime(g, node, inputs, attrs):
    x, reps = inputs[0], i64(g, inputs[1])
    nd = ndim_of(x)
    dims = x_dims(g, x, nd)
    for i in range(nd):
        n = pick(g, dims, i)
        length = g.emit(R.multiply(n, pick(g, reps, i)))
        idx = g.emit(R.floor_mod(arange_n(g, length), g.emit(R.maximum(n, c64(g, 1)))))
        x = take_along(g, x, idx, i)
    return x


@runtime_variant("Compress", slots=(1,))
def _compress_runtime(g, node, inputs, attrs):
    x, cond = inputs
    axis = attrs.get("axis")
    if axis is None:
        x, axis = g.emit(reshape(x, (-1,))), 0
    # the positions of True, in order: a stable sort puts them (key 0) first
    flags = g.emit(R.astype(R.logical_not(R.astype(cond, dtype="bool")), dtype="int64"))
    order = g.emit(R.argsort(flags, axis=0, dtype="int64"))
    count = g.emit(R.sum(R.astype(R.astype(cond, dtype="bool"), dtype="int64"), axis=None))
    idx = take_along(g, order, arange_n(g, i64(g, count)), 0)
    return R.take(x, idx, axis=int(axis) % ndim_of(x))


@runtime_variant("Range", slots=(0, 1, 2))
def _range_runtime(g, node, inputs, attrs):
    start, limit, delta = inputs
    dt = dtype_of(start)
    f = lambda e: g.emit(R.astype(e, dtype="float64"))  # noqa: E731
    n = g.emit(R.ceil(R.divide(R.subtract(f(limit), f(start)), f(delta))))
    steps = g.emit(R.astype(arange_n(g, i64(g, n)), dtype=dt))
    return R.add(start, g.emit(R.multiply(steps, delta)))


# -- TopK, OneHot, Trilu, CumSum / CumProd ------------------------------------------------------------
@runtime_variant("TopK", slots=(1,))
def _topk_runtime(g, node, inputs, attrs):
    x, k = inputs
    axis = int(attrs.get("axis", -1)) % ndim_of(x)
    # a stable order: equal values keep index order, as ONNX asks, in both directions
    order = g.emit(R.argsort(x, axis=axis, descending=bool(attrs.get("largest", 1)), dtype="int64"))
    idx = take_along(g, order, arange_n(g, scalar_of(g, k)), axis)
    return [g.emit(R.gather_elements(x, idx, axis=axis)), idx]


@runtime_variant("OneHot", slots=(1, 2))
def _one_hot_runtime(g, node, inputs, attrs):
    idx, depth, values = inputs
    nd = ndim_of(idx) + 1
    axis = int(attrs.get("axis", -1)) % nd
    depth = scalar_of(g, g.emit(R.floor(R.astype(depth, dtype="float64"))) if not dtype_of(depth).startswith(("int", "uint")) else depth)
    idx = i64(g, idx)
    idx = g.emit(R.where(R.less(idx, c64(g, 0)), R.add(idx, depth), idx))
    classes = arange_n(g, depth)
    if nd - 1 - axis:
        classes = g.emit(R.expand_dims(classes, axis=tuple(range(1, nd - axis))))
    hit = g.emit(R.equal(g.emit(R.expand_dims(idx, axis=(axis,))), classes))
    return R.where(hit, pick(g, values, 1), pick(g, values, 0))


@runtime_variant("Trilu", slots=(1,))
def _trilu_runtime(g, node, inputs, attrs):
    x, k = inputs
    nd = ndim_of(x)
    dims = x_dims(g, x, nd)
    rows = g.emit(R.expand_dims(arange_n(g, pick(g, dims, nd - 2)), axis=(1,)))
    cols = g.emit(R.expand_dims(arange_n(g, pick(g, dims, nd - 1)), axis=(0,)))
    diag = g.emit(R.subtract(cols, rows))
    test = R.greater_equal if attrs.get("upper", 1) else R.less_equal
    keep = g.emit(test(diag, scalar_of(g, k)))
    return R.where(keep, x, g.const(0, dtype_of(x)))


@runtime_variant("CumSum", "CumProd", slots=(1,))
def _scan_runtime(g, node, inputs, attrs):
    x, axis = inputs
    nd = ndim_of(x)
    a = g.emit(R.floor_mod(scalar_of(g, axis), c64(g, nd)))
    fn = R.cumsum if node.op_type == "CumSum" else R.cumprod
    out = None
    for i in range(nd):  # one scan per possible axis, the one asked for chosen at run time
        y = g.emit(scan(g, x, i, attrs, fn))
        out = y if out is None else g.emit(R.where(R.equal(a, c64(g, i)), y, out))
    return out


# -- Pad ----------------------------------------------------------------------------------------------
def _pad_source(g, mode: str, j, n):
    """Where output position j (x's coordinates, may be outside [0, n)) reads x, by pad mode."""
    one = c64(g, 1)
    if mode == "wrap":
        return g.emit(R.floor_mod(j, g.emit(R.maximum(n, one))))
    if mode == "reflect":
        period = g.emit(R.maximum(g.emit(R.subtract(R.add(n, n), c64(g, 2))), one))
        r = g.emit(R.floor_mod(j, period))
        return g.emit(R.where(R.greater_equal(r, n), R.subtract(period, r), r))
    top = g.emit(R.maximum(g.emit(R.subtract(n, one)), c64(g, 0)))
    return g.emit(R.minimum(g.emit(R.maximum(j, c64(g, 0))), top))  # edge; constant masks afterwards


@runtime_variant("Pad", slots=(1, 2, 3))
def _pad_runtime(g, node, inputs, attrs):
    inputs = list(inputs) + [None] * (4 - len(inputs))
    x = inputs[0]
    nd = ndim_of(x)
    pads = c64(g, attrs["pads"]) if "pads" in attrs else i64(g, inputs[1])
    k = static_length(pads) // 2
    axes = wrap_axes(g, inputs[3] if inputs[3] is not None else c64(g, np.arange(k)), nd)
    half = lambda lo: g.emit(R.strided_slice(pads, axes=(0,), begin=(lo,), end=(lo + k,)))  # noqa: E731
    before = scatter_vec(g, c64(g, np.zeros(nd)), axes, half(0))
    after = scatter_vec(g, c64(g, np.zeros(nd)), axes, half(k))
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise UnsupportedError(f"Pad mode {mode!r} is not supported")
    dims = x_dims(g, x, nd)
    inside = None
    for i in range(nd):  # gather each axis by a source index; negative pads crop
        n, b = pick(g, dims, i), pick(g, before, i)
        length = g.emit(R.add(R.add(n, b), pick(g, after, i)))
        j = g.emit(R.subtract(arange_n(g, length), b))
        x = take_along(g, x, _pad_source(g, mode, j, n), i)
        if mode == "constant":
            ok = g.emit(R.logical_and(R.greater_equal(j, c64(g, 0)), R.less(j, n)))
            others = tuple(a for a in range(nd) if a != i)
            ok = g.emit(R.expand_dims(ok, axis=others)) if others else ok
            inside = ok if inside is None else g.emit(R.logical_and(inside, ok))
    if mode != "constant" or inside is None:
        return x
    if inputs[2] is not None:
        value = g.emit(R.astype(inputs[2], dtype=dtype_of(x)))
        value = value if ndim_of(value) == 0 else g.emit(reshape(value, ()))
    else:
        value = g.const(attrs.get("value", 0.0), dtype_of(x))
    return R.where(inside, x, value)
