"""Convolutions (and their transposes) from their in-bounds taps only: work bounded by the input and
output sizes, whatever the strides, padding and dilation (see kernels/window_gather.py).

The regular kernels pad the input (or lay out the uncropped output of a transposed convolution), so
strides and padding of 10^7 around a few pixels would allocate petabytes for a result of a few
elements; zero padding adds nothing, so those geometries are computed here from the (input, kernel,
output) index triples that can meet.
"""

from __future__ import annotations

import string

import numpy as np

from retrograd.ops.kernels.window_gather import COST_FLOOR, COST_SLACK

_LETTERS = string.ascii_uppercase  # the spatial axes; lowercase names batch, group and channels


def _outer_index(parts):
    """Per-axis index arrays of shape (O_a, m_a) broadcast to (O1, m1, O2, m2, ...)."""
    dims = len(parts)
    out = []
    for i, arr in enumerate(parts):
        shape = [1] * (2 * dims)
        shape[2 * i : 2 * i + 2] = arr.shape
        out.append(arr.reshape(shape))
    return out


def conv(x: np.ndarray, w: np.ndarray, axes, groups: int) -> np.ndarray:
    """Cross-correlation of x (N, C, *spatial) with w (F, C / groups, *kernel) on `axes` (one Axis each)."""
    n, c = x.shape[:2]
    f, cg = w.shape[:2]
    dims = len(axes)
    taps = [a.taps(with_tap=True) for a in axes]
    xi = _outer_index([t[0] for t in taps])
    ji = _outer_index([t[2] for t in taps])
    valid = None
    for ok in _outer_index([t[1] for t in taps]):
        valid = ok if valid is None else valid & ok
    xv = np.where(valid, x[(slice(None), slice(None)) + tuple(xi)], 0)  # (N, C, O1, m1, ...)
    wv = np.where(valid, w[(slice(None), slice(None)) + tuple(ji)], 0)  # (F, C/G, O1, m1, ...)
    xv = xv.reshape((n, groups, cg) + xv.shape[2:])
    wv = wv.reshape((groups, f // groups, cg) + wv.shape[2:])
    om = _LETTERS[: 2 * dims]
    outs = "".join(om[0::2])
    y = np.einsum(f"ngc{om},gfc{om}->ngf{outs}", xv, wv, optimize=True)
    return y.reshape((n, f) + y.shape[3:])


class TAxis:
    """One axis of a transposed convolution: input size n, kernel k, stride s, dilation d, leading
    padding p0 and output size out: input i and tap j land on output i * s - p0 + j * d."""

    __slots__ = ("n", "k", "s", "d", "p0", "out")

    def __init__(self, n, k, s, d, p0, out):
        self.n, self.k, self.s, self.d, self.p0, self.out = (int(v) for v in (n, k, s, d, p0, out))

    def degenerate(self) -> bool:
        # The regular kernels lay out every tap and the crop window (output_padding may reach past the
        # last tap, padding before the first).
        full = max((self.n - 1) * self.s + (self.k - 1) * self.d + 1, self.p0 + self.out)
        inside = min(self.k, self.out // self.d + 1)
        return full + self.k * self.n > COST_SLACK * (self.n * inside + self.out) + COST_FLOOR

    def pairs(self):
        """(i, j, q): every input index i and tap j that land on an output q inside [0, out)."""
        start = np.arange(self.n, dtype=object) * self.s - self.p0
        first = np.maximum(0, -(start // self.d))
        last = np.minimum(self.k - 1, (self.out - 1 - start) // self.d)
        count = np.maximum(0, last - first + 1).astype(np.int64)
        i = np.repeat(np.arange(self.n), count)
        offsets = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        j = np.repeat(first.astype(np.int64), count) + offsets
        return i, j, i * self.s - self.p0 + j * self.d


def conv_transpose(x: np.ndarray, w: np.ndarray, axes, groups: int) -> np.ndarray:
    """The transposed convolution of x (N, C_in, *spatial) with w (C_in, C_out / groups, *kernel)."""
    n, ci = x.shape[:2]
    cg = w.shape[1]
    dims = len(axes)
    pairs = [a.pairs() for a in axes]
    grid = []
    for a, (i, j, _) in enumerate(pairs):
        shape = [1] * dims
        shape[a] = len(i)
        grid.append((i.reshape(shape), j.reshape(shape)))
    xs = x[(slice(None), slice(None)) + tuple(i for i, _ in grid)]  # (N, C_in, P1, P2, ...)
    ws = w[(slice(None), slice(None)) + tuple(j for _, j in grid)]  # (C_in, C_out/G, P1, P2, ...)
    xs = xs.reshape((n, groups, ci // groups) + xs.shape[2:])
    ws = ws.reshape((groups, ci // groups, cg) + ws.shape[2:])
    ps = _LETTERS[:dims]
    z = np.einsum(f"ngc{ps},gcf{ps}->ngf{ps}", xs, ws, optimize=True).reshape(n * groups * cg, -1)
    # Each pair combination's flat output position, row-major over the output axes.
    flat = np.zeros((), np.int64)
    for (_, _, q), a in zip(pairs, axes):
        flat = np.add.outer(flat * a.out, q.astype(np.int64))
    size = int(np.prod([a.out for a in axes]))
    index = (np.arange(z.shape[0])[:, None] * size + flat.reshape(1, -1)).reshape(-1)
    total = np.bincount(index, z.reshape(-1).astype(np.float64), z.shape[0] * size)
    return total.reshape((n, groups * cg) + tuple(a.out for a in axes)).astype(np.result_type(x, w))
