"""Torch kernels of pooling, 1-3 spatial dims, and the pooling backward ops (ops/nn/pool*.py,
ops/nn/adaptive.py, grad.max_pool*/avg_pool*). Windows are index maps built on the host from the
attributes (output positions x taps, independent of batch and channels), gathered on the device: any
padding, dilation and ceil_mode, with TVM's and PyTorch's output sizes and divisors."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from retrograd.errors import KernelError
from retrograd.ops.kernels.pool import FLOAT64_EXACT
from retrograd.ops.kernels.pool_nan import spatial_order
from retrograd.ops.kernels.window import window_positions
from retrograd.ops.torch_kernels import fresh
from retrograd.ops.torch_kernels.conv import ints, paddings, to_layout

_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


@lru_cache(maxsize=256)
def _maps(op, size, k, s, before, after, d, ceil_mode):
    """(flat input position or -1 per (output, tap), count of taps in the input, count in input + padding)."""
    axes = []
    for n, kk, ss, b, a, dd in zip(size, k, s, before, after, d):
        try:
            o = window_positions(n, kk, ss, b, a, dd, ceil_mode)
        except ValueError as err:
            raise KernelError(f"{op}: {err}") from None
        pos = np.arange(o)[:, None] * ss - b + np.arange(kk)[None, :] * dd
        axes.append((pos, (pos >= 0) & (pos < n), (pos >= -b) & (pos < n + a), n))
    flat = np.zeros((1, 1), np.int64)
    inside = np.ones((1, 1), bool)
    padded = np.ones((1, 1), bool)
    for pos, ins, pad, n in axes:
        o, kk = pos.shape
        flat = (flat[:, None, :, None] * n + pos[None, :, None, :]).reshape(-1, flat.shape[1] * kk)
        inside = (inside[:, None, :, None] & ins[None, :, None, :]).reshape(flat.shape)
        padded = (padded[:, None, :, None] & pad[None, :, None, :]).reshape(flat.shape)
    out_shape = tuple(p.shape[0] for p, _, _, _ in axes)
    return np.where(inside, flat, -1), inside.sum(1), padded.sum(1), out_shape


class _Pool:
    def __init__(self, op, n, data, pool_size, strides, padding, dilation, ceil_mode, layout):
        self.op, self.n = op, n
        self.canon = "NC" + _SPATIAL[n]
        x = to_layout(op, data, layout, self.canon)
        if not x.dtype.is_floating_point:
            raise KernelError(f"{op}: data must be a float tensor, got {x.dtype}")
        self.x = x
        k = ints(op, "pool_size", pool_size, n)
        s = ints(op, "strides", strides, n)
        d = ints(op, "dilation", dilation, n)
        before, after = paddings(op, padding, n)
        self._key = (op, tuple(x.shape[2:]), tuple(k), tuple(s), tuple(before), tuple(after), tuple(d), bool(ceil_mode))
        try:  # the output size alone (plain ints, so torch.compile traces no NumPy); the index maps when asked
            self.out_shape = tuple(window_positions(*a, bool(ceil_mode)) for a in zip(x.shape[2:], k, s, before, after, d))
        except ValueError as err:
            raise KernelError(f"{op}: {err}") from None
        self.plane = math.prod(x.shape[2:])
        # PyTorch's own pooling kernels take symmetric padding of at most half the window, with the same
        # output sizes (ceil_mode included) and the same first-maximum rule: then the ATen ops run.
        self.aten = before == after and all(2 * b <= kk for b, kk in zip(before, k))
        self.k, self.s, self.d, self.pad, self.after, self.ceil = k, s, d, before, after, bool(ceil_mode)
        # On CPU ATen's NC... max pooling (and its indices) runs a scalar loop, tens of times slower than
        # a max over strided views of the taps: those run there (under torch.compile too, whose fused
        # loops over the views beat its own max-pool lowering: MNIST net step, 53 vs 121 ms in its kernels).
        self.strided = x.device.type == "cpu"

    @property
    def idx(self):
        """(outputs, taps) flat input positions, padding reading one extra column (on the device)."""
        flat = _maps(*self._key)[0]
        return torch.from_numpy(np.where(flat < 0, self.plane, flat)).to(self.x.device)

    def tap_views(self, x, fill):
        """x padded with `fill` (as far as the windows reach) and, per tap in row-major window order, the
        strided view of it holding that tap of every window (shaped as the output)."""
        reach = [(o - 1) * ss + (kk - 1) * dd + 1 for o, ss, kk, dd in zip(self.out_shape, self.s, self.k, self.d)]
        extra = [max(0, r - b - n) for r, b, n in zip(reach, self.pad, x.shape[2:])]
        if any(self.pad) or any(extra):
            x = F.pad(x, [q for b, e in zip(reversed(self.pad), reversed(extra)) for q in (b, e)], value=fill)
        views = []
        for tap in itertools.product(*(range(kk) for kk in self.k)):
            sl = tuple(slice(t * dd, t * dd + (o - 1) * ss + 1, ss) for t, dd, o, ss in zip(tap, self.d, self.out_shape, self.s))
            views.append((slice(None), slice(None)) + sl)
        return x, views

    def strided_max(self):
        """Each window's maximum (NaN when it holds one, as NumPy's chain of maxima), and the taps."""
        xp, views = self.tap_views(self.x, -math.inf)
        m = xp[views[0]].clone()
        for v in views[1:]:
            torch.maximum(m, xp[v], out=m)
        return m, xp, views

    def strided_max_backward(self, g):
        """The gradient to each window's first maximum in row-major tap order, as NumPy's kernel; the mask
        multiplies the gradient (a non-finite one smears NaN). A window whose maximum is NaN matches no tap
        here: data holding NaN takes _nan_last's route (PyTorch's rule) instead."""
        m, xp, views = self.strided_max()
        gp = torch.zeros(xp.shape, dtype=self.x.dtype, device=self.x.device)
        free = None
        last = len(views) - 1
        apart = all(ss >= (kk - 1) * dd + 1 for ss, kk, dd in zip(self.s, self.k, self.d))  # no cell in two windows
        for k, v in enumerate(views):
            hit = xp[v] == m
            if k == 0:
                free = torch.logical_not(hit)
            else:
                hit &= free
                if k < last:
                    free ^= hit
            if apart and torch.compiler.is_compiling():  # dynamo splits the graph at an `out=` view
                gp[v] = g * hit
            elif apart:
                torch.mul(g, hit, out=gp[v])  # as NumPy writes it: a negative gradient off the maximum gives -0
            else:
                gp[v].add_(g * hit)  # on the view: `gp[v] += ...` would copy the view back over itself
        return self.crop(gp)

    def crop(self, xp):
        """The input's cells of a tensor over the padded input."""
        crop = (slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(self.pad, self.x.shape[2:]))
        return xp if xp.shape == self.x.shape else xp[crop]

    @property
    def tiled(self) -> bool:
        """Windows that tile the padded input (no dilation, stride at least the window): each cell in one window."""
        return all(dd == 1 and ss >= kk for dd, ss, kk in zip(self.d, self.s, self.k))

    def tiled_max_backward(self, g):
        """strided_max_backward for tiled windows in a form torch.compile fuses well (its
        slice-scatters of the tap views become nests of scalar selects): the padded input as (N, C, o1, s1, o2,
        s2, ...) blocks, each window's first maximum by argmax over its taps (the first of equal values; a window
        holding NaN: its last NaN, as PyTorch), the gradient times the hit mask (the same -0 and NaN as NumPy's
        product) in the blocks' order, which is the padded input's. Bitwise equal to the eager kernels. Branch-free
        (it runs under torch.compile, where _nan_last's data-dependent check would split the graph)."""
        n, c = self.x.shape[:2]
        xp = self.x
        want = [o * ss for o, ss in zip(self.out_shape, self.s)]
        # Pad by the window padding, then to whole blocks (or cut cells past the last block: no window reads them).
        grow = [(b, max(0, w - b - size)) for b, w, size in zip(self.pad, want, xp.shape[2:])]
        if any(b or e for b, e in grow):
            xp = F.pad(xp, [q for b, e in reversed(grow) for q in (b, e)], value=-math.inf)
        full = xp.shape
        xp = xp[(slice(None), slice(None)) + tuple(slice(0, w) for w in want)]
        blocks = xp.reshape((n, c) + tuple(v for o, ss in zip(self.out_shape, self.s) for v in (o, ss)))
        nd = len(self.k)
        taps = blocks[(slice(None), slice(None)) + tuple(v for kk in self.k for v in (slice(None), slice(0, kk)))]
        order = (0, 1) + tuple(2 + 2 * a for a in range(nd)) + tuple(3 + 2 * a for a in range(nd))
        taps = taps.permute(order).reshape((n, c) + self.out_shape + (-1,))
        # The hit mask and product in the blocks' own order (a view of the padded input, no permute back):
        # each cell reads its window's first-maximum tap and gradient, nothing of its neighbours.
        spread = (slice(None), slice(None)) + (slice(None), None) * nd
        nan = torch.isnan(taps)
        last_nan = (nan * torch.arange(1, nan.shape[-1] + 1, device=taps.device)).argmax(-1)
        first = torch.where(nan.any(-1), last_nan, taps.argmax(-1))[spread]
        tap = torch.arange(math.prod(self.k), device=taps.device).reshape(self.k)
        tap = tap[(None, None) + tuple(v for a in range(nd) for v in (None, slice(None)))]
        gt = g[spread] * (tap == first)
        gt = F.pad(gt, [q for kk, ss in zip(reversed(self.k), reversed(self.s)) for q in (0, ss - kk, 0, 0)])  # +0 off the taps
        gp = gt.reshape((n, c) + tuple(want))
        if tuple(gp.shape) != tuple(full):
            gp = F.pad(gp, [q for w, size in zip(reversed(want), reversed(full[2:])) for q in (0, size - w)])
        return self.crop(gp)

    def taps(self, x, fill):
        """(N, C, outputs, taps) of x's values, `fill` at padding."""
        n, c = x.shape[:2]
        flat = torch.cat([x.reshape(n, c, -1), torch.full((n, c, 1), fill, dtype=x.dtype, device=x.device)], dim=2)
        return flat[:, :, self.idx]

    def out(self, y, layout):
        y = y.reshape(y.shape[:2] + self.out_shape)
        return to_layout(self.op, y, self.canon, layout).contiguous()

    def grad_in(self, g, layout):
        g = to_layout(self.op, g, layout, self.canon)
        want = tuple(self.x.shape[:2]) + self.out_shape
        if tuple(g.shape) != want:
            raise KernelError(f"{self.op}: output_grad has shape {tuple(g.shape)} in {self.canon} order, expected {want}")
        return g.reshape(g.shape[0], g.shape[1], -1).to(self.x.dtype)

    def scatter(self, positions, values, layout):
        """Sum `values` (N, C, outputs, taps) into the input positions `positions` (outputs, taps)."""
        n, c = self.x.shape[:2]
        out = torch.zeros((n, c, self.plane + 1), dtype=self.x.dtype, device=self.x.device)
        out.index_add_(2, positions.reshape(-1), values.reshape(n, c, -1))
        return fresh(to_layout(self.op, out[:, :, : self.plane].reshape(self.x.shape), self.canon, layout).contiguous())

    def divisor(self, count_include_pad):
        _, inside, padded, _ = _maps(*self._key)
        counts = padded if count_include_pad else inside
        inv = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0)
        return torch.from_numpy(inv).to(self.x.device, self.x.dtype)

    def first_max(self):
        """The tap of each window's first maximum (padding never wins)."""
        return torch.argmax(self.taps(self.x, -math.inf), dim=3, keepdim=True)


def _pool(n, kind):
    def kernel(data, pool_size=1, strides=1, dilation=1, padding=0, ceil_mode=False, count_include_pad=False,
               layout=None, out_layout=None):
        p = _Pool(f"{kind}_pool{n}d", n, data, pool_size, strides, padding, dilation, ceil_mode, layout or "NC" + _SPATIAL[n])
        if kind == "max" and p.strided:
            y = p.strided_max()[0]
            return to_layout(p.op, y, p.canon, out_layout or layout or p.canon).contiguous()
        if p.aten and n > 1 and (kind == "max" or all(dd == 1 for dd in p.d)):
            if kind == "max":
                y = _MAX[n](p.x, p.k, p.s, p.pad, p.d, p.ceil)
            else:
                half = p.x.dtype == torch.float16 and p.x.device.type == "cpu"  # ATen's CPU avg_pool3d has no Half
                x = p.x.float() if half else p.x
                y = _AVG[n](x, p.k, p.s, p.pad, p.ceil, bool(count_include_pad)).to(p.x.dtype)
            return to_layout(p.op, y, p.canon, out_layout or layout or p.canon).contiguous()
        if kind == "max":
            y = p.taps(p.x, -math.inf).amax(dim=3)
        else:
            y = p.taps(p.x, 0.0).sum(dim=3) * p.divisor(count_include_pad)
        return p.out(y, out_layout or layout or p.canon)

    return kernel


def _max_backward(n):
    def kernel(output_grad, data, pool_size=1, strides=1, dilation=1, padding=0, ceil_mode=False, count_include_pad=False,
               layout=None, out_layout=None):
        layout = layout or "NC" + _SPATIAL[n]
        p = _Pool(f"max_pool{n}d_backward", n, data, pool_size, strides, padding, dilation, ceil_mode, layout)
        g = p.grad_in(output_grad, out_layout or layout)
        if p.strided and p.tiled and torch.compiler.is_compiling():
            gx = p.tiled_max_backward(g.reshape(g.shape[:2] + p.out_shape))
            return to_layout(p.op, gx, p.canon, layout).contiguous()
        if p.strided:
            gx = p.strided_max_backward(g.reshape(g.shape[:2] + p.out_shape))
            return fresh(to_layout(p.op, gx, p.canon, layout).contiguous())
        if p.aten:
            _, idx = _MAX_IDX[n](p.x, p.k, p.s, p.pad, p.d, p.ceil)
            gx = _MAX_BWD[n](g.reshape(idx.shape), p.x, p.k, p.s, p.pad, p.d, p.ceil, idx)
            return to_layout(p.op, gx, p.canon, layout).contiguous()
        arg = p.first_max()
        positions = torch.gather(p.idx.expand(g.shape[0], g.shape[1], *p.idx.shape), 3, arg)
        n_, c = g.shape[:2]
        out = torch.zeros((n_, c, p.plane + 1), dtype=p.x.dtype, device=p.x.device)
        out.scatter_add_(2, positions.reshape(n_, c, -1), g)
        return fresh(to_layout(p.op, out[:, :, : p.plane].reshape(p.x.shape), p.canon, layout).contiguous())

    return kernel


def _max_backward_grad(n):
    def kernel(input_grad, data, pool_size=1, strides=1, dilation=1, padding=0, ceil_mode=False, count_include_pad=False,
               layout=None, out_layout=None):
        layout = layout or "NC" + _SPATIAL[n]
        p = _Pool(f"max_pool{n}d_backward_grad", n, data, pool_size, strides, padding, dilation, ceil_mode, layout)
        gx = to_layout(p.op, input_grad, layout, p.canon)
        if tuple(gx.shape) != tuple(p.x.shape):
            raise KernelError(f"{p.op}: input_grad has shape {tuple(gx.shape)} in {p.canon} order, expected the data's {tuple(p.x.shape)}")
        picked = torch.gather(p.taps(gx.to(p.x.dtype), 0.0), 3, p.first_max())[..., 0]
        return p.out(picked, out_layout or layout)

    return kernel


def _avg_backward(n):
    def kernel(output_grad, data, pool_size=1, strides=1, dilation=1, padding=0, ceil_mode=False, count_include_pad=False,
               layout=None, out_layout=None):
        layout = layout or "NC" + _SPATIAL[n]
        p = _Pool(f"avg_pool{n}d_backward", n, data, pool_size, strides, padding, dilation, ceil_mode, layout)
        g = p.grad_in(output_grad, out_layout or layout) * p.divisor(count_include_pad)
        values = g[:, :, :, None].expand(*g.shape, p.idx.shape[1])
        return p.scatter(p.idx, values, layout)

    return kernel


def _adaptive(n):
    spatial = _SPATIAL[n]
    op = f"adaptive_avg_pool{n}d"
    fn = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[n]

    def kernel(data, output_size=None, layout=None, out_layout=None):
        layout = layout or "NC" + spatial
        if not data.dtype.is_floating_point:
            raise KernelError(f"{op}: data must be a float tensor, got {data.dtype}")
        y = to_layout(op, data, layout, "NC" + spatial)
        sizes = tuple(y.shape[2:]) if output_size is None else tuple(int(v) for v in output_size)
        if len(sizes) == 1 and n > 1:
            sizes = sizes * n
        if len(sizes) != n or min(sizes, default=1) < 1:
            raise KernelError(f"{op}: output_size must be {n} positive ints, got {output_size!r}")
        if 0 in y.shape[2:] and tuple(y.shape[2:]) != sizes:
            raise KernelError(f"{op}: cannot average an empty spatial axis (input {tuple(y.shape[2:])}) into {sizes} bins")
        out = fn(y, sizes) if tuple(y.shape[2:]) != sizes else y.clone()
        return to_layout(op, out, "NC" + spatial, out_layout or layout).contiguous()

    return kernel


_MAX = {2: torch.ops.aten.max_pool2d, 3: torch.ops.aten.max_pool3d}
_AVG = {2: torch.ops.aten.avg_pool2d, 3: torch.ops.aten.avg_pool3d}
_MAX_IDX = {2: torch.ops.aten.max_pool2d_with_indices, 3: torch.ops.aten.max_pool3d_with_indices}
_MAX_BWD = {2: torch.ops.aten.max_pool2d_with_indices_backward, 3: torch.ops.aten.max_pool3d_with_indices_backward}

def on_integers(kernel):
    """The NumPy kernels' rule (ops/kernels/pool.on_integers): integer data pooled on float64, exact up to
    2**53, back in its dtype, a window of padding alone giving the dtype's least value."""

    def run(data, **attrs):
        if data.is_floating_point():
            return kernel(data, **attrs)
        if data.numel() and data.element_size() == 8 and (int(data.max()) > FLOAT64_EXACT or int(data.min()) < -FLOAT64_EXACT):
            raise KernelError(f"max pooling: {data.dtype} data beyond 2**53 in magnitude is not supported")
        y = kernel(data.double(), **attrs)
        return torch.where(torch.isneginf(y), torch.iinfo(data.dtype).min, y).to(data.dtype)

    return run


def _nan_last(n, kernel, adjoint=False):
    """A max-pool backward (or, `adjoint`, backward_grad) kernel that takes windows holding NaN or only -inf
    as PyTorch does (to the last NaN; to the first in-bounds tap), by kernels/pool_nan.py's route. One
    reduction keeps other data on `kernel`; under torch.compile the check would split the graph, so
    compiled code keeps `kernel` (whose tiled path, without padding, is NaN-aware on its own)."""
    forward = _pool(n, "max")

    def run(grad, data, **attrs):
        if torch.compiler.is_compiling() or not data.is_floating_point() or not data.numel() or bool(data.amin() > -math.inf):
            return kernel(grad, data, **attrs)
        nan, ninf = torch.isnan(data), torch.isneginf(data)
        y = forward(data, **attrs)  # NaN where the window holds one
        odd = torch.isnan(y) | torch.isneginf(y)
        order = torch.from_numpy(np.array(spatial_order(tuple(data.shape), attrs.get("layout") or "NC" + _SPATIAL[n])))
        keys = torch.where(nan, order.to(data.device) + 1, torch.where(ninf, 0.0, -math.inf))
        clean = data.masked_fill(nan, -math.inf)
        if adjoint:
            return torch.where(odd, kernel(grad, keys, **attrs).to(data.dtype), kernel(grad, clean, **attrs))
        rest = kernel(torch.where(odd, grad * 0, grad).to(data.dtype), clean, **attrs)  # as pool_nan.py
        picked = kernel(torch.where(odd, grad, 0).double(), keys, **attrs)  # float64: positions stay exact
        # Only those windows pick a NaN or -inf cell: `rest` is 0 there, `picked` 0 elsewhere.
        return torch.where(nan | ninf, picked.to(data.dtype), rest)

    return run


KERNELS = {}
for _n in (1, 2, 3):
    KERNELS[f"relax.nn.max_pool{_n}d"] = on_integers(_pool(_n, "max"))
    KERNELS[f"relax.nn.avg_pool{_n}d"] = _pool(_n, "avg")
    KERNELS[f"relax.nn.adaptive_avg_pool{_n}d"] = _adaptive(_n)
for _n in (2, 3):
    KERNELS[f"relax.grad.max_pool{_n}d_backward"] = _nan_last(_n, _max_backward(_n))
    KERNELS[f"relax.grad.max_pool{_n}d_backward_grad"] = _nan_last(_n, _max_backward_grad(_n), adjoint=True)
    KERNELS[f"relax.grad.avg_pool{_n}d_backward"] = _avg_backward(_n)
