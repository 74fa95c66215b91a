"""Naive references for the ops of cases_math: Python's math module element by element, loops over
indices, and PyTorch where a loop would be long; independent of the kernels under test."""

from __future__ import annotations

import math

import numpy as np
from optional import need  # noqa: E402


def _elementwise(fn, out_dtype=None):
    """fn on Python scalars, element by element, broadcasting the arguments like NumPy."""

    def ref(*arrays):
        arrays = [np.asarray(a) for a in arrays]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        wide = [np.broadcast_to(a, shape) for a in arrays]
        dtype = out_dtype or arrays[0].dtype
        out = np.empty(shape, dtype)
        for idx in np.ndindex(shape):
            out[idx] = fn(*(w[idx].item() for w in wide))
        return out

    return ref


def _round_half_even(v):
    return float(round(v)) if isinstance(v, float) else v


def _c_mod(a, b):
    return math.fmod(a, b) if isinstance(a, float) else int(math.fmod(a, b))


def _floor_div(a, b):
    return math.floor(a / b) if isinstance(a, float) else a // b


def _sign(v):
    return (v > 0) - (v < 0)


def _log_add_exp(a, b):
    m = max(a, b)
    return m + math.log(math.exp(a - m) + math.exp(b - m))


def _clip(x, lo, hi):
    lo, hi = np.asarray(lo).astype(x.dtype).item(), np.asarray(hi).astype(x.dtype).item()
    return _elementwise(lambda v: min(max(v, lo), hi))(x)


def _shift(fn):
    def ref(a, b):
        bits = a.dtype.itemsize * 8
        mask = (1 << bits) - 1
        signed = a.dtype.kind == "i"

        def one(x, s):
            r = fn(x, s) & mask
            return r - (1 << bits) if signed and r >> (bits - 1) else r

        return _elementwise(one)(a, b)

    return ref


REFERENCES = {
    "acos": _elementwise(math.acos), "acosh": _elementwise(math.acosh), "asin": _elementwise(math.asin),
    "asinh": _elementwise(math.asinh), "atan": _elementwise(math.atan), "atanh": _elementwise(math.atanh),
    "cosh": _elementwise(math.cosh), "sinh": _elementwise(math.sinh), "tan": _elementwise(math.tan),
    "rsqrt": _elementwise(lambda v: 1 / math.sqrt(v)), "square": _elementwise(lambda v: v * v),
    "ceil": _elementwise(math.ceil), "floor": _elementwise(math.floor), "trunc": _elementwise(math.trunc),
    "round": _elementwise(_round_half_even), "sign": _elementwise(_sign),
    "isfinite": _elementwise(math.isfinite, "bool"), "isinf": _elementwise(math.isinf, "bool"),
    "isnan": _elementwise(math.isnan, "bool"),
    "clip": _clip,
    "atan2": _elementwise(math.atan2), "floor_divide": _elementwise(_floor_div), "mod": _elementwise(_c_mod),
    "floor_mod": _elementwise(lambda a, b: a - _floor_div(a, b) * b), "log_add_exp": _elementwise(_log_add_exp),
    "ewise_fma": _elementwise(lambda a, b, c: a * b + c),
    "logical_and": _elementwise(lambda a, b: bool(a) and bool(b)), "logical_or": _elementwise(lambda a, b: bool(a) or bool(b)),
    "logical_xor": _elementwise(lambda a, b: bool(a) != bool(b)), "logical_not": _elementwise(lambda a: not a),
    "bitwise_and": _elementwise(lambda a, b: a & b), "bitwise_or": _elementwise(lambda a, b: a | b),
    "bitwise_xor": _elementwise(lambda a, b: a ^ b),
    "bitwise_not": lambda a: _elementwise(lambda v: (not v) if a.dtype == bool else ~v & ((1 << a.dtype.itemsize * 8) - 1) if a.dtype.kind == "u" else ~v)(a),
    "left_shift": _shift(lambda a, s: a << s), "right_shift": _shift(lambda a, s: a >> s),
}  # fmt: skip


# -- creation ----------------------------------------------------------------------------------


def _arange(start, end=None, step=None, dtype=None):
    if end is None:
        start, end = 0, start
    step = 1 if step is None else step
    if dtype is None:
        dtype = "int64" if all(float(v).is_integer() and not isinstance(v, float) for v in (start, end, step)) else "float32"
    out, v = [], start
    while (step > 0 and v < end) or (step < 0 and v > end):
        out.append(v)
        v = start + len(out) * step
    return np.array(out, dtype=dtype)


def _eye(n, m=None, k=None, dtype="float32"):
    m, k = n if m is None else m, 0 if k is None else k
    out = np.zeros((n, m), dtype)
    for i in range(n):
        if 0 <= i + k < m:
            out[i, i + k] = 1
    return out


def _hamming(window_size, periodic, alpha, beta, dtype):
    if window_size == 1:
        return np.ones(1, dtype)
    n = window_size + 1 if periodic else window_size
    return np.array([alpha - beta * math.cos(2 * math.pi * i / (n - 1)) for i in range(window_size)], dtype)


def _meshgrid(tensors, indexing="ij"):
    sizes = [len(t) for t in tensors]
    shape = list(sizes)
    if indexing == "xy" and len(shape) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    outs = []
    for k, t in enumerate(tensors):
        out = np.empty(shape, t.dtype)
        for idx in np.ndindex(*shape):
            ij = list(idx)
            if indexing == "xy" and len(ij) >= 2:
                ij[0], ij[1] = ij[1], ij[0]
            out[idx] = t[ij[k]]
        outs.append(out)
    return tuple(outs)


def _one_hot(indices, on_value, off_value, depth, axis=-1):
    dtype = np.asarray(on_value).dtype
    axis = axis % (indices.ndim + 1)
    shape = indices.shape[:axis] + (depth,) + indices.shape[axis:]
    out = np.full(shape, off_value, dtype)
    for idx in np.ndindex(*indices.shape):
        v = int(indices[idx])
        if 0 <= v < depth:
            out[idx[:axis] + (v,) + idx[axis:]] = on_value
    return out


# -- manipulation -------------------------------------------------------------------------------


def _stack(tensors, axis=0):
    torch = need("torch")
    return torch.stack([torch.from_numpy(t) for t in tensors], dim=axis).numpy()


def _tile(data, repeats):
    torch = need("torch")
    return torch.from_numpy(data).tile(tuple(repeats)).numpy()


def _repeat(data, repeats, axis=None):
    torch = need("torch")
    t = torch.from_numpy(data)
    return (t.flatten() if axis is None else t).repeat_interleave(repeats, dim=0 if axis is None else axis).numpy()


def _flip(data, axis):
    out = np.empty_like(data)
    n = data.shape[axis]
    for idx in np.ndindex(*data.shape):
        src = list(idx)
        src[axis] = n - 1 - idx[axis]
        out[idx] = data[tuple(src)]
    return out


def _reverse_sequence(data, seq_lengths, seq_axis=1, batch_axis=0):
    out = data.copy()
    n = data.shape[seq_axis]
    for idx in np.ndindex(*data.shape):
        length = min(max(int(seq_lengths[idx[batch_axis]]), 0), n)
        p = idx[seq_axis]
        if p < length:
            src = list(idx)
            src[seq_axis] = length - 1 - p
            out[idx] = data[tuple(src)]
    return out


# -- gathers and scatters (ONNX semantics, written as loops) ----------------------------------------


def _gather_elements(data, indices, axis=0):
    out = np.empty(indices.shape, data.dtype)
    for idx in np.ndindex(*indices.shape):
        src = list(idx)
        src[axis] = int(indices[idx]) % data.shape[axis]
        out[idx] = data[tuple(src)]
    return out


def _gather_nd(data, indices, batch_dims=0):
    lead = indices.shape[:-1]
    m = indices.shape[-1]
    out = np.empty(lead + data.shape[batch_dims + m :], data.dtype)
    for idx in np.ndindex(*lead):
        out[idx] = data[tuple(idx[:batch_dims]) + tuple(int(v) for v in indices[idx])]
    return out


def _combine(reduction, old, new, dtype):
    if reduction == "update":
        return new
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    if reduction == "min":
        return min(old, new)
    if reduction == "max":
        return max(old, new)
    total = old + new  # mean: (old + new) / 2 at each step, truncating for integers as TIR does
    return int(total / 2) if np.dtype(dtype).kind in "iu" else total / 2


def _scatter_elements(data, indices, updates, axis=0, reduction="update"):
    out = data.copy()
    axis %= data.ndim
    # TVM's loop order: for each position off the axis, k along the axis ascending.
    others = [d for d in range(indices.ndim) if d != axis]
    for rest in np.ndindex(*[indices.shape[d] for d in others]):
        for k in range(indices.shape[axis]):
            idx = list(rest)
            idx.insert(axis, k)
            idx = tuple(idx)
            dst = list(idx)
            dst[axis] = int(indices[idx]) % data.shape[axis]
            dst = tuple(dst)
            out[dst] = _combine(reduction, out[dst].item(), updates[idx].item(), data.dtype)
    return out


def _scatter_nd(data, indices, updates, reduction="update"):
    out = data.copy()
    for idx in np.ndindex(*indices.shape[:-1]):
        dst = tuple(int(v) for v in indices[idx])
        block = updates[idx]
        if reduction == "update":
            out[dst] = block
        else:
            ufunc = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}[reduction]
            out[dst] = ufunc(out[dst], block)
    return out


REFERENCES.update(
    arange=_arange, eye=_eye, eye_like=lambda x, k=None, dtype=None: _eye(x.shape[0], x.shape[1], k, dtype or x.dtype),
    hamming_window=_hamming, meshgrid=_meshgrid, one_hot=_one_hot, stack=_stack, tile=_tile, repeat=_repeat,
    flip=_flip, reverse_sequence=_reverse_sequence, gather_elements=_gather_elements, gather_nd=_gather_nd,
    scatter_elements=_scatter_elements, scatter_nd=_scatter_nd,
)


def _einsum(operands, subscripts):
    torch = need("torch")
    return torch.einsum(subscripts, *(torch.from_numpy(o) for o in operands)).numpy()


def _outer(x1, x2):
    out = np.empty((len(x1), len(x2)), x1.dtype)
    for i, j in np.ndindex(*out.shape):
        out[i, j] = x1[i] * x2[j]
    return out


REFERENCES.update(einsum=_einsum, outer=_outer)


# -- advanced indexing and slice writes -----------------------------------------------------------


def _wrap(idx, n):
    return idx + n if idx < 0 else idx


def _index_tensor(data, indices):
    shape = np.broadcast_shapes(*(i.shape for i in indices))
    wide = [np.broadcast_to(i, shape) for i in indices]
    k = len(indices)
    out = np.empty(shape + data.shape[k:], data.dtype)
    for idx in np.ndindex(*shape):
        out[idx] = data[tuple(_wrap(int(w[idx]), data.shape[a]) for a, w in enumerate(wide))]
    return out


def _index_put(data, indices, values, accumulate=False):
    shape = np.broadcast_shapes(*(i.shape for i in indices))
    wide = [np.broadcast_to(i, shape) for i in indices]
    vals = np.broadcast_to(values, shape)
    out = data.copy()
    for idx in np.ndindex(*shape):
        dst = tuple(_wrap(int(w[idx]), data.shape[a]) for a, w in enumerate(wide))
        out[dst] = out[dst] + vals[idx] if accumulate else vals[idx]
    return out


def _slice_scatter(input_tensor, src, start, end, step, axis=0):
    out = input_tensor.copy()
    for k, pos in enumerate(range(start, end, step)):
        dst = [slice(None)] * out.ndim
        dst[axis] = pos
        srci = [slice(None)] * out.ndim
        srci[axis] = k
        out[tuple(dst)] = src[tuple(srci)]
    return out


def _dynamic_strided_slice(x, begin, end, strides):
    torch = need("torch")
    t = torch.from_numpy(x)
    for axis, (b, e, s) in enumerate(zip(begin, end, strides)):
        idx = list(range(x.shape[axis]))[slice(int(b), int(e), int(s))]
        t = torch.index_select(t, axis, torch.tensor(idx, dtype=torch.long))
    return t.numpy()


# -- reductions, sorting, searching (PyTorch) -----------------------------------------------------


def _torch_reduce(fn_all, fn_dims):
    def ref(x, axis=None, keepdims=False):
        torch = need("torch")
        t = torch.from_numpy(x)
        axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
        out = fn_dims(t, axes, keepdims)
        return out.numpy()

    return ref


def _prod(t, axes, keepdims):
    out = t
    for a in sorted(axes, reverse=True):
        out = out.prod(dim=a, keepdim=keepdims, dtype=t.dtype)
    return out


def _std(t, axes, keepdims):
    return t.std(dim=axes, unbiased=False, keepdim=keepdims) if axes else t.clone()


def _median_ref(x, axis=None, keepdims=False):
    torch = need("torch")
    t = torch.from_numpy(x)
    if axis is not None and len(axis) == 1:
        vals, idx = t.median(dim=axis[0], keepdim=keepdims)
        return vals.numpy(), idx.numpy()
    axes = tuple(range(x.ndim)) if axis is None else tuple(a % x.ndim for a in axis)
    rest = [a for a in range(x.ndim) if a not in axes]
    flat = t.permute(*rest, *axes).reshape(*[x.shape[a] for a in rest], -1)
    vals = flat.median(dim=-1).values
    if keepdims:
        for a in sorted(axes):
            vals = vals.unsqueeze(a)
    return vals.numpy()


def _cumprod(data, axis=None, dtype=None, exclusive=False):
    torch = need("torch")
    t = torch.from_numpy(data)
    if axis is None:
        t, axis = t.flatten(), 0
    if exclusive:
        t = torch.cat([torch.ones_like(t.narrow(axis, 0, 1)), t.narrow(axis, 0, t.shape[axis] - 1)], dim=axis)
    return torch.cumprod(t, dim=axis, dtype=getattr(torch, dtype) if dtype else t.dtype).numpy()


def _sort(x, axis=-1, descending=False):
    torch = need("torch")
    return torch.sort(torch.from_numpy(x), dim=axis, descending=descending, stable=True).values.numpy()


def _argsort(data, axis=-1, descending=False, dtype="int32"):
    torch = need("torch")
    order = torch.sort(torch.from_numpy(data), dim=axis, descending=descending, stable=True).indices
    return order.numpy().astype(dtype or data.dtype)


def _topk(data, k=1, axis=-1, ret_type="both", largest=True, dtype="int32"):
    torch = need("torch")
    n = data.shape[axis]
    k = k if 0 < k < n else n
    # Distinct random values: PyTorch's topk order matches the stable one.
    vals, idx = torch.topk(torch.from_numpy(data), k, dim=axis, largest=largest, sorted=True)
    vals, idx = vals.numpy(), idx.numpy().astype(dtype or data.dtype)
    return (vals, idx) if ret_type == "both" else vals if ret_type == "values" else idx


def _arg_extremum(name):
    def ref(x, axis=None, keepdims=False):
        torch = need("torch")
        t = torch.from_numpy(x)
        fn = getattr(torch, name)
        if axis is None:
            out = fn(t)  # first occurrence of the extremum of the flattened tensor
            return out.reshape((1,) * x.ndim).numpy() if keepdims else out.numpy()
        return fn(t, dim=axis, keepdim=keepdims).numpy()

    return ref


def _dynamic_strided_slice_backward(g, x, begin, end, strides):
    # The positions each axis keeps (Python's list slicing), written with an open mesh.
    idx = [list(range(x.shape[a]))[slice(int(b), int(e), int(s))] for a, (b, e, s) in enumerate(zip(begin, end, strides))]
    out = np.zeros(x.shape, x.dtype)
    out[np.ix_(*idx)] = g
    return out


def _bucketize(input_tensor, boundaries, out_int32=False, right=False):
    torch = need("torch")
    return torch.bucketize(torch.from_numpy(input_tensor), torch.from_numpy(boundaries), out_int32=out_int32, right=right).numpy()


REFERENCES.update(
    index_tensor=_index_tensor, index_put=_index_put, slice_scatter=_slice_scatter,
    dynamic_strided_slice=_dynamic_strided_slice, prod=_torch_reduce(None, _prod), std=_torch_reduce(None, _std),
    median=_median_ref, cumprod=_cumprod, sort=_sort, argsort=_argsort, topk=_topk,
    argmax=_arg_extremum("argmax"), argmin=_arg_extremum("argmin"), bucketize=_bucketize,
    **{"grad.dynamic_strided_slice_backward": _dynamic_strided_slice_backward},
)
