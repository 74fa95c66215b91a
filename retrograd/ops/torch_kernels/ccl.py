"""Torch kernels of the collectives (ops/ccl.py): the same functions serve both backends, since they hand
torch tensors to torch.distributed as they are (NumPy arrays through torch.from_numpy)."""

from __future__ import annotations

from retrograd.ops.registry import all_ops

KERNELS = {op.name: op.kernel for op in all_ops() if op.name.startswith("relax.ccl.")}
