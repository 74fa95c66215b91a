"""image.affine_grid and image.grid_sample (TVM's layouts: the grid is (N, 2, H_out, W_out), x then y)."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import KernelError
from retrograd.ops.kernels.window import check_float


def grid_basis(size, align_corners: bool, dtype="float64") -> np.ndarray:
    """(ndim + 1, *size): the normalized coordinates (fastest axis first: x, y[, z]) and ones."""
    axes = []
    for s in size:
        if align_corners:
            axes.append(np.linspace(-1.0, 1.0, s) if s > 1 else np.zeros(1))
        else:
            axes.append((2.0 * np.arange(s) + 1.0) / s - 1.0)
    mesh = np.meshgrid(*axes, indexing="ij")  # slowest axis first
    return np.stack(list(mesh[::-1]) + [np.ones(tuple(size))]).astype(dtype)


def affine_grid(data, size, *, align_corners=True):
    """grid[n, d, ...] = theta[n, d, :ndim] . (x, y[, z]) + theta[n, d, ndim] over the target positions."""
    theta = np.asarray(data)
    check_float("affine_grid", "data", theta)
    size = tuple(int(v) for v in size)
    nd = len(size)
    if nd not in (2, 3) or theta.ndim != 3 or theta.shape[1:] != (nd, nd + 1):
        raise KernelError(f"affine_grid: data must be (N, {nd}, {nd + 1}) for a {nd}-D size, got {theta.shape}")
    basis = grid_basis(size, align_corners, theta.dtype)
    return (theta @ basis.reshape(nd + 1, -1)).reshape(theta.shape[0], nd, *size)


def unnormalize(coord, size, align_corners):
    """(pixel coordinate, d coordinate / d normalized one) of normalized coordinates along an axis of `size`."""
    if align_corners:
        return (coord + 1) * ((size - 1) / 2), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def check_sampling(op, x_shape, grid_shape, method, padding_mode, layout) -> None:
    """grid_sample's attributes and operand shapes, as both backends accept them (dtypes checked apart)."""
    if layout != "NCHW":
        raise KernelError(f"{op}: only the NCHW layout is supported, got {layout!r}")
    if method not in ("bilinear", "nearest"):
        raise KernelError(f"{op}: method {method!r} is not supported (bilinear, nearest)")
    if padding_mode not in ("zeros", "border"):
        raise KernelError(f"{op}: padding_mode {padding_mode!r} is not supported (zeros, border)")
    if len(x_shape) != 4 or len(grid_shape) != 4 or grid_shape[1] != 2 or grid_shape[0] != x_shape[0]:
        raise KernelError(f"{op}: expected data (N, C, H, W) and grid (N, 2, H_out, W_out), got {tuple(x_shape)}, {tuple(grid_shape)}")


def _prepare(op, data, grid, method, padding_mode, layout):
    x, gr = np.asarray(data), np.asarray(grid)
    check_float(op, "data", x)
    check_float(op, "grid", gr)
    check_sampling(op, x.shape, gr.shape, method, padding_mode, layout)
    return x, gr.astype(x.dtype, copy=False)


def grid_taps(gr, h, w, method, padding_mode, align_corners, xp):
    """[(flat position into each image's H*W, as floats; weight; d weight / d ix; d weight / d iy)]:
    every sample of an (h, w) image at the grid's positions is a weighted sum of up to 4 taps. `xp` is
    the array module (numpy or torch): its floor, clip, ones_like and zeros_like are used."""
    ix, sx = unnormalize(gr[:, 0], w, align_corners)
    iy, sy = unnormalize(gr[:, 1], h, align_corners)
    if padding_mode == "border":
        # Clipped coordinates: no gradient flows through the clip where it binds.
        cx = (ix >= 0) & (ix <= w - 1)
        cy = (iy >= 0) & (iy <= h - 1)
        ix, iy = xp.where(ix == ix, ix, 0), xp.where(iy == iy, iy, 0)  # a NaN coordinate clips to 0, as in PyTorch
        ix, iy = xp.clip(ix, 0, w - 1), xp.clip(iy, 0, h - 1)
        sx, sy = sx * cx, sy * cy
    if method == "nearest":
        rx, ry = xp.floor(ix + 0.5), xp.floor(iy + 0.5)  # round half up
        taps = [(rx, ry, xp.ones_like(ix), xp.zeros_like(ix), xp.zeros_like(ix))]
    else:
        x0, y0 = xp.floor(ix), xp.floor(iy)
        tx, ty = ix - x0, iy - y0
        taps = [
            (x0, y0, (1 - tx) * (1 - ty), -(1 - ty), -(1 - tx)),
            (x0 + 1, y0, tx * (1 - ty), 1 - ty, -tx),
            (x0, y0 + 1, (1 - tx) * ty, -ty, 1 - tx),
            (x0 + 1, y0 + 1, tx * ty, ty, tx),
        ]
    out = []
    for px, py, wt, dwx, dwy in taps:
        inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
        # Outside taps (a NaN coordinate among them) read position 0, which their zero weight drops.
        flat = xp.where(inside, xp.clip(py, 0, h - 1) * w + xp.clip(px, 0, w - 1), 0)
        out.append((flat, wt * inside, dwx * inside * sx, dwy * inside * sy))
    return out


def _taps(x, gr, method, padding_mode, align_corners):
    return [(flat.astype(np.int64), wt, dwx, dwy)
            for flat, wt, dwx, dwy in grid_taps(gr, x.shape[2], x.shape[3], method, padding_mode, align_corners, np)]


def _gather(x, flat):
    n, c, h, w = x.shape
    return np.take_along_axis(x.reshape(n, c, h * w), flat.reshape(n, 1, _rest(flat)), axis=2).reshape(n, c, *flat.shape[1:])


def _rest(a) -> int:
    """The size of a's non-leading axes (an explicit size: reshape's -1 is ambiguous for a zero batch)."""
    return math.prod(a.shape[1:])


def grid_sample(data, grid, *, method="bilinear", layout="NCHW", padding_mode="zeros", align_corners=False):
    """Samples data at the grid's normalized (x, y) positions ([-1, 1] spans the input: corner pixel
    centers with align_corners, their outer edges without), as PyTorch's grid_sample."""
    x, gr = _prepare("grid_sample", data, grid, method, padding_mode, layout)
    out = np.zeros((x.shape[0], x.shape[1]) + gr.shape[2:], x.dtype)
    for flat, wt, _, _ in _taps(x, gr, method, padding_mode, align_corners):
        out += _gather(x, flat) * wt[:, None].astype(x.dtype)
    return out


def grid_sample_backward(output_grad, data, grid, *, method="bilinear", layout="NCHW", padding_mode="zeros",
                         align_corners=False):
    """(d data, d grid) of grid_sample (nearest: the grid gets zero, as in PyTorch)."""
    x, gr = _prepare("grid_sample_backward", data, grid, method, padding_mode, layout)
    g = np.asarray(output_grad).astype(x.dtype, copy=False)
    n, c, h, w = x.shape
    if g.shape != (n, c) + gr.shape[2:]:
        raise KernelError(f"grid_sample_backward: output_grad has shape {g.shape}, expected {(n, c) + gr.shape[2:]}")
    dx = np.zeros((n, c, h * w), x.dtype)
    dgrid = np.zeros(gr.shape, x.dtype)
    gf = g.reshape(n, c, math.prod(g.shape[2:]))
    for flat, wt, dwx, dwy in _taps(x, gr, method, padding_mode, align_corners):
        f = flat.reshape(n, _rest(flat))
        # Only an outside tap of a non-finite coordinate has a NaN weight (the forward's NaN, as PyTorch's):
        # it adds nothing to the data's gradient, as in PyTorch.
        contrib = gf * np.nan_to_num(wt, nan=0.0).reshape(n, 1, _rest(wt))
        for b in range(n):  # one scatter-add per image (indices repeat within an image)
            np.add.at(dx[b].T, f[b], contrib[b].T)
        if method == "bilinear":
            v = (_gather(x, flat) * g).sum(axis=1)
            dgrid[:, 0] += v * dwx
            dgrid[:, 1] += v * dwy
    return dx.reshape(x.shape), dgrid.astype(gr.dtype, copy=False)
