"""Torch kernels of image.* and their backward ops (ops/image/resize.py, ops/image/sampling.py): resize as each
axis's interpolation matrix (built on the host from the attributes, kernels/resample.py), grid sampling
by kernels/sampling.py's taps (`grid_taps` on tensors), gathered and scattered on the device."""

from __future__ import annotations

import math

import numpy as np
import torch

from retrograd.errors import KernelError
from retrograd.ops.kernels.resample import axis_taps, resize_matrix
from retrograd.ops.kernels.sampling import check_sampling, grid_basis, grid_taps
from retrograd.ops.torch_kernels import tdtype
from retrograd.ops.torch_kernels.conv import to_layout
from retrograd.ops.torch_kernels.nn import check_float

_SPATIAL = {2: "HW", 3: "DHW"}


def _apply(y, axis, m):
    """y contracted along `axis` with m (out, size): the axis becomes `out` long."""
    return torch.movedim(torch.matmul(torch.movedim(y, axis, -1), m.T), -1, axis)


def _by_taps(y, axis, taps, size=None):
    """resample.gather_axis on a tensor (size None), or its adjoint scatter_axis into `size` positions: a
    NaN or infinity reaches the outputs whose taps read it, where a dense matrix's zeros would spread it
    along the whole axis (PyTorch's own kernels keep it local too)."""
    shape = [1] * y.ndim
    shape[axis] = -1
    out = None
    for idx, w in taps:
        i = torch.from_numpy(np.ascontiguousarray(idx, dtype=np.int64)).to(y.device)
        w = torch.from_numpy(np.asarray(w, dtype=np.float64)).to(y.device, y.dtype).reshape(shape)
        if size is None:
            part = torch.index_select(y, axis, i) * w
            out = part if out is None else out + part
        else:
            if out is None:
                out = torch.zeros(y.shape[:axis] + (size,) + y.shape[axis + 1:], dtype=y.dtype, device=y.device)
            out.index_add_(axis, i, y * w)
    return out


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
        if y.element_size() < 4:  # as the NumPy kernel (TVM's topi resize): 16-bit pixels computed in float32
            y = y.float()
        for j in sorted(range(n), key=lambda j: sizes[j] / y.shape[2 + j]):
            if bool(torch.isfinite(y).all()):
                m = torch.from_numpy(resize_matrix(y.shape[2 + j], sizes[j], *args)).to(y.device, y.dtype)
                y = _apply(y, 2 + j, m)
            else:
                y = _by_taps(y, 2 + j, axis_taps(y.shape[2 + j], sizes[j], *args))
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
            if bool(torch.isfinite(g).all()):
                m = torch.from_numpy(resize_matrix(xs[2 + j], g.shape[2 + j], *args)).to(g.device, g.dtype)
                g = _apply(g, 2 + j, m.T)
            else:
                g = _by_taps(g, 2 + j, axis_taps(xs[2 + j], g.shape[2 + j], *args), xs[2 + j])
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
    check_sampling(op, x.shape, gr.shape, method, padding_mode, layout)
    return gr.to(x.dtype)


def _taps(x, gr, method, padding_mode, align_corners):
    return [(flat.to(torch.int64), wt, dwx, dwy)
            for flat, wt, dwx, dwy in grid_taps(gr, x.shape[2], x.shape[3], method, padding_mode, align_corners, torch)]


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
        dx.scatter_add_(2, flat.reshape(n, 1, rest).expand(n, c, rest), gf * torch.nan_to_num(wt, nan=0.0).reshape(n, 1, rest))
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
