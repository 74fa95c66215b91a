"""Torch kernels of image.* and their backward ops (ops/image/resize.py, ops/image/sampling.py): resize as each
axis's interpolation matrix (built on the host from the attributes, kernels/resample.py), grid sampling
by the same four taps as kernels/sampling.py, gathered and scattered on the device."""

from __future__ import annotations

import math

import torch

from retrograd.errors import KernelError
from retrograd.ops.kernels.resample import resize_matrix
from retrograd.ops.kernels.sampling import grid_basis
from retrograd.ops.torch_kernels import tdtype
from retrograd.ops.torch_kernels.conv import to_layout
from retrograd.ops.torch_kernels.nn import check_float

_SPATIAL = {2: "HW", 3: "DHW"}


def _apply(y, axis, m):
    """y contracted along `axis` with m (out, size): the axis becomes `out` long."""
    return torch.movedim(torch.matmul(torch.movedim(y, axis, -1), m.T), -1, axis)


def _resize(n):
    spatial = _SPATIAL[n]
    op = f"resize{n}d"

    def kernel(data, size, roi=None, layout=None, method="linear", coordinate_transformation_mode="half_pixel",
               rounding_method="round", cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
        layout = layout or "NC" + spatial
        check_float(op, "data", data)
        y = to_layout(op, data, layout, "NC" + spatial)
        sizes = tuple(int(v) for v in size)
        sizes = sizes * n if len(sizes) == 1 else sizes
        if len(sizes) != n or min(sizes) < 1:
            raise KernelError(f"{op}: size must be {n} positive ints, got {size!r}")
        if 0 in y.shape[2:]:
            raise KernelError(f"{op}: cannot resample an empty spatial axis (input {tuple(y.shape[2:])}) to {sizes}")
        args = (method, coordinate_transformation_mode, rounding_method, cubic_alpha, cubic_exclude)
        for j in sorted(range(n), key=lambda j: sizes[j] / y.shape[2 + j]):
            m = torch.from_numpy(resize_matrix(y.shape[2 + j], sizes[j], *args)).to(y.device, y.dtype)
            y = _apply(y, 2 + j, m)
        dt = data.dtype if out_dtype in (None, "", "void") else tdtype(out_dtype)
        return to_layout(op, y, "NC" + spatial, layout).contiguous().to(dt)

    return kernel


def _resize_backward(n):
    spatial = _SPATIAL[n]
    op = f"resize{n}d_backward"

    def kernel(output_grad, data, roi=None, layout=None, method="linear", coordinate_transformation_mode="half_pixel",
               rounding_method="round", cubic_alpha=-0.75, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None):
        layout = layout or "NC" + spatial
        check_float(op, "data", data)
        xs = tuple(to_layout(op, data, layout, "NC" + spatial).shape)
        g = to_layout(op, output_grad, layout, "NC" + spatial).to(data.dtype)
        if tuple(g.shape[:2]) != xs[:2] or g.ndim != len(xs):
            raise KernelError(f"{op}: output_grad {tuple(g.shape)} does not match the data {xs} (in NC{spatial} order)")
        if 0 in xs[2:] or 0 in g.shape[2:]:
            return torch.zeros(data.shape, dtype=data.dtype, device=data.device)
        args = (method, coordinate_transformation_mode, rounding_method, cubic_alpha, cubic_exclude)
        for j in sorted(range(n), key=lambda j: xs[2 + j] / g.shape[2 + j]):
            m = torch.from_numpy(resize_matrix(xs[2 + j], g.shape[2 + j], *args)).to(g.device, g.dtype)
            g = _apply(g, 2 + j, m.T)
        return to_layout(op, g, "NC" + spatial, layout).contiguous()

    return kernel


def affine_grid(data, size, align_corners=True):
    check_float("affine_grid", "data", data)
    size = tuple(int(v) for v in size)
    nd = len(size)
    if nd not in (2, 3) or data.ndim != 3 or tuple(data.shape[1:]) != (nd, nd + 1):
        raise KernelError(f"affine_grid: data must be (N, {nd}, {nd + 1}) for a {nd}-D size, got {tuple(data.shape)}")
    basis = torch.from_numpy(grid_basis(size, align_corners, "float64")).to(data.device, data.dtype)
    return torch.matmul(data, basis.reshape(nd + 1, -1)).reshape(data.shape[0], nd, *size)


def _prepare(op, x, gr, method, padding_mode, layout):
    check_float(op, "data", x)
    check_float(op, "grid", gr)
    if layout != "NCHW":
        raise KernelError(f"{op}: only the NCHW layout is supported, got {layout!r}")
    if method not in ("bilinear", "nearest"):
        raise KernelError(f"{op}: method {method!r} is not supported (bilinear, nearest)")
    if padding_mode not in ("zeros", "border"):
        raise KernelError(f"{op}: padding_mode {padding_mode!r} is not supported (zeros, border)")
    if x.ndim != 4 or gr.ndim != 4 or gr.shape[1] != 2 or gr.shape[0] != x.shape[0]:
        raise KernelError(f"{op}: expected data (N, C, H, W) and grid (N, 2, H_out, W_out), got {tuple(x.shape)}, {tuple(gr.shape)}")
    return gr.to(x.dtype)


def _unnormalize(coord, size, align_corners):
    if align_corners:
        return (coord + 1) * ((size - 1) / 2), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _taps(x, gr, method, padding_mode, align_corners):
    n, c, h, w = x.shape
    ix, sx = _unnormalize(gr[:, 0], w, align_corners)
    iy, sy = _unnormalize(gr[:, 1], h, align_corners)
    sx, sy = torch.full_like(ix, sx), torch.full_like(iy, sy)
    if padding_mode == "border":
        cx = (ix >= 0) & (ix <= w - 1)
        cy = (iy >= 0) & (iy <= h - 1)
        ix, iy = torch.clamp(ix, 0, w - 1), torch.clamp(iy, 0, h - 1)
        sx, sy = sx * cx, sy * cy
    zeros, ones = torch.zeros_like(ix), torch.ones_like(ix)
    if method == "nearest":
        taps = [(torch.floor(ix + 0.5), torch.floor(iy + 0.5), ones, zeros, zeros)]
    else:
        x0, y0 = torch.floor(ix), torch.floor(iy)
        tx, ty = ix - x0, iy - y0
        taps = [(x0, y0, (1 - tx) * (1 - ty), -(1 - ty), -(1 - tx)), (x0 + 1, y0, tx * (1 - ty), 1 - ty, -tx),
                (x0, y0 + 1, (1 - tx) * ty, -ty, 1 - tx), (x0 + 1, y0 + 1, tx * ty, ty, tx)]
    out = []
    for px, py, wt, dwx, dwy in taps:
        inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
        flat = (torch.clamp(py, 0, h - 1) * w + torch.clamp(px, 0, w - 1)).to(torch.int64)
        out.append((flat, wt * inside, dwx * inside * sx, dwy * inside * sy))
    return out


def _gather(x, flat):
    n, c, h, w = x.shape
    rest = math.prod(flat.shape[1:])
    idx = flat.reshape(n, 1, rest).expand(n, c, rest)
    return torch.gather(x.reshape(n, c, h * w), 2, idx).reshape(n, c, *flat.shape[1:])


def grid_sample(data, grid, method="bilinear", layout="NCHW", padding_mode="zeros", align_corners=False):
    gr = _prepare("grid_sample", data, grid, method, padding_mode, layout)
    out = torch.zeros((data.shape[0], data.shape[1]) + tuple(gr.shape[2:]), dtype=data.dtype, device=data.device)
    for flat, wt, _, _ in _taps(data, gr, method, padding_mode, align_corners):
        out = out + _gather(data, flat) * wt[:, None]
    return out


def grid_sample_backward(output_grad, data, grid, method="bilinear", layout="NCHW", padding_mode="zeros",
                         align_corners=False):
    gr = _prepare("grid_sample_backward", data, grid, method, padding_mode, layout)
    n, c, h, w = data.shape
    g = output_grad.to(data.dtype)
    if tuple(g.shape) != (n, c) + tuple(gr.shape[2:]):
        raise KernelError(f"grid_sample_backward: output_grad has shape {tuple(g.shape)}, expected {(n, c) + tuple(gr.shape[2:])}")
    rest = math.prod(gr.shape[2:])
    dx = torch.zeros((n, c, h * w), dtype=data.dtype, device=data.device)
    dgrid = torch.zeros(gr.shape, dtype=data.dtype, device=data.device)
    gf = g.reshape(n, c, rest)
    for flat, wt, dwx, dwy in _taps(data, gr, method, padding_mode, align_corners):
        dx.scatter_add_(2, flat.reshape(n, 1, rest).expand(n, c, rest), gf * wt.reshape(n, 1, rest))
        if method == "bilinear":
            v = (_gather(data, flat) * g).sum(dim=1)
            dgrid[:, 0] += v * dwx
            dgrid[:, 1] += v * dwy
    return dx.reshape(data.shape), dgrid.to(grid.dtype)


KERNELS = {
    "relax.image.resize2d": _resize(2),
    "relax.image.resize3d": _resize(3),
    "relax.grad.resize2d_backward": _resize_backward(2),
    "relax.grad.resize3d_backward": _resize_backward(3),
    "relax.image.affine_grid": affine_grid,
    "relax.image.grid_sample": grid_sample,
    "relax.grad.grid_sample_backward": grid_sample_backward,
}
