"""How an op's kernel result shares an argument's memory: array layouts over buffers, and the view
rules ops declare with `register(..., view=)` (read by the memory model, analysis/layout.py)."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class Layout(NamedTuple):
    """Shape, dtype and byte strides of an array over its buffer, and whether kernels may write through it."""

    shape: tuple
    dtype: str
    strides: tuple
    writeable: bool = True


class Fresh(NamedTuple):
    """A new buffer laid out in C order (the kernel owns it, or returns a view of a temporary it made)."""


class Same(NamedTuple):
    """Argument `arg` itself: the same array object."""

    arg: int


class View(NamedTuple):
    """A new array over the buffer of argument `arg`."""

    arg: int
    layout: Layout


FRESH = Fresh()


def c_strides(shape, itemsize: int) -> tuple:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def is_c_contiguous(shape, strides, itemsize: int) -> bool:
    """NumPy's C-contiguity flag: strides of size-1 axes do not matter, an empty array always is."""
    if math.prod(shape) == 0:
        return True
    step = itemsize
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1:
            if s != step:
                return False
            step *= d
    return True


def nocopy_reshape(shape, strides, newshape, itemsize: int) -> tuple | None:
    """The strides NumPy gives `reshape(newshape)` as a view, or None when it must copy.

    C-contiguous arrays (empty ones included) and same-shape reshapes are always viewed; otherwise this
    is a port of NumPy's _attempt_nocopy_reshape (C order).
    """
    if tuple(shape) == tuple(newshape):
        return tuple(strides)
    if is_c_contiguous(shape, strides, itemsize):
        return c_strides(newshape, itemsize)
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    olddims = [d for d, _ in old]
    oldstrides = [s for _, s in old]
    newstrides = [0] * len(newshape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(newshape) and oi < len(olddims):
        np_, op = newshape[ni], olddims[oi]
        while np_ != op:
            if np_ < op:
                np_ *= newshape[nj]
                nj += 1
            else:
                op *= olddims[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if oldstrides[ok] != olddims[ok + 1] * oldstrides[ok + 1]:
                return None
        newstrides[nj - 1] = oldstrides[oj - 1]
        for nk in range(nj - 1, ni, -1):
            newstrides[nk - 1] = newstrides[nk] * newshape[nk]
        ni, nj = nj, nj + 1
        oi, oj = oj, oj + 1
    last = newstrides[ni - 1] if ni >= 1 else itemsize
    for nk in range(ni, len(newshape)):
        newstrides[nk] = last
    return tuple(newstrides)


# -- view rules: (attrs, argument layouts, output shapes) -> Fresh | Same | View per output ----------
# An op whose result may share an argument's buffer declares which arguments (`aliases=`) and how, with
# one of these (`view=`): the object itself, or a view with which strides (tests/analysis/
# test_kernel_results.py runs every kernel against its rule). The result of any other op is fresh.


def same(attrs, args, outs):
    return [Same(0)]


def reshape(attrs, args, outs):
    x = args[0]
    strides = nocopy_reshape(x.shape, x.strides, outs[0], np.dtype(x.dtype).itemsize)
    return [FRESH] if strides is None else [View(0, Layout(outs[0], x.dtype, strides, x.writeable))]


def permute(attrs, args, outs):
    x = args[0]
    axes = attrs.get("axes")
    order = range(len(x.shape) - 1, -1, -1) if axes is None else [a % len(x.shape) for a in axes]
    return [View(0, Layout(outs[0], x.dtype, tuple(x.strides[a] for a in order), x.writeable))]


def squeeze(attrs, args, outs):
    x = args[0]
    axis = attrs.get("axis")
    listed = range(len(x.shape)) if axis is None else {a % len(x.shape) for a in axis}
    drop = {i for i in listed if x.shape[i] == 1}  # a listed axis of another size stays
    strides = tuple(s for i, s in enumerate(x.strides) if i not in drop)
    return [View(0, Layout(outs[0], x.dtype, strides, x.writeable))]


def broadcast_to(attrs, args, outs):
    x = args[0]
    shape = outs[0]
    lead = len(shape) - len(x.shape)
    strides = [0] * lead
    for d, s, t in zip(x.shape, x.strides, shape[lead:]):
        strides.append(0 if d == 1 and t != 1 else s)
    # np.broadcast_to views are read-only.
    return [View(0, Layout(shape, x.dtype, tuple(strides), False))]


def strided_slice(attrs, args, outs):
    x = args[0]
    strides = list(x.strides)
    steps = attrs.get("strides")
    for i, a in enumerate(attrs["axes"]):
        strides[a % len(x.shape)] *= steps[i] if steps is not None else 1
    return [View(0, Layout(outs[0], x.dtype, tuple(strides), x.writeable))]


def split(attrs, args, outs):
    x = args[0]
    return [View(0, Layout(shape, x.dtype, x.strides, x.writeable)) for shape in outs]


def same_if_unchanged(attrs, args, outs):
    return [Same(0)] if outs[0] == args[0].shape else [FRESH]


def astype(attrs, args, outs):
    # astype(copy=False): the input itself when the dtype does not change.
    return [Same(0)] if attrs["dtype"] == args[0].dtype else [FRESH]
