"""Torch kernels of convolutions, 1-3 spatial dims, plain and transposed (ops/nn/conv.py, ops/nn/conv_nd.py):
aten.convolution on the NC... / OI... layouts, with asymmetric padding done around it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from retrograd.errors import KernelError
from retrograd.ops.torch_kernels import tdtype

_CANON = {1: ("NCW", "OIW", "IOW"), 2: ("NCHW", "OIHW", "IOHW"), 3: ("NCDHW", "OIDHW", "IODHW")}


def to_layout(op, x, src, dst):
    """x (laid out as `src`) with its axes in `dst` order: a view."""
    if x.ndim != len(dst) or sorted(src) != sorted(dst):
        raise KernelError(f"{op}: expected an array in layout {src!r}, got shape {tuple(x.shape)}")
    return x if src == dst else x.permute([src.index(c) for c in dst])


def ints(op, name, value, n, minimum=1):
    vals = [int(v) for v in ((value,) if isinstance(value, int) else value)]
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n or min(vals) < minimum:
        raise KernelError(f"{op}: {name} must be an int or {n} ints >= {minimum}, got {value!r}")
    return vals


def paddings(op, value, n):
    """(before..., after...) per spatial dim from an int, n values or 2n values, as TVM accepts."""
    vals = [int(v) for v in ((value,) if isinstance(value, int) else value)]
    if len(vals) == 1:
        vals = vals * n
    if len(vals) == n:
        vals = vals * 2
    if len(vals) != 2 * n or min(vals) < 0:
        raise KernelError(f"{op}: padding must be an int, {n} or {2 * n} ints >= 0, got {value!r}")
    return vals[:n], vals[n:]


def _dtype(op, out_dtype, x, w):
    for name, a in (("data", x), ("weight", w)):
        if not a.dtype.is_floating_point:
            raise KernelError(f"{op}: {name} must be a float tensor, got {a.dtype}")
    if out_dtype in (None, "", "void"):
        return torch.promote_types(x.dtype, w.dtype)
    dt = tdtype(out_dtype)
    if not dt.is_floating_point:
        raise KernelError(f"{op}: out_dtype must be a float dtype, got {out_dtype!r}")
    return dt


def _conv(n, transposed):
    op = f"conv{n}d" + ("_transpose" if transposed else "")
    data_canon, w_canon = _CANON[n][0], _CANON[n][2 if transposed else 1]

    def kernel(data, weight, strides=1, padding=0, dilation=1, groups=1, data_layout=None, kernel_layout=None,
               out_layout=None, out_dtype=None, output_padding=0):
        data_layout = data_layout or data_canon
        if (not transposed and groups == 1 and data_layout == "CN" + data_canon[2:] and kernel_layout == w_canon.replace("OI", "IO")
                and out_dtype in (None, "", "void") and data.dtype == weight.dtype and data.dtype.is_floating_point):
            fast = _weight_gradient(n, data, weight, strides, padding, dilation, out_layout or data_layout, data_canon)
            if fast is not None:
                return fast
        x = to_layout(op, data, data_layout, data_canon)
        w = to_layout(op, weight, kernel_layout or w_canon, w_canon)
        dt = _dtype(op, out_dtype, x, w)
        x, w = x.to(dt), w.to(dt)
        s = ints(op, "strides", strides, n)
        d = ints(op, "dilation", dilation, n)
        before, after = paddings(op, padding, n)
        ci = x.shape[1]
        if groups < 1 or ci % groups:
            raise KernelError(f"{op}: {ci} input channels are not divisible by groups={groups}")
        if not transposed:
            if w.shape[1] * groups != ci:
                raise KernelError(f"{op}: data has {ci} channels, weight expects {w.shape[1] * groups}")
            if before != after:
                pads = [p for b, a in zip(reversed(before), reversed(after)) for p in (b, a)]
                x, before = F.pad(x, pads), [0] * n
            y = torch.ops.aten.convolution(x, w, None, s, before, d, False, [0] * n, groups)
        else:
            op_ = ints(op, "output_padding", output_padding, n, minimum=0)
            if w.shape[0] != ci:
                raise KernelError(f"{op}: data has {ci} channels, weight has {w.shape[0]} input channels")
            k = w.shape[2:]
            size = [(h - 1) * st - b - a + (kk - 1) * dd + o + 1 for h, st, b, a, kk, dd, o in
                    zip(x.shape[2:], s, before, after, k, d, op_)]
            if min(size) <= 0:
                raise KernelError(f"{op}: padding {padding!r} leaves an empty output {size}")
            if before == after and all(o < st or o < dd for o, st, dd in zip(op_, s, d)):
                # PyTorch's own form. ATen's unpadded result, cropped, has NaN (of a NaN weight or an infinite
                # input) at outputs where the padded call, F.conv_transpose and the NumPy kernel keep values.
                y = torch.ops.aten.convolution(x, w, None, s, before, d, True, op_, groups)
                return to_layout(op, y, data_canon, out_layout or data_layout).contiguous()
            full = torch.ops.aten.convolution(x, w, None, s, [0] * n, d, True, [0] * n, groups)
            # Output position i is the full result's i + before (zeros past its end: output_padding).
            extra = [max(0, b + o - f) for b, o, f in zip(before, size, full.shape[2:])]
            if any(extra):
                full = F.pad(full, [p for e in reversed(extra) for p in (0, e)])
            whole = not any(before) and list(full.shape[2:]) == size
            y = full if whole else full[(slice(None), slice(None)) + tuple(slice(b, b + o) for b, o in zip(before, size))]
        return to_layout(op, y, data_canon, out_layout or data_layout).contiguous()

    return kernel


def _weight_gradient(n, data, weight, strides, padding, dilation, out_layout, canon):
    """TVM's form of a convolution's weight gradient (data CN..., kernel IO..., out CN...: the batch is
    contracted) computed by aten.convolution_backward, PyTorch's fused weight-gradient kernel: the data
    is the original input (N, C_in, ...), the kernel the output gradient (N, C_out, ...), and this
    convolution's strides and dilation are the original's dilation and strides."""
    op = f"conv{n}d"
    s = ints(op, "strides", strides, n)
    d = ints(op, "dilation", dilation, n)
    before, after = paddings(op, padding, n)
    if before != after or data.shape[0] != weight.shape[0]:
        return None
    k = [(h + 2 * p - dd * (o - 1) - 1) // st + 1 for h, p, dd, o, st in zip(data.shape[2:], before, d, weight.shape[2:], s)]
    if min(k) <= 0:
        return None
    # Only when the original convolution's output size is exactly the gradient's (no rows it ignored).
    if any((h + 2 * p - st * (kk - 1) - 1) // dd + 1 != o for h, p, st, kk, dd, o in zip(data.shape[2:], before, s, k, d, weight.shape[2:])):
        return None
    shape_only = data.new_empty(()).expand(weight.shape[1], data.shape[1], *k)  # only its shape is read
    dw = torch.ops.aten.convolution_backward(weight, data, shape_only, None, d, before, s, False,
                                             [0] * n, 1, [False, True, False])[1]
    # dw is (C_out, C_in, k...): in this convolution's logical NC... order that is (C_in, C_out, k...).
    return to_layout(op, dw.transpose(0, 1), canon, out_layout).contiguous()


KERNELS = {
    "relax.nn.conv1d": _conv(1, False),
    "relax.nn.conv2d": _conv(2, False),
    "relax.nn.conv3d": _conv(3, False),
    "relax.nn.conv1d_transpose": _conv(1, True),
    "relax.nn.conv2d_transpose": _conv(2, True),
    "relax.nn.conv3d_transpose": _conv(3, True),
}
