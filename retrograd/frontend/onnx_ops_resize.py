"""ONNX Resize (and Upsample), with ONNX's semantics for every input and attribute.

R.image.resize2d / resize3d (TVM's op: the scale is out / in, no roi) is used when it computes what
ONNX asks: static sizes, or static scales that are exactly out / in, over the spatial axes of an
N, C, spatial... tensor. Everything else (a scale that is not out / in, tf_crop_and_resize,
half_pixel_symmetric, antialias, keep_aspect_ratio_policy, any axes, scales or sizes given at run
time) is composed here, one axis at a time, as ONNX's reference does: source coordinates from the
output positions, then a weighted sum of `take`s of the neighbouring input positions (their gradient
is a scatter-add). The coordinates are computed at run time from the input's extents, so the same
code serves static and runtime sizes; a result whose shape is known at import time is match_cast to it.
"""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import converter, dtype_of, ndim_of
from retrograd.frontend.onnx_ops_dynamic import arange_n, pick, take_along
from retrograd.frontend.onnx_ops_shape import is_static, static_shape, x_dims
from retrograd.ir.expr import Constant, ShapeExpr
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R

_FUSED_MODES = ("half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel", "tf_half_pixel_for_nn")


def _present(g, node, i: int):
    """Input i when given and not empty (ONNX passes '' or an empty tensor for 'absent')."""
    if i >= len(node.input) or not node.input[i]:
        return None
    e = g.env[node.input[i]]
    return None if e.struct_info.shape is not None and 0 in e.struct_info.shape else e


@converter("Resize", "Upsample", values=(1, 2, 3))
def _resize(g, node, inputs, attrs):
    x = inputs[0]
    nd = ndim_of(x)
    if node.op_type == "Upsample":  # opset 7-9: scales as input 1 (or an attribute), no roi
        scales_in, sizes_in, roi_in = (_present(g, node, 1) if "scales" not in attrs else g.const(np.asarray(attrs["scales"], np.float32))), None, None
    else:
        roi_in, scales_in, sizes_in = _present(g, node, 1), _present(g, node, 2), _present(g, node, 3)
    if scales_in is None and sizes_in is None:
        raise UnsupportedError("Resize needs scales or sizes")
    axes = [int(a) % nd for a in attrs.get("axes", range(nd))]
    ctm = attrs.get("coordinate_transformation_mode", "half_pixel" if node.op_type == "Resize" else "asymmetric")
    attrs = dict(attrs, coordinate_transformation_mode=ctm)
    if node.op_type == "Upsample":  # its nearest neighbour is the floor (the reference's)
        attrs.setdefault("nearest_mode", "floor")
    fused = _fused(g, x, attrs, axes, scales_in, sizes_in)
    if fused is not None:
        return fused
    return _composed(g, x, attrs, axes, scales_in, sizes_in, roi_in)


def _fused(g, x, attrs, axes, scales_in, sizes_in):
    """R.image.resize{2,3}d when it is exactly ONNX's Resize here, else None."""
    nd = ndim_of(x)
    mode = attrs.get("mode", "nearest")
    ctm = attrs["coordinate_transformation_mode"]
    if (nd not in (4, 5) or not is_static(x) or attrs.get("antialias", 0) or ctm not in _FUSED_MODES
            or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch" or mode not in ("nearest", "linear", "cubic")):
        return None
    shape = static_shape(x)
    out = list(shape)
    values = sizes_in if sizes_in is not None else scales_in
    if not isinstance(values, Constant):
        return None
    for a, v in zip(axes, np.asarray(values.data).reshape(-1)):
        if sizes_in is not None:
            out[a] = int(v)
        else:
            out[a] = int(math.floor(shape[a] * float(v)))
            if out[a] != shape[a] * float(v):  # ONNX maps with the given scale, TVM with out / in
                return None
    if out[:2] != list(shape[:2]) or min(out) < 1:
        return None
    fn = R.image.resize2d if nd == 4 else R.image.resize3d
    method = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}[mode]
    return fn(x, ShapeExpr(tuple(out[2:])), method=method, coordinate_transformation_mode=ctm,
              rounding_method=attrs.get("nearest_mode", "round_prefer_floor") if method == "nearest_neighbor" else "",
              cubic_alpha=float(attrs.get("cubic_coeff_a", -0.75)), cubic_exclude=int(attrs.get("exclude_outside", 0)))


def _f64(g, e):
    return e if dtype_of(e) == "float64" else g.emit(R.astype(e, dtype="float64"))


def _d(g, v):
    return g.const(np.asarray(v, dtype=np.float64))


def _composed(g, x, attrs, axes, scales_in, sizes_in, roi_in):
    nd = ndim_of(x)
    dt = dtype_of(x)
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise UnsupportedError(f"Resize mode {mode!r} is not supported")
    antialias = bool(attrs.get("antialias", 0)) and mode != "nearest"
    dims = x_dims(g, x, nd)
    dims_f = _f64(g, dims)
    k = len(axes)
    # per resized axis: its scale and output extent (0-d tensors)
    scale, out = {}, {}
    if sizes_in is not None:
        sizes = _f64(g, sizes_in)
        ratio = [g.emit(R.divide(pick(g, sizes, j), pick(g, dims_f, a))) for j, a in enumerate(axes)]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick_fn = {"not_larger": R.minimum, "not_smaller": R.maximum}[policy]
            common = ratio[0]
            for r in ratio[1:]:
                common = g.emit(pick_fn(common, r))
            for a in axes:
                scale[a] = common
                out[a] = g.emit(R.floor(R.add(R.multiply(common, pick(g, dims_f, a)), _d(g, 0.5))))
        else:
            for j, a in enumerate(axes):
                scale[a], out[a] = ratio[j], pick(g, sizes, j)
    else:
        scales = _f64(g, scales_in)
        for j, a in enumerate(axes):
            scale[a] = pick(g, scales, j)
            out[a] = g.emit(R.floor(R.multiply(scale[a], pick(g, dims_f, a))))
    roi = _f64(g, roi_in) if roi_in is not None and attrs["coordinate_transformation_mode"] == "tf_crop_and_resize" else None
    static = _static_out(g, x, axes, scales_in, sizes_in, attrs)
    y = x if dt in ("float32", "float64") else g.emit(R.astype(x, dtype="float64"))
    for j, a in enumerate(axes):
        r = (pick(g, roi, j), pick(g, roi, k + j)) if roi is not None else None
        y = _resize_axis(g, y, a, pick(g, dims_f, a), scale[a], out[a], attrs, mode, antialias, r)
    if dtype_of(y) != dt:
        y = g.emit(R.astype(R.round(y) if dt.startswith(("int", "uint")) else y, dtype=dt))
    return R.match_cast(y, struct_info=TensorStructInfo(static, dt)) if static is not None else y


def _static_out(g, x, axes, scales_in, sizes_in, attrs):
    """The output shape when the input shape and the scales or sizes are import-time values."""
    values = sizes_in if sizes_in is not None else scales_in
    if not is_static(x) or not isinstance(values, Constant) or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return None
    out = list(static_shape(x))
    for a, v in zip(axes, np.asarray(values.data, dtype=np.float64).reshape(-1)):
        out[a] = int(v) if sizes_in is not None else int(math.floor(v * out[a]))
    return tuple(out)


def _source(g, ctm, yv, n, s, out_i, out_w, roi):
    """ONNX's coordinate transform: where output positions yv read, in input coordinates."""
    half = _d(g, 0.5)
    one_out = R.equal(out_w, _d(g, 1.0))
    if ctm == "align_corners":
        return g.emit(R.where(one_out, _d(g, 0.0), R.divide(R.multiply(yv, R.subtract(n, _d(g, 1))), R.subtract(out_w, _d(g, 1)))))
    if ctm == "asymmetric":
        return g.emit(R.divide(yv, s))
    if ctm == "tf_half_pixel_for_nn":
        return g.emit(R.divide(R.add(yv, half), s))
    centred = g.emit(R.subtract(R.divide(R.add(yv, half), s), half))
    if ctm == "half_pixel":
        return centred
    if ctm == "pytorch_half_pixel":
        return g.emit(R.where(one_out, _d(g, -0.5), centred))
    if ctm == "half_pixel_symmetric":
        offset = R.multiply(R.divide(n, _d(g, 2.0)), R.subtract(_d(g, 1.0), R.divide(out_i, out_w)))
        return g.emit(R.add(offset, centred))
    if ctm == "tf_crop_and_resize":
        if roi is None:
            raise UnsupportedError("Resize tf_crop_and_resize needs roi")
        span = g.emit(R.multiply(R.subtract(roi[1], roi[0]), R.subtract(n, _d(g, 1))))
        x = R.where(one_out, R.divide(span, _d(g, 2.0)), R.divide(R.multiply(yv, span), R.subtract(out_w, _d(g, 1))))
        return g.emit(R.add(x, R.multiply(roi[0], R.subtract(n, _d(g, 1)))))
    raise UnsupportedError(f"Resize coordinate_transformation_mode {ctm!r} is not supported")


def _nearest(g, xs, xi, is_int, rule):
    """The input position ONNX's nearest_mode picks for source coordinate xs (floor xi)."""
    frac = g.emit(R.subtract(xs, xi))
    up = {"round_prefer_floor": R.greater(frac, _d(g, 0.5)), "round_prefer_ceil": R.greater_equal(frac, _d(g, 0.5)),
          "floor": R.less(frac, _d(g, 0.0)), "ceil": R.logical_not(is_int)}.get(rule)
    if up is None:
        raise UnsupportedError(f"Resize nearest_mode {rule!r} is not supported")
    return g.emit(R.where(up, R.add(xi, _d(g, 1.0)), xi))


def _cubic(g, t, a: float):
    """Keys' cubic kernel at distance |t|."""
    t = g.emit(R.abs(t))
    t2 = g.emit(R.multiply(t, t))
    t3 = g.emit(R.multiply(t2, t))
    near = R.add(R.subtract(R.multiply(_d(g, a + 2), t3), R.multiply(_d(g, a + 3), t2)), _d(g, 1.0))
    far = R.subtract(R.add(R.subtract(R.multiply(_d(g, a), t3), R.multiply(_d(g, 5 * a), t2)), R.multiply(_d(g, 8 * a), t)), _d(g, 4 * a))
    return g.emit(R.where(R.less_equal(t, _d(g, 1.0)), near, R.where(R.less(t, _d(g, 2.0)), far, _d(g, 0.0))))


def _interpolate(g, y, axis: int, xs, xi, is_int, s, top, attrs, mode, antialias):
    """Linear / cubic along axis: each output a weighted sum over a window of T input positions
    (T = 2 or 4; antialias widens the kernel by 1 / scale when shrinking, so T is computed too)."""
    nd = ndim_of(y)
    width = 1.0 if mode == "linear" else 2.0
    if antialias:
        shrink = g.emit(R.minimum(s, _d(g, 1.0)))
        taps = g.emit(R.subtract(_d(g, 2.0), R.multiply(_d(g, 2.0), R.add(R.floor(R.divide(_d(g, -width), shrink)), _d(g, 1.0)))))
    else:
        shrink, taps = None, _d(g, 2 * width)
    offsets = g.emit(R.astype(arange_n(g, g.emit(R.astype(taps, dtype="int64"))), dtype="float64"))
    # the window: T positions around xs, preferring the left ones (ONNX's _get_neighbor)
    first = g.emit(R.subtract(R.add(xi, R.subtract(_d(g, 1.0), R.divide(taps, _d(g, 2.0)))), R.astype(is_int, dtype="float64")))
    pos = g.emit(R.add(R.expand_dims(first, axis=(1,)), R.expand_dims(offsets, axis=(0,))))  # (out, T)
    dist = g.emit(R.subtract(pos, R.expand_dims(xs, axis=(1,))))
    if shrink is not None:
        dist = g.emit(R.multiply(dist, shrink))
    if mode == "linear":
        w = g.emit(R.maximum(R.subtract(_d(g, 1.0), R.abs(dist)), _d(g, 0.0)))
    else:
        w = _cubic(g, dist, float(attrs.get("cubic_coeff_a", -0.75)))
    exclude = mode == "cubic" and attrs.get("exclude_outside", 0)
    if exclude:
        w = g.emit(R.where(R.logical_and(R.greater_equal(pos, _d(g, 0.0)), R.less_equal(pos, top)), w, _d(g, 0.0)))
    if antialias or exclude:
        total = g.emit(R.sum(w, axis=(1,), keepdims=True))
        w = g.emit(R.divide(w, R.where(R.equal(total, _d(g, 0.0)), _d(g, 1.0), total)))
    idx = g.emit(R.astype(R.minimum(R.maximum(pos, _d(g, 0.0)), top), dtype="int64"))
    gathered = take_along(g, y, idx, axis)  # y's dims with (out, T) at axis
    rest = tuple(range(2, 1 + nd - axis))
    w = g.emit(R.astype(w, dtype=dtype_of(y)))
    w = g.emit(R.expand_dims(w, axis=rest)) if rest else w
    return g.emit(R.sum(R.multiply(gathered, w), axis=(axis + 1,)))


def _resize_axis(g, y, axis: int, n, s, out_i, attrs, mode, antialias, roi):
    nd = ndim_of(y)
    ctm = attrs["coordinate_transformation_mode"]
    out_w = g.emit(R.multiply(s, n))  # ONNX's output_width: scale * input width, not rounded
    count = g.emit(R.astype(out_i, dtype="int64"))
    yv = g.emit(R.astype(arange_n(g, count), dtype="float64"))
    xs = _source(g, ctm, yv, n, s, out_i, out_w, roi)
    xi = g.emit(R.floor(xs))
    is_int = g.emit(R.equal(xs, xi))
    top = g.emit(R.subtract(n, _d(g, 1)))

    if mode == "nearest":
        src = _nearest(g, xs, xi, is_int, attrs.get("nearest_mode", "round_prefer_floor"))
        result = take_along(g, y, g.emit(R.astype(R.minimum(R.maximum(src, _d(g, 0.0)), top), dtype="int64")), axis)
    else:
        result = _interpolate(g, y, axis, xs, xi, is_int, s, top, attrs, mode, antialias)
    if ctm == "tf_crop_and_resize":
        outside = g.emit(R.logical_or(R.less(xs, _d(g, 0.0)), R.greater(xs, top)))
        fill = g.const(float(attrs.get("extrapolation_value", 0.0)), dtype_of(y))
        rest = tuple(range(1, nd - axis))  # per output position, broadcast against y at `axis`
        outside = g.emit(R.expand_dims(outside, axis=rest)) if rest else outside
        result = g.emit(R.where(outside, fill, result))
    return result
