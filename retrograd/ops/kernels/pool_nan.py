"""Max pooling's backward ops at windows holding NaN or only -inf, as PyTorch does them (checked on
PyTorch 2.13 for 1-3 dims, padding, dilation, ceil_mode and return_indices). ATen scans a window's
in-bounds taps in row-major order from max = -inf, index = the first in-bounds tap, taking a tap when
`val > max || isnan(val)`: a window holding NaN has maximum NaN and its gradient goes to its LAST NaN; a
window of -inf (and padding) sends it to its first in-bounds tap. The fast kernels compare taps with the
maximum, which a NaN never equals and padding's -inf ties; data whose minimum is NaN or -inf (one
reduction decides) takes this slower route: the fast kernel on the data with NaN as -inf for the other
windows, and on keys whose first maximum is PyTorch's choice for these."""

from __future__ import annotations

import functools

import numpy as np


def spatial_order(shape, layout: str) -> np.ndarray:
    """Each cell's flat spatial position in (D, H, W) order, as float64 (exact below 2**53), broadcast to
    `shape`: within a window, row-major tap order is increasing position."""
    pos = np.zeros((1,) * len(shape))
    for axis in sorted((i for i, ch in enumerate(layout) if ch in "DHW"), key=lambda i: "DHW".index(layout[i])):
        ar = np.arange(shape[axis], dtype=np.float64).reshape([-1 if i == axis else 1 for i in range(len(shape))])
        pos = pos * shape[axis] + ar
    return np.broadcast_to(pos, shape)


def _odd(x) -> bool:
    return x.dtype.kind == "f" and x.size > 0 and not x.min() > -np.inf


def _split(x, layout, forward, attrs):
    """(mask of output windows holding NaN or only -inf, the data with NaN as -inf, float64 keys: a NaN's
    position + 1, 0 at -inf, -inf elsewhere, so such a window's first maximum of the keys is PyTorch's pick)."""
    nan = np.isnan(x)
    y = np.asarray(forward(x, **attrs))  # NaN where the window holds one
    odd = np.isnan(y) | np.isneginf(y)
    keys = np.where(nan, spatial_order(x.shape, layout) + 1, np.where(np.isneginf(x), 0.0, -np.inf))
    return odd, np.where(nan, -np.inf, x), keys


def nan_last(forward, default_layout, adjoint=False):
    """Wrap a max-pool backward kernel (output_grad, data, **attrs), or with `adjoint` a backward_grad
    kernel (input_grad, data, **attrs), with the route above."""

    def wrap(kernel):
        @functools.wraps(kernel)
        def run(grad, data, **attrs):
            x = np.asarray(data)
            if not _odd(x):
                return kernel(grad, data, **attrs)
            odd, clean, keys = _split(x, attrs.get("layout") or default_layout, forward, attrs)
            g = np.asarray(grad)
            if adjoint:  # input_grad read at PyTorch's pick in those windows
                return np.where(odd, kernel(g, keys, **attrs), kernel(g, clean, **attrs))
            # g * 0, not 0: those windows' other taps get what the fast kernels' mask product gives them
            # (-0 for a negative gradient, NaN for an infinite one), as under torch.compile.
            with np.errstate(invalid="ignore"):
                rest = kernel(np.where(odd, g * 0, g).astype(x.dtype), clean, **attrs)
            # float64 keys and gradient: positions stay exact for float16/32 data.
            picked = kernel(np.where(odd, g, 0).astype(np.float64), keys, **attrs)
            # Only those windows pick a NaN or -inf cell: `rest` is 0 there, `picked` 0 elsewhere.
            return np.where(np.isnan(x) | np.isneginf(x), picked.astype(x.dtype), rest)

        return run

    return wrap
