"""Reverse-mode automatic differentiation: the Gradient pass (spec, sweep, sparse gradients)."""

from retrograd.passes.gradient.activity import all_float, has_float
from retrograd.passes.gradient.sparse import densify_sparse_grad, merge_sparse_grad
from retrograd.passes.gradient.spec import GradientSpec, resolve_spec
from retrograd.passes.gradient.transform import Gradient, cleanup_function

__all__ = [
    "Gradient",
    "GradientSpec",
    "all_float",
    "cleanup_function",
    "densify_sparse_grad",
    "has_float",
    "merge_sparse_grad",
    "resolve_spec",
]
