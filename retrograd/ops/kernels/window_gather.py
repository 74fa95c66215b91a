"""Pooling by gathering each window's in-bounds taps: work bounded by the input and output sizes.

The phase-grid kernels (kernels/pool.py) lay out the padded input and visit every tap of the window,
which is the fast way for ordinary windows but costs in proportion to the attributes' magnitudes:
a pool of 10^7 taps, or padding and strides of 10^7 around a 4x4 input, would run for minutes or
allocate petabytes for an output of a few elements. Taps that read padding (or the ceil_mode
overhang) never change a result (-inf never wins a maximum, 0 adds nothing; the divisor is counted
apart), so such windows are computed here from their in-bounds taps only: per axis at most
min(k, ceil(n / d)) of them per output, gathered into (P, O1, m1, O2, m2, ...) and reduced.
"""

from __future__ import annotations

import numpy as np

# A geometry whose regular cost (padded extent plus taps x outputs, per axis) is within this factor of
# the bounded one (input plus in-bounds taps x outputs) runs on the regular kernels.
COST_SLACK, COST_FLOOR = 4, 1024


class Axis:
    """One axis of a window: input size n, window k, stride s, dilation d, padding p0 / p1, n_out windows."""

    __slots__ = ("n", "k", "s", "d", "p0", "p1", "n_out")

    def __init__(self, n, k, s, d, p0, p1, n_out):
        self.n, self.k, self.s, self.d, self.p0, self.p1, self.n_out = (int(v) for v in (n, k, s, d, p0, p1, n_out))

    def degenerate(self) -> bool:
        """Whether the regular kernels' work would not be bounded by this axis' input and output sizes."""
        n, k, s, d, n_out = self.n, self.k, self.s, self.d, self.n_out
        padded = max(n + self.p0 + self.p1, (n_out - 1) * s + (k - 1) * d + 1)
        regular = padded + k * n_out
        inside = min(k, -(-n // d)) if n else 0
        return regular > COST_SLACK * (n + n_out * inside) + COST_FLOOR

    def _range(self, lo: int, hi: int):
        """Per window, the first tap j and the count of taps whose position lies in [lo, hi)."""
        # Python ints (object arrays): positions reach (n_out - 1) * s + (k - 1) * d, past int64.
        start = np.arange(self.n_out, dtype=object) * self.s - self.p0
        first = np.maximum(0, -((start - lo) // self.d))
        last = np.minimum(self.k - 1, (hi - 1 - start) // self.d)
        count = np.maximum(0, last - first + 1)
        return start, first, count

    def taps(self, with_tap: bool = False):
        """(index, valid[, tap]): per window o, the input index of its t-th in-bounds tap (0 where t is
        past its count), as (n_out, m) int arrays, m the most in-bounds taps of any window (at least
        1); with_tap: also that tap's index in the window (the kernel's index, for a convolution)."""
        start, first, count = self._range(0, self.n)
        m = max(1, int(count.max())) if self.n_out else 1
        t = np.arange(m)
        valid = t < count.astype(np.int64)[:, None]
        pos = (start + first * self.d).astype(np.int64)[:, None] + t * self.d
        if not with_tap:
            return np.where(valid, pos, 0), valid
        return np.where(valid, pos, 0), valid, np.where(valid, first.astype(np.int64)[:, None] + t, 0)

    def counts(self, include_pad: bool) -> np.ndarray:
        """Per window the taps an average divides by: those inside the input, or inside the padded
        input when include_pad; never the ceil_mode overhang (as TVM and PyTorch do)."""
        lo, hi = (-self.p0, self.n + self.p1) if include_pad else (0, self.n)
        return self._range(lo, hi)[2].astype(np.int64)


def degenerate(axes) -> bool:
    return any(a.degenerate() for a in axes)


class Gathered:
    """The in-bounds taps of every window of (P, *spatial) planes, as (P, O1, m1, ..., OD, mD)."""

    def __init__(self, axes, spatial):
        self.axes, self.spatial = list(axes), tuple(int(v) for v in spatial)
        dims = len(self.axes)
        self.index, self.valid = [], None
        for i, a in enumerate(self.axes):
            idx, ok = a.taps()
            shape = [1] * (2 * dims)
            shape[2 * i : 2 * i + 2] = idx.shape
            self.index.append(idx.reshape(shape))
            ok = ok.reshape(shape)
            self.valid = ok if self.valid is None else self.valid & ok
        self.out = tuple(a.n_out for a in self.axes)
        self.tap_axes = tuple(range(2, 2 + 2 * dims, 2))

    def values(self, planes: np.ndarray, fill) -> np.ndarray:
        g = planes[(slice(None),) + tuple(self.index)]
        return np.where(self.valid[None], g, np.asarray(fill, planes.dtype))

    def flat_index(self) -> np.ndarray:
        """Each tap's flat position within one input plane (valid taps only are meaningful)."""
        flat = 0
        for idx, size in zip(self.index, self.spatial):
            flat = flat * size + idx
        return flat

    def windows_last(self, a: np.ndarray) -> np.ndarray:
        """(P, O1, m1, ..., OD, mD) as (P, O1, ..., OD, m1 * ... * mD): taps in row-major window order."""
        dims = len(self.axes)
        order = [0] + [1 + 2 * i for i in range(dims)] + [2 + 2 * i for i in range(dims)]
        a = a.transpose(order) if a.ndim == 1 + 2 * dims else a
        return a.reshape(a.shape[: 1 + dims] + (-1,))

    def scatter(self, planes_count: int, flat: np.ndarray, weights: np.ndarray, dtype) -> np.ndarray:
        """Sum `weights` into (P, *spatial) at per-plane flat positions `flat` (same shape, (P, ...))."""
        size = int(np.prod(self.spatial))
        plane = np.arange(planes_count).reshape((-1,) + (1,) * (flat.ndim - 1)) * size
        total = np.bincount((plane + flat).reshape(-1), weights.reshape(-1).astype(np.float64), planes_count * size)
        return total.reshape((planes_count,) + self.spatial).astype(dtype)


def _scale(axes, include_pad: bool, dtype) -> np.ndarray:
    """1 / divisor per window (0 where there is nothing to count), shaped like the output."""
    out = np.ones((), np.float64)
    for a in axes:
        c = a.counts(include_pad)
        inv = np.where(c > 0, 1.0 / np.maximum(c, 1), 0.0)
        out = np.multiply.outer(out, inv)
    return out.astype(dtype)


def pool(planes: np.ndarray, axes, kind: str, include_pad: bool = False) -> np.ndarray:
    """max ("max": a window without an in-bounds tap is -inf, as its padding) or average ("avg") pooling."""
    gth = Gathered(axes, planes.shape[1:])
    if kind == "max":
        return gth.values(planes, -np.inf).max(axis=gth.tap_axes)
    total = gth.values(planes, 0).sum(axis=gth.tap_axes, dtype=np.float64)
    return (total * _scale(axes, include_pad, np.float64)).astype(planes.dtype)


def _first_max(gth: Gathered, planes: np.ndarray):
    """(tap, has): per window the position (in row-major window order) of its first in-bounds maximum,
    and whether it has one (padding never wins)."""
    vals = gth.windows_last(gth.values(planes, -np.inf))
    valid = gth.windows_last(np.broadcast_to(gth.valid[None], (1,) + gth.valid.shape))
    best = vals.max(axis=-1, keepdims=True)
    hit = (vals == best) & valid
    return hit.argmax(axis=-1), hit.any(axis=-1)


def _tap_flat(gth: Gathered, tap: np.ndarray) -> np.ndarray:
    flat = gth.windows_last(np.broadcast_to(gth.flat_index()[None], (1,) + gth.valid.shape))
    return np.take_along_axis(np.broadcast_to(flat, tap.shape + flat.shape[-1:]), tap[..., None], axis=-1)[..., 0]


def max_backward(planes: np.ndarray, g: np.ndarray, axes) -> np.ndarray:
    """Each window's gradient to its first in-bounds maximum (row-major window order, as PyTorch)."""
    gth = Gathered(axes, planes.shape[1:])
    tap, has = _first_max(gth, planes)
    return gth.scatter(planes.shape[0], _tap_flat(gth, tap), np.where(has, g, 0), planes.dtype)


def max_backward_grad(planes: np.ndarray, input_grad: np.ndarray, axes) -> np.ndarray:
    """input_grad read at each window's first in-bounds maximum (0 for a window without one)."""
    gth = Gathered(axes, planes.shape[1:])
    tap, has = _first_max(gth, planes)
    flat = _tap_flat(gth, tap)
    read = np.take_along_axis(input_grad.reshape(input_grad.shape[0], -1), flat.reshape(flat.shape[0], -1), axis=1)
    return np.where(has, read.reshape(flat.shape), 0).astype(input_grad.dtype)


def avg_backward(g: np.ndarray, axes, spatial, include_pad: bool = False) -> np.ndarray:
    """g / divisor spread over each window's in-bounds taps."""
    gth = Gathered(axes, spatial)
    share = g.astype(np.float64) * _scale(axes, include_pad, np.float64)
    # Expand (P, O1, ..., OD) to (P, O1, 1, ..., OD, 1) next to the tap axes.
    share = share.reshape((g.shape[0],) + tuple(v for o in gth.out for v in (o, 1)))
    weights = np.where(gth.valid[None], share, 0.0)
    flat = np.broadcast_to(gth.flat_index()[None], weights.shape)
    return gth.scatter(g.shape[0], flat, weights, g.dtype)


def axes2d(win) -> list[Axis]:
    """The two axes of a kernels.window.Window2d."""
    return [Axis(win.h, win.kh, win.sh, win.dh, win.pt, win.pb, win.oh),
            Axis(win.w, win.kw, win.sw, win.dw, win.pl, win.pr, win.ow)]
