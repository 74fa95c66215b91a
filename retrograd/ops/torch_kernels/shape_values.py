"""Torch kernels of shapes as values (ops/shape_values.py: TVM's shape_of, size, shape_to_tensor, tensor_to_shape)."""

from __future__ import annotations

import torch

from retrograd.errors import KernelError
from retrograd.ops.torch_kernels import device


def tensor_to_shape(t):
    if t.ndim != 1:
        raise KernelError(f"R.tensor_to_shape: expects a 1-D tensor, got shape {tuple(t.shape)}")
    return tuple(int(v) for v in t.tolist())


KERNELS = {
    "relax.shape_of": lambda x: tuple(int(d) for d in x.shape),
    "relax.size": lambda x: torch.tensor(x.numel(), dtype=torch.int64, device=x.device),
    "relax.shape_to_tensor": lambda s: torch.tensor(tuple(s), dtype=torch.int64, device=device()).reshape(len(tuple(s))),
    "relax.tensor_to_shape": tensor_to_shape,
}
