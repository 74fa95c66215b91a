"""Window geometry shared by pooling and convolution: attribute normalization, output sizes, layouts."""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError


def _ints(op: str, name: str, value) -> tuple:
    """An int or a (possibly NumPy) sequence of ints as a tuple of Python ints."""
    # Attributes from the IR are tuples of ints: the general path costs ~3 µs a call, ~40 calls a step.
    if type(value) is tuple and value and all(type(v) is int for v in value):
        return value
    if type(value) is int:
        return (value,)
    try:
        vals = tuple(np.asarray(value).reshape(-1).tolist())
    except (TypeError, ValueError):  # ragged or otherwise not array-like
        vals = ()
    if not vals or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in vals):
        raise KernelError(f"{op}: {name} must be an int or a sequence of ints, got {value!r}")
    return tuple(int(v) for v in vals)


def pair(op: str, name: str, value, minimum: int = 1) -> tuple[int, int]:
    """An int or a 1-/2-sequence of ints as an (h, w) pair, each at least `minimum`."""
    vals = _ints(op, name, value)
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2:
        raise KernelError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    if min(vals) < minimum:
        raise KernelError(f"{op}: {name} must be >= {minimum}, got {value!r}")
    return int(vals[0]), int(vals[1])


def padding4(op: str, value) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right) from an int, (ph, pw) or a 4-sequence, as TVM accepts."""
    vals = _ints(op, "padding", value)
    if len(vals) in (1, 2):
        h, w = pair(op, "padding", vals, minimum=0)
        return h, w, h, w
    if len(vals) != 4:
        raise KernelError(f"{op}: padding must be an int, a pair or 4 ints, got {value!r}")
    if min(vals) < 0:
        raise KernelError(f"{op}: padding must be >= 0, got {value!r}")
    return vals


def window_positions(size: int, k: int, s: int, p0: int, p1: int, d: int, ceil_mode: bool = False) -> int:
    """Number of window positions along one axis (TVM's and PyTorch's rule, ceil_mode included).

    The one formula behind both the kernels and shape inference. Raises ValueError when a window does
    not fit even the padded input (TVM would infer a size of 0 or less).
    """
    extent = d * (k - 1) + 1
    span = size + p0 + p1 - extent
    if span < 0:
        raise ValueError(f"window of extent {extent} does not fit the padded input of extent {size + p0 + p1}")
    if not ceil_mode:
        return span // s + 1
    n = -(-span // s) + 1
    # As in TVM and PyTorch: the last window must start inside the input or its leading padding.
    if (n - 1) * s >= size + p0:
        n -= 1
    return n


def out_size(op: str, size: int, k: int, s: int, p0: int, p1: int, d: int, ceil_mode: bool = False) -> int:
    """window_positions for a kernel: a misfit is a KernelError of `op`."""
    try:
        return window_positions(size, k, s, p0, p1, d, ceil_mode)
    except ValueError as err:
        raise KernelError(f"{op}: {err}") from None


def check_ndim(op: str, name: str, x: np.ndarray, ndim: int) -> None:
    if x.ndim != ndim:
        raise KernelError(f"{op}: {name} must be {ndim}-D, got shape {x.shape}")


def all_finite(a) -> bool:
    """Whether a dense matrix may contract `a`: a non-finite value times a matrix's zeros is NaN, which would
    reach every output of its row instead of the outputs whose taps read it (as PyTorch's kernels do)."""
    return bool(np.isfinite(a).all())


def check_float(op: str, name: str, x: np.ndarray) -> None:
    if x.dtype.kind != "f":
        raise KernelError(f"{op}: {name} must have a float dtype, got {x.dtype}")


def _perm(op: str, src: str, dst: str) -> list[int]:
    if sorted(src) != sorted(dst):
        raise KernelError(f"{op}: layout {src!r} is not supported (expected a permutation of {dst!r})")
    return [src.index(c) for c in dst]


def to_layout(op: str, x: np.ndarray, src: str, dst: str) -> np.ndarray:
    """A view of `x` (laid out as `src`) with its axes in `dst` order; rejects blocked layouts."""
    check_ndim(op, f"an array in layout {src!r}", x, len(dst))
    if src == dst:
        return x
    return x.transpose(_perm(op, src, dst))


# Working on about 1 MB of planes at a time keeps a kernel's temporaries in cache (measured: 2x).
CHUNK_BYTES = 1 << 20


def plane_chunk_size(plane_bytes: int, target_bytes: int = CHUNK_BYTES) -> int:
    """How many planes of `plane_bytes` make one chunk."""
    return max(1, target_bytes // max(1, plane_bytes))


def plane_chunks(n_planes: int, size: int, offset: int = 0):
    """Consecutive slices of `size` planes covering n_planes planes from `offset`."""
    for start in range(offset, offset + n_planes, size):
        yield slice(start, min(offset + n_planes, start + size))


class Window2d:
    """Geometry of a 2-D sliding window over an (H, W) plane: sizes, strides, padding, dilation, output size."""

    __slots__ = ("kh", "kw", "sh", "sw", "pt", "pl", "pb", "pr", "dh", "dw", "h", "w", "oh", "ow")

    def __init__(self, op, in_hw, kernel, strides, padding, dilation, ceil_mode=False, kernel_name="pool_size"):
        self.h, self.w = (int(v) for v in in_hw)
        self.kh, self.kw = pair(op, kernel_name, kernel)
        self.sh, self.sw = pair(op, "strides", strides)
        self.dh, self.dw = pair(op, "dilation", dilation)
        self.pt, self.pl, self.pb, self.pr = padding4(op, padding)
        self.oh = out_size(op, self.h, self.kh, self.sh, self.pt, self.pb, self.dh, ceil_mode)
        self.ow = out_size(op, self.w, self.kw, self.sw, self.pl, self.pr, self.dw, ceil_mode)
        # Along an axis with one window the stride is never taken: 1 keeps the kernels' phase loops
        # (one per stride offset) independent of its magnitude.
        if self.oh == 1:
            self.sh = 1
        if self.ow == 1:
            self.sw = 1

    @property
    def padded_hw(self) -> tuple[int, int]:
        """Extent of the padded plane the windows read (ceil_mode windows may run past the padding)."""
        hn = max(self.h + self.pt + self.pb, (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1)
        wn = max(self.w + self.pl + self.pr, (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1)
        return hn, wn
