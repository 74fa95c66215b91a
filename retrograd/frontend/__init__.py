"""Importers and exporters: TVM interop, PyTorch's torch.export programs, ONNX models (each optional dependency is
imported only when its functions are called)."""

from retrograd.frontend.tvm_import import from_tvm, tvm_params
from retrograd.frontend.tvm_export import to_tvm
from retrograd.frontend.onnx_import import from_onnx
from retrograd.frontend.torch_import import from_exported_program, from_torch

__all__ = ["from_tvm", "to_tvm", "tvm_params", "from_exported_program", "from_torch", "from_onnx"]
