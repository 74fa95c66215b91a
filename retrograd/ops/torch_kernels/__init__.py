"""PyTorch kernels of the registered ops, one per op, in modules by family (`OpDef.torch_kernel`).

Each family module maps op names to functions of torch tensors (tuples of them for tuple arguments,
tuples of ints for shapes, Python numbers for prim values) and attribute values, with the same
semantics as the op's NumPy kernel (the reference). The family modules import torch, so this package
imports them only when a torch kernel is first asked for: `import retrograd` never imports torch.
"""

from __future__ import annotations

import importlib

from retrograd.errors import UnsupportedError
from retrograd.ir.dtypes import numpy_dtype

FAMILIES = ("elementwise", "create", "reduce", "shape", "index", "nn", "conv", "pool", "norm", "grad", "image", "ccl",
            "shape_values", "data_dependent")

_TABLE: dict | None = None
_INTO: dict | None = None
_META: dict = {}
_DEVICE = ["cpu"]


def device():
    """Where kernels without tensor arguments (R.zeros, R.arange) put their result: set by the executor."""
    return _DEVICE[0]


def set_device(dev) -> None:
    _DEVICE[0] = dev


def tdtype(name: str):
    """The torch dtype of a retrograd dtype name."""
    torch = require_torch()
    dt = getattr(torch, str(name), None)
    if not isinstance(dt, torch.dtype):
        from retrograd.errors import KernelError

        raise KernelError(f"dtype {name} has no torch equivalent")
    return dt


def require_torch():
    """The torch module, or a clear error saying how to install it."""
    try:
        import torch
    except ImportError:
        raise UnsupportedError("the torch backend needs PyTorch: pip install 'retrograd[torch]' (or pip install torch)") from None
    return torch


# Same-size integer types through which NumPy's extension dtypes (ml_dtypes) and torch's share bits:
# torch.from_numpy and Tensor.numpy know neither side's bfloat16 / float8.
BITS = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8"}


def from_numpy(arr):
    """A CPU torch tensor sharing `arr`'s memory; bfloat16 / float8 arrays (ml_dtypes) included."""
    torch = require_torch()
    bits = BITS.get(str(arr.dtype))
    if bits is None:
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.view(bits)).view(tdtype(str(arr.dtype)))


def to_numpy(tensor):
    """A tensor's values as a NumPy array (a view when the tensor is on the CPU); bfloat16 / float8 as
    ml_dtypes arrays, with a clear error when ml_dtypes is missing."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    name = str(t.dtype).removeprefix("torch.")
    bits = BITS.get(name)
    if bits is None:
        return t.numpy()
    torch = require_torch()
    return t.view(getattr(torch, bits)).numpy().view(numpy_dtype(name))


def table() -> dict:
    """op name -> torch kernel, every family loaded (torch imported on first use)."""
    global _TABLE
    if _TABLE is None:
        require_torch()
        merged: dict = {}
        for family in FAMILIES:
            module = importlib.import_module(f"retrograd.ops.torch_kernels.{family}")
            for name, fn in module.KERNELS.items():
                if name in merged:
                    raise ValueError(f"torch kernel of {name} defined twice ({family})")
                merged[name] = fn
        _TABLE = merged
    return _TABLE


def into(name: str):
    """The op's kernel writing a float result into a given buffer, `fn(out, *args)`, or None (the
    families' INTO tables: ops whose result keeps the dtype of their float tensor arguments)."""
    global _INTO
    if _INTO is None:
        table()
        merged: dict = {}
        for family in FAMILIES:
            merged.update(getattr(importlib.import_module(f"retrograd.ops.torch_kernels.{family}"), "INTO", {}))
        _INTO = merged
    return _INTO.get(name)


def lookup(name: str):
    """The torch kernel of op `name`, or None."""
    return table().get(name)


def meta_array(t):
    """A NumPy array of t's shape and dtype taking no memory (zero strides): for NumPy's checks of shape
    and dtype (argument signatures, R.match_cast) without copying a tensor to the host."""
    key = (t.dtype, tuple(t.shape))
    meta = _META.get(key)
    if meta is None:
        import numpy as np

        torch = require_torch()
        dt = to_numpy(torch.empty(0, dtype=t.dtype)).dtype
        meta = np.broadcast_to(np.zeros((), dt), key[1])  # zero strides, read-only (as_strided refuses ml_dtypes)
        if len(_META) < 4096:  # read-only and shared: every call's arguments of one shape and dtype
            _META[key] = meta
    return meta


def fresh(t):
    """t in a storage of its own (a kernel result that is a view of a temporary, or of an argument, would
    count another buffer than the memory model's; NumPy kernels return fresh arrays too)."""
    return t.clone(memory_format=require_torch().contiguous_format) if t._base is not None else t


def may_be_empty(sinfos) -> bool:
    """Whether a tensor among these struct infos may have a zero-size dimension (a 0 or a symbolic dim):
    the calls on_numpy_when_empty guards."""
    from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo

    for s in sinfos:
        if isinstance(s, TupleStructInfo):
            if may_be_empty(s.fields):
                return True
        elif isinstance(s, TensorStructInfo) and (s.shape is None or any(type(d) is not int or d == 0 for d in s.shape)):
            return True
    return False


def on_numpy_when_empty(kernel, numpy_kernel):
    """`kernel`, except that a call with a zero-size tensor argument runs the op's NumPy kernel (the
    reference) on host copies: ATen's convolutions, pools, scatters and reductions refuse empty
    dimensions NumPy's kernels define (or give another shape), and nothing is to be computed fast there."""
    torch = require_torch()

    def empty(v):
        return any(empty(x) for x in v) if type(v) is tuple else isinstance(v, torch.Tensor) and v.numel() == 0

    def host(v):
        return tuple(host(x) for x in v) if type(v) is tuple else to_numpy(v) if isinstance(v, torch.Tensor) else v

    def where(v):
        if type(v) is tuple:
            return next((d for d in map(where, v) if d is not None), None)
        return v.device if isinstance(v, torch.Tensor) else None

    def back(v, dev):
        import numpy as np

        if type(v) is tuple:
            return tuple(back(x, dev) for x in v)
        return from_numpy(np.array(v, copy=True)).to(dev) if isinstance(v, np.ndarray) else v  # shapes stay ints

    def run(*args, **attrs):
        if any(empty(a) for a in args):
            # On the arguments' device (lowered source sets no executor device).
            dev = next((d for d in map(where, args) if d is not None), None) or device()
            return back(numpy_kernel(*[host(a) for a in args], **attrs), dev)
        return kernel(*args, **attrs)

    run.__name__ = getattr(kernel, "__name__", "kernel")
    return run
