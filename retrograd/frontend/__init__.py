"""In-memory interop with TVM (an optional dependency, imported only when these are called)."""

from retrograd.frontend.tvm_import import from_tvm, tvm_params
from retrograd.frontend.tvm_export import to_tvm

__all__ = ["from_tvm", "to_tvm", "tvm_params"]

from retrograd.frontend.onnx_import import from_onnx  # noqa: E402  (onnx itself is imported only when called)
