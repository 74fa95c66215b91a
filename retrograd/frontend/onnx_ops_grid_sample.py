"""ONNX GridSample with ONNX's semantics, any number of spatial dims.

R.image.grid_sample (TVM's op: a 4-D input, bilinear, zeros / border padding) is used where it
computes what ONNX asks. The rest (nearest with ONNX's rounding, bicubic, reflection padding,
volumes) is composed as ONNX's reference computes it: per spatial dim, the denormalized coordinate,
its border / reflection handling, and the taps (positions, weights, validity); every combination of
taps is one `gather_elements` from the flattened spatial dims, weighted (its gradient: a scatter-add).
"""

from __future__ import annotations

import itertools

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import broadcast_to, converter, dtype_of, ndim_of, reshape
from retrograd.frontend.onnx_ops_shape import static_shape
from retrograd.ops.api import R


@converter("GridSample")
def _grid_sample(g, node, inputs, attrs):
    x, grid = inputs
    mode = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}.get(attrs.get("mode", "linear"))
    padding = attrs.get("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise UnsupportedError(f"GridSample mode={attrs.get('mode')!r} padding_mode={padding!r} is not supported")
    align = bool(attrs.get("align_corners", 0))
    if ndim_of(x) == 4 and mode == "linear" and padding in ("zeros", "border"):
        grid = g.emit(R.permute_dims(grid, axes=(0, 3, 1, 2)))  # ONNX's (N, H, W, 2) as TVM's (N, 2, H, W)
        return R.image.grid_sample(x, grid, method="bilinear", padding_mode=padding, align_corners=align)
    return _composed(g, x, grid, mode, padding, align)


def _d(g, v):
    return g.const(np.asarray(v, dtype=np.float64))


def _reflect(g, v, lo: float, hi: float):
    """Reflect v by the near border until inside [lo, hi] (ONNX's _gs_reflect, vectorized)."""
    span = hi - lo
    if span <= 0:
        return g.emit(R.full_like(v, _d(g, lo)))
    below, above = g.emit(R.less(v, _d(g, lo))), g.emit(R.greater(v, _d(g, hi)))
    dist = g.emit(R.where(below, R.subtract(_d(g, lo), v), R.subtract(v, _d(g, hi))))
    turns = g.emit(R.trunc(R.divide(dist, _d(g, span))))
    r = g.emit(R.subtract(dist, R.multiply(turns, _d(g, span))))
    even = g.emit(R.equal(R.floor_mod(turns, _d(g, 2.0)), _d(g, 0.0)))
    from_lo, from_hi = g.emit(R.add(_d(g, lo), r)), g.emit(R.subtract(_d(g, hi), r))
    low_side = g.emit(R.where(even, from_lo, from_hi))
    high_side = g.emit(R.where(even, from_hi, from_lo))
    return g.emit(R.where(below, low_side, R.where(above, high_side, v)))


def _keys(g, t):
    """Keys' cubic weights (a = -0.75) of taps -1, 0, 1, 2 at fraction t."""
    a = -0.75

    def near(d):
        return g.emit(R.add(R.multiply(R.subtract(R.multiply(_d(g, a + 2), d), _d(g, a + 3)), R.multiply(d, d)), _d(g, 1.0)))

    def far(d):
        inner = R.add(R.multiply(R.subtract(R.multiply(_d(g, a), d), _d(g, 5 * a)), d), _d(g, 8 * a))
        return g.emit(R.subtract(R.multiply(inner, d), _d(g, 4 * a)))

    one_minus = g.emit(R.subtract(_d(g, 1.0), t))
    return [far(g.emit(R.add(t, _d(g, 1.0)))), near(t), near(one_minus), far(g.emit(R.add(one_minus, _d(g, 1.0))))]


def _taps(g, c, size: int, mode: str, padding: str, align: bool):
    """[(index int64, weight, valid bool)] for one spatial dim, c the normalized coordinate."""
    lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
    if align:
        v = g.emit(R.multiply(R.divide(R.add(c, _d(g, 1.0)), _d(g, 2.0)), _d(g, size - 1.0)))
    else:
        v = g.emit(R.divide(R.subtract(R.multiply(R.add(c, _d(g, 1.0)), _d(g, float(size))), _d(g, 1.0)), _d(g, 2.0)))
    if mode == "nearest":
        v = g.emit(R.round(v))  # half to even, as np.rint
    if padding == "border":  # only a coordinate outside [lo, hi] is clamped (into [0, size - 1])
        outside = g.emit(R.logical_or(R.less(v, _d(g, lo)), R.greater(v, _d(g, hi))))
        v = g.emit(R.where(outside, R.minimum(R.maximum(v, _d(g, 0.0)), _d(g, size - 1.0)), v))
    elif padding == "reflection":
        v = _reflect(g, v, lo, hi)
    if mode == "nearest":
        positions, weights = [g.emit(R.trunc(v))], [None]
    else:
        base = g.emit(R.floor(v))
        t = g.emit(R.subtract(v, base))
        if mode == "linear":
            positions = [base, g.emit(R.add(base, _d(g, 1.0)))]
            weights = [g.emit(R.subtract(_d(g, 1.0), t)), t]
        else:
            positions = [g.emit(R.add(base, _d(g, float(k)))) for k in (-1, 0, 1, 2)]
            weights = _keys(g, t)
    taps = []
    for p, w in zip(positions, weights):
        valid = None
        if padding == "zeros":
            valid = g.emit(R.logical_and(R.greater_equal(p, _d(g, 0.0)), R.less_equal(p, _d(g, size - 1.0))))
        elif padding == "reflection":
            p = g.emit(R.trunc(_reflect(g, p, lo, hi)))
        p = g.emit(R.minimum(R.maximum(p, _d(g, 0.0)), _d(g, size - 1.0)))
        taps.append((g.emit(R.astype(p, dtype="int64")), w, valid))
    return taps


def _composed(g, x, grid, mode, padding, align):
    shape = static_shape(x)
    n, ch, spatial = shape[0], shape[1], shape[2:]
    dims = len(spatial)
    gshape = static_shape(grid)
    out = gshape[1:-1]
    if gshape[-1] != dims or len(out) != dims:
        raise UnsupportedError(f"GridSample grid {gshape} does not match the input {shape}")
    points = int(np.prod(out))
    dt = dtype_of(x)
    grid64 = g.emit(R.astype(grid, dtype="float64"))
    per_dim = []
    for i in range(dims):  # grid's last axis lists the coordinates innermost-dim first
        c = g.emit(R.take(grid64, g.const(np.int64(dims - 1 - i)), axis=ndim_of(grid) - 1))
        c = g.emit(reshape(c, (n, points)))
        per_dim.append(_taps(g, c, spatial[i], mode, padding, align))
    flat = g.emit(reshape(x, (n, ch, int(np.prod(spatial)))))
    strides = [int(np.prod(spatial[i + 1:])) for i in range(dims)]
    result = None
    for combo in itertools.product(*per_dim):
        index, weight, valid = None, None, None
        for (p, w, ok), stride in zip(combo, strides):
            term = g.emit(R.multiply(p, g.const(np.int64(stride)))) if stride != 1 else p
            index = term if index is None else g.emit(R.add(index, term))
            if w is not None:
                weight = w if weight is None else g.emit(R.multiply(weight, w))
            if ok is not None:
                valid = ok if valid is None else g.emit(R.logical_and(valid, ok))
        if valid is not None:
            zero = _d(g, 0.0)
            weight = g.emit(R.where(valid, weight if weight is not None else _d(g, 1.0), zero))
        index = g.emit(broadcast_to(g.emit(R.expand_dims(index, axis=(1,))), (n, ch, points)))
        picked = g.emit(R.gather_elements(flat, index, axis=2))
        if weight is not None:
            w = g.emit(R.astype(R.expand_dims(weight, axis=(1,)), dtype=dt))
            picked = g.emit(R.multiply(picked, w))
        result = picked if result is None else g.emit(R.add(result, picked))
    return reshape(result, (n, ch) + tuple(out))
