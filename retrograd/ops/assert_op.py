"""R.assert_op: a run-time check that stops the call with a message (impure: never dropped nor moved).

TVM's PyTorch frontend emits it for `F.one_hot` (class values in range) and `torch._assert_async`.
TVM's call holds the format string as its second argument and the values it formats after it; its
parser reads at most one formatted value positionally (`R.assert_op(cond, value, format="...")`), and
so does retrograd: the format string is an attribute here.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import KernelError
from retrograd.ir.struct_info import PrimStructInfo, StructInfo, TensorStructInfo, TupleStructInfo
from retrograd.ir.text import format_sinfo
from retrograd.ops import attr_types as at
from retrograd.ops.cost import VIEW
from retrograd.ops.registry import Arg, Attr, InferCtx, no_gradient, register


def _infer(ctx: InferCtx) -> StructInfo:
    cond = ctx.sinfo[0]
    ok = (isinstance(cond, TensorStructInfo) and cond.dtype in ("bool", "") and cond.ndim in (0, -1)) or (
        isinstance(cond, PrimStructInfo) and cond.dtype == "bool"
    )
    if not ok:
        raise ctx.error(f"the condition must be a bool scalar (tensor or prim value), got {format_sinfo(cond, brief=True)}", 0)
    return TupleStructInfo(())


def assert_kernel(condition, format_args=None, *, format=""):
    cond = np.asarray(condition)
    if cond.size != 1:
        raise KernelError(f"R.assert_op: the condition has {cond.size} elements, not one")
    if bool(cond.reshape(())):
        return ()
    values = () if format_args is None else (format_args,)
    try:
        message = format.format(*values) if format else " ".join(str(v) for v in values)
    except (IndexError, KeyError, ValueError):
        message = f"{format!r} with {values!r}"
    raise KernelError(f"R.assert_op failed: {message or 'assertion failed'}")


assert_op = register(
    "relax.assert_op",
    (Arg("condition", "any"), Arg("format_args", "any", optional=True)),
    (Attr("format", at.to_str, ""),),
    infer=_infer,
    kernel=assert_kernel,
    grad=no_gradient,
    pure=False,
    cost=VIEW,
)
