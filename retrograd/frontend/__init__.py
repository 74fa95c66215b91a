"""In-memory interop with TVM (an optional dependency, imported only when these are called)."""

from retrograd.frontend.from_tvm import from_tvm, tvm_params
from retrograd.frontend.to_tvm import to_tvm

__all__ = ["from_tvm", "to_tvm", "tvm_params"]
