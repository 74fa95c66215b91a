"""Separable resampling: resize as per-axis taps (gathers, segmented sums), adaptive pooling as matrices."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import all_finite, check_float, to_layout

COORDINATE_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn",
                    "tf_crop_and_resize")
METHODS = ("nearest_neighbor", "linear", "cubic")
ROUNDING = ("", "round", "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coords(size: int, out: int, mode: str, dtype=np.float64) -> np.ndarray:
    """The input coordinate each output position samples (TVM's get_inx), computed in `dtype` (TVM
    computes in float32; nearest-neighbour indices follow its rounding of ties)."""
    f = np.dtype(dtype).type
    x = np.arange(out, dtype=dtype)
    scale = f(size) / f(out)
    half = f(0.5)
    if mode == "half_pixel":
        return (x + half) * scale - half
    if mode == "pytorch_half_pixel":
        return (x + half) * scale - half if out > 1 else np.zeros(out, dtype)
    if mode == "align_corners":
        return f(size - 1) / f(out - 1) * x if out > 1 else np.zeros(out, dtype)
    if mode == "asymmetric":
        return x * scale
    if mode == "tf_half_pixel_for_nn":
        return (x + half) * scale
    raise KernelError(f"resize: coordinate_transformation_mode {mode!r} is not supported")


def _round(x, method, mode):
    """TVM's get_closest_index: "round" is to the nearest even on ties (LLVM's nearbyint), floor and ceil
    allow 1e-5 of error, and no method means round for align_corners, else floor."""
    if method == "":
        method = "round" if mode == "align_corners" else "floor"
    eps = x.dtype.type(1e-5)
    if method == "round":
        return np.rint(x)
    if method == "round_prefer_ceil":
        return np.floor(x + x.dtype.type(0.5))
    if method == "round_prefer_floor":
        return np.ceil(x - x.dtype.type(0.5))
    if method == "floor":
        return np.floor(x + eps)
    if method == "ceil":
        return np.ceil(x - eps)
    raise KernelError(f"resize: rounding_method must be one of {ROUNDING}, got {method!r}")


def _cubic_weights(t, a):
    """Weights of taps -1, 0, 1, 2 at fraction t (Keys' kernel with parameter a)."""
    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def axis_taps(size, out, method="linear", mode="half_pixel", rounding="round", cubic_alpha=-0.75, cubic_exclude=0):
    """One axis's interpolation as taps: [(input index per output, weight per output)], indices clipped
    into range and non-decreasing along the output."""
    if method not in METHODS:
        raise KernelError(f"resize: method must be one of {METHODS}, got {method!r}")
    if method == "nearest_neighbor":
        x = source_coords(size, out, mode, np.float32)
        return [(np.clip(_round(x, rounding, mode).astype(np.int64), 0, size - 1), np.ones(out))]
    x = source_coords(size, out, mode)
    x0 = np.floor(x)
    t = x - x0
    x0 = x0.astype(np.int64)
    if method == "linear":
        taps, weights = [x0, x0 + 1], [1 - t, t]
    else:
        taps, weights = [x0 - 1, x0, x0 + 1, x0 + 2], _cubic_weights(t, cubic_alpha)
    if method == "cubic" and cubic_exclude:
        weights = [np.where((i >= 0) & (i < size), w, 0.0) for i, w in zip(taps, weights)]
        total = sum(weights)
        weights = [w / total for w in weights]
    return [(np.clip(i, 0, size - 1), w) for i, w in zip(taps, weights)]


def resize_matrix(size, out, method="linear", mode="half_pixel", rounding="round", cubic_alpha=-0.75,
                  cubic_exclude=0, dtype="float64"):
    """(out, size) interpolation matrix of one axis (the taps, densely)."""
    m = np.zeros((out, size))
    rows = np.arange(out)
    for idx, w in axis_taps(size, out, method, mode, rounding, cubic_alpha, cubic_exclude):
        np.add.at(m, (rows, idx), w)
    return m.astype(dtype)


def _bcast(w, axis, ndim, dtype):
    shape = [1] * ndim
    shape[axis] = w.shape[0]
    return w.astype(dtype).reshape(shape)


def _last_axis_matrix(taps, size, dtype):
    """The (size, out) matrix of an axis's taps, for a last-axis contraction as one GEMM."""
    m = np.zeros((size, taps[0][0].size), dtype)
    for idx, w in taps:
        np.add.at(m, (idx, np.arange(idx.size)), w)
    return m


def gather_axis(y, axis, taps):
    """sum_k y[idx_k along axis] * w_k: the resize of one axis (the last axis as one GEMM when the data
    is finite, others as row gathers into one result buffer)."""
    if axis == y.ndim - 1 and all_finite(y):
        m = _last_axis_matrix(taps, y.shape[-1], y.dtype)
        return (np.ascontiguousarray(y).reshape(-1, y.shape[-1]) @ m).reshape(y.shape[:-1] + (m.shape[1],))
    out = np.take(y, taps[0][0], axis=axis)
    out *= _bcast(taps[0][1], axis, y.ndim, y.dtype)
    tmp = np.empty_like(out) if len(taps) > 1 else None
    for idx, w in taps[1:]:
        np.take(y, idx, axis=axis, out=tmp)
        tmp *= _bcast(w, axis, y.ndim, y.dtype)
        out += tmp
    return out


def scatter_axis(g, axis, taps, size):
    """The adjoint of gather_axis: each input position sums the weighted gradients of the outputs that
    read it. Along the last axis that is one GEMM with the (small) transposed matrix; along another, the
    outputs reading one input form a run (the indices are non-decreasing), and the t-th element of every
    run is gathered at once (runs are about as long as the upsampling factor)."""
    if axis == g.ndim - 1 and all_finite(g):
        m = _last_axis_matrix(taps, size, g.dtype)
        return (np.ascontiguousarray(g).reshape(-1, g.shape[-1]) @ m.T).reshape(g.shape[:-1] + (size,))
    shape = list(g.shape)
    shape[axis] = size
    dx = np.zeros(shape, g.dtype)
    lead = (slice(None),) * axis
    for idx, w in taps:
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        lengths = np.diff(np.r_[starts, idx.size])
        for t in range(int(lengths.max())):
            keep = lengths > t
            pos = starts[keep] + t
            part = np.take(g, pos, axis=axis)
            part *= _bcast(w[pos], axis, g.ndim, g.dtype)
            targets = idx[starts[keep]]
            if targets[-1] - targets[0] + 1 == targets.size:  # a contiguous range: a slice, not a gather
                dx[lead + (slice(targets[0], targets[-1] + 1),)] += part
            else:
                dx[lead + (targets,)] += part
    return dx


def apply_axes(y: np.ndarray, mats) -> np.ndarray:
    """y (N, C, spatial...) with spatial axis j contracted with mats[j] (out_j, in_j); None skips.

    Each contraction is one GEMM: the last axis in place, any other axis moved first."""
    # Shrinking contractions first: every later one then works on less data.
    order = sorted((j for j, m in enumerate(mats) if m is not None), key=lambda j: mats[j].shape[0] / mats[j].shape[1])
    for j in order:
        m = mats[j]
        axis = 2 + j
        y = np.ascontiguousarray(y)
        shape = y.shape
        m = np.ascontiguousarray(m, dtype=y.dtype)
        if axis == y.ndim - 1:
            y = (y.reshape(-1, shape[-1]) @ m.T).reshape(shape[:-1] + (m.shape[0],))
        else:
            # The axis first, then one wide GEMM: many small GEMMs stall OpenBLAS's threads.
            pre, post = int(np.prod(shape[:axis])), int(np.prod(shape[axis + 1 :]))
            lead = np.ascontiguousarray(y.reshape(pre, shape[axis], post).transpose(1, 0, 2)).reshape(shape[axis], -1)
            y = (m @ lead).reshape(m.shape[0], pre, post).transpose(1, 0, 2)
            y = y.reshape(shape[:axis] + (m.shape[0],) + shape[axis + 1 :])
    return y


def resize(data, size, *, roi=None, layout, method="linear", coordinate_transformation_mode="half_pixel",
           rounding_method="round", cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None,
           spatial="HW"):
    """image.resize2d / resize3d: data resampled to `size` along the axes `spatial` of `layout`."""
    op = f"resize{len(spatial)}d"
    x = np.asarray(data)
    check_float(op, "data", x)
    canon = "NC" + spatial
    y = to_layout(op, x, layout, canon)
    sizes = tuple(int(v) for v in np.atleast_1d(size))
    if len(sizes) != len(spatial) or min(sizes) < 1:
        raise KernelError(f"{op}: size must be {len(spatial)} positive ints, got {size!r}")
    if 0 in y.shape[2:]:
        raise KernelError(f"{op}: cannot resample an empty spatial axis (input {y.shape[2:]}) to {sizes}")
    args = (method, coordinate_transformation_mode, rounding_method, cubic_alpha, cubic_exclude)
    if x.dtype.itemsize < 4:  # as TVM's topi resize: 16-bit pixels are read as float32, cast to the output at the end
        y = y.astype(np.float32)
    # Shrinking axes first: every later pass then works on less data.
    for j in sorted(range(len(sizes)), key=lambda j: sizes[j] / y.shape[2 + j]):
        y = gather_axis(y, 2 + j, axis_taps(y.shape[2 + j], sizes[j], *args))
    dtype = x.dtype if out_dtype in (None, "", "void") else np.dtype(out_dtype)
    return np.ascontiguousarray(to_layout(op, y, canon, layout)).astype(dtype, copy=False)


def resize_backward(output_grad, data, *, roi=None, layout, method="linear",
                    coordinate_transformation_mode="half_pixel", rounding_method="round", cubic_alpha=-0.75,
                    cubic_exclude=0, extrapolation_value=0.0, out_dtype=None, spatial="HW"):
    """The adjoint of resize: output_grad contracted with each axis's transposed interpolation matrix,
    in the data's shape and dtype."""
    op = f"resize{len(spatial)}d_backward"
    x = np.asarray(data)
    check_float(op, "data", x)
    canon = "NC" + spatial
    xs = to_layout(op, x, layout, canon).shape
    g = to_layout(op, np.asarray(output_grad), layout, canon).astype(x.dtype, copy=False)
    if g.shape[:2] != xs[:2] or g.ndim != len(xs):
        raise KernelError(f"{op}: output_grad {g.shape} does not match the data {xs} (in {canon} order)")
    if 0 in xs[2:] or 0 in g.shape[2:]:
        return np.zeros(x.shape, x.dtype)  # nothing read, or nothing to read from: a zero gradient
    args = (method, coordinate_transformation_mode, rounding_method, cubic_alpha, cubic_exclude)
    # Shrinking (output-to-input) axes first.
    for j in sorted(range(len(xs) - 2), key=lambda j: xs[2 + j] / g.shape[2 + j]):
        g = scatter_axis(g, 2 + j, axis_taps(xs[2 + j], g.shape[2 + j], *args), xs[2 + j])
    return np.ascontiguousarray(to_layout(op, g, canon, layout))
