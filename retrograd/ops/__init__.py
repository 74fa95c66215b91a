"""The operator set: importing this package registers every op."""

from retrograd.ops import elementwise  # noqa: F401  (registers ops)
from retrograd.ops import create, linalg, manipulate, reduce  # noqa: F401  (registers the core families)
from retrograd.ops.registry import Arg, Attr, InferCtx, OpDef, all_ops, get, lookup, register
