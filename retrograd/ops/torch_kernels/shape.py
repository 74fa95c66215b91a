"""Torch kernels of the layout family: views, concatenation, products, casts (ops/manipulate/shape.py,
ops/manipulate/replicate.py, ops/index/take_slice.py's slices, ops/linear_algebra.py einsum, ops/nn/reshape.py, identity markers).

Where the NumPy kernel returns a view (ops list it in `aliases`), so does this one, so that the memory
meter counts the same buffers on both backends."""

from __future__ import annotations

import math

import torch

from retrograd.errors import KernelError
from retrograd.ops.manipulate.shape import split_points
from retrograd.ops.torch_kernels import fresh, meta_array, tdtype


def permute_dims(x, axes=None):
    return x.permute(tuple(reversed(range(x.ndim))) if axes is None else tuple(axes))


def concat(tensors, axis=0):
    return torch.cat(tensors, dim=0 if axis is None else axis)


def split(x, indices_or_sections, axis=0):
    if indices_or_sections in (1, ()):
        if not -x.ndim <= axis < x.ndim:
            raise KernelError(f"R.split: axis {axis} is out of range for a tensor shaped {tuple(x.shape)}")
        return x.view(x.shape)
    points = [0] + split_points(indices_or_sections, x.shape[axis]) + [x.shape[axis]]
    return tuple(x.narrow(axis, a, max(b - a, 0)) for a, b in zip(points, points[1:]))


def expand_dims(x, axis):
    ndim = x.ndim + len(axis)
    out_shape, it = [], iter(x.shape)
    norm = {a % ndim for a in axis}
    for i in range(ndim):
        out_shape.append(1 if i in norm else next(it))
    return x.view(out_shape)


def squeeze(x, axis=None):
    if axis is None:
        return x.view([d for d in x.shape if d != 1])
    ndim = x.ndim
    if any(not -ndim <= a < ndim for a in axis):
        raise KernelError(f"R.squeeze: axes {list(axis)} out of range for a tensor shaped {tuple(x.shape)}")
    drop = {a % ndim for a in axis if x.shape[a] == 1}
    return x.view([d for i, d in enumerate(x.shape) if i not in drop])


def reshape(x, shape):
    try:
        return x.reshape(tuple(shape))
    except RuntimeError:
        raise KernelError(f"R.reshape: cannot reshape a tensor shaped {tuple(x.shape)} into {list(shape)}") from None


def broadcast_to(x, shape):
    try:
        return x.expand(tuple(shape))
    except RuntimeError:
        raise KernelError(f"R.broadcast_to: cannot broadcast a tensor shaped {tuple(x.shape)} to {list(shape)}") from None


def collapse_sum(x, shape):
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    if lead < 0 or any(s not in (1, d) for s, d in zip(shape, x.shape[lead:])):
        raise KernelError(f"R.collapse_sum_to: cannot collapse a tensor shaped {tuple(x.shape)} to {shape}")
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape) if s == 1 and x.shape[lead + i] != 1)
    if not axes:
        return x
    return torch.sum(x, dim=axes, dtype=x.dtype).reshape(shape)


def astype(x, dtype):
    dt = tdtype(dtype)
    return x if x.dtype == dt else x.to(dt, memory_format=torch.contiguous_format)


def strided_slice(x, axes, begin, end, strides=None, assume_inbound=False):
    out = x
    flips = []
    for i, (a, b, e) in enumerate(zip(axes, begin, end)):
        a %= x.ndim
        s = strides[i] if strides is not None else 1
        idx = range(*slice(b, e, s).indices(x.shape[a]))
        if len(idx) <= 1:  # the step does not matter (and one of 2**62 or more overflows ATen's stride)
            out = out.narrow(a, idx[0] if idx else 0, len(idx))
        elif s > 0:
            out = out[(slice(None),) * a + (slice(idx[0], idx[-1] + 1, s),)]
        else:
            # torch has no negative strides: the positions in increasing order, then a flip (a copy,
            # where NumPy gives a view).
            out = out[(slice(None),) * a + (slice(idx[-1], idx[0] + 1, -s),)]
            flips.append(a)
    if not flips:
        return out
    if out.dtype.itemsize == 1 and out.dtype.is_floating_point:  # float8: torch flips only its bits
        return torch.flip(out.view(torch.uint8), flips).view(out.dtype)
    return torch.flip(out, flips)


def matmul(a, b, out_dtype=None):
    if out_dtype is not None:
        dt = tdtype(out_dtype)
        a, b = a.to(dt), b.to(dt)
    if not a.dtype.is_floating_point:
        # torch has no integer matmul on every device: exact in float64 for the values NumPy's int matmul
        # keeps, else by a broadcast sum of products in the dtype (wrapping as NumPy does).
        if a.ndim == 1 and b.ndim == 1:
            return (a * b).sum(dtype=a.dtype)
        a2 = a.unsqueeze(0) if a.ndim == 1 else a
        b2 = b.unsqueeze(-1) if b.ndim == 1 else b
        out = (a2.unsqueeze(-1) * b2.unsqueeze(-3)).sum(-2, dtype=a.dtype)
        if a.ndim == 1:
            out = out.squeeze(-2)
        if b.ndim == 1:
            out = out.squeeze(-1)
        return out
    return torch.matmul(a, b)


def einsum(operands, subscripts):
    dtype = operands[0].dtype
    if dtype == torch.bool:  # NumPy's bool einsum: or of ands; ATen has no bool bmm
        out = torch.einsum(subscripts, *[o.to(torch.int64) for o in operands]).to(dtype)
    else:  # ATen sums integers into int64: the result keeps the operands' dtype (inference, NumPy)
        out = torch.einsum(subscripts, *operands).to(dtype)
    if any(out.untyped_storage().data_ptr() == o.untyped_storage().data_ptr() for o in operands) or not out.is_contiguous():
        out = out.contiguous() if not out.is_contiguous() else out.clone()
    return out


def tile(data, repeats):
    reps = tuple(repeats)
    if len(reps) < data.ndim:
        reps = (1,) * (data.ndim - len(reps)) + reps
    return data.repeat(reps) if reps else data.clone()


def repeat(data, repeats, axis=None):
    if axis is None:
        return torch.repeat_interleave(data.reshape(-1), repeats)
    return torch.repeat_interleave(data, repeats, dim=axis)


def reverse_sequence(data, seq_lengths, seq_axis=1, batch_axis=0):
    seq_axis, batch_axis = seq_axis % data.ndim, batch_axis % data.ndim
    n = data.shape[seq_axis]
    lengths = torch.clamp(seq_lengths.to(torch.int64), 0, n)
    pos = torch.arange(n, device=data.device)
    src = torch.where(pos[None, :] < lengths[:, None], lengths[:, None] - 1 - pos[None, :], pos[None, :])
    shape = [1] * data.ndim
    shape[batch_axis], shape[seq_axis] = data.shape[batch_axis], n
    if batch_axis > seq_axis:
        src = src.T
    return torch.gather(data, seq_axis, src.reshape(shape).expand(data.shape))


def pixel_shuffle(data, *, upscale_factor):
    r = int(upscale_factor)
    if data.ndim < 3 or data.shape[-3] % (r * r):
        raise KernelError(f"pixel_shuffle: cannot shuffle shape {tuple(data.shape)} by upscale_factor {r}")
    *lead, c, h, w = data.shape
    k = len(lead)
    y = data.reshape(*lead, c // (r * r), r, r, h, w).permute(*range(k + 1), k + 3, k + 1, k + 4, k + 2)
    return fresh(y.contiguous().reshape(*lead, c // (r * r), h * r, w * r))


def batch_flatten(data):
    if data.ndim < 2:
        raise KernelError(f"batch_flatten: expects at least 2 dimensions, got shape {tuple(data.shape)}")
    return data.reshape(data.shape[0], math.prod(data.shape[1:])).clone(memory_format=torch.contiguous_format)


def match_cast(x, struct_info):
    from retrograd.ops.registry import get

    get("relax.match_cast").kernel(meta_array(x), struct_info)  # the NumPy kernel's checks of shape and dtype
    return x


def _host(v):
    if isinstance(v, torch.Tensor):
        return v.detach().cpu().numpy()
    if isinstance(v, tuple):
        return tuple(_host(x) for x in v)
    return v


def assert_op(condition, format_args=None, *, format=""):
    # A host-side check with a message: the NumPy kernel on the values brought to the host.
    from retrograd.ops.registry import get

    return get("relax.assert_op").kernel(_host(condition), _host(format_args), format=format)


def _identity(x):
    return x


KERNELS = {
    "relax.permute_dims": permute_dims,
    "relax.concat": concat,
    "relax.split": split,
    "relax.expand_dims": expand_dims,
    "relax.squeeze": squeeze,
    "relax.flatten": lambda x: x.reshape(-1),
    "relax.reshape": reshape,
    "relax.broadcast_to": broadcast_to,
    "relax.collapse_sum_to": collapse_sum,
    "relax.collapse_sum_like": lambda data, target: collapse_sum(data, target.shape),
    "relax.astype": astype,
    "relax.triu": lambda x, k=0: torch.triu(x, k),
    "relax.tril": lambda x, k=0: torch.tril(x, k),
    "relax.strided_slice": strided_slice,
    "relax.matmul": matmul,
    "relax.einsum": einsum,
    "relax.outer": lambda x1, x2: torch.outer(x1, x2),
    "relax.stack": lambda tensors, axis=0: torch.stack(tensors, dim=0 if axis is None else axis),
    "relax.tile": tile,
    "relax.repeat": repeat,
    "relax.flip": lambda data, axis: torch.flip(data, (axis,) if isinstance(axis, int) else tuple(axis)),
    "relax.reverse_sequence": reverse_sequence,
    "relax.nn.pixel_shuffle": pixel_shuffle,
    "relax.nn.batch_flatten": batch_flatten,
    "relax.match_cast": match_cast,
    "relax.assert_op": assert_op,
    "relax.grad.no_grad": _identity,
    "relax.grad.start_checkpoint": _identity,
    "relax.grad.end_checkpoint": _identity,
}
