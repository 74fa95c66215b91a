"""R.match_cast: a value given a more specific struct info, checked at run time (Relax's MatchCast binding)."""

from __future__ import annotations

from retrograd.errors import KernelError
from retrograd.ir.struct_info import StructInfo, TensorStructInfo, is_base_of
from retrograd.ir.text import format_sinfo
from retrograd.ops import views
from retrograd.ops.registry import Arg, Attr, InferCtx, register


def _to_tensor_sinfo(v) -> TensorStructInfo:
    if not isinstance(v, TensorStructInfo):
        raise TypeError("expected a tensor struct info such as R.Tensor((n, 4), \"float32\")")
    return v


def _infer(ctx: InferCtx) -> StructInfo:
    target = ctx.attrs["struct_info"]
    have = ctx.tensor(0)
    # A cast that can never match is refused now; one that may match is checked by the kernel.
    if have.dtype and target.dtype and have.dtype != target.dtype:
        raise ctx.error(f"cannot cast a {have.dtype} tensor to {format_sinfo(target)}", 0)
    if have.ndim != -1 and target.ndim != -1 and have.ndim != target.ndim:
        raise ctx.error(f"cannot cast a {have.ndim}-d tensor to {format_sinfo(target)}", 0)
    if have.shape is not None and target.shape is not None:
        for i, (a, b) in enumerate(zip(have.shape, target.shape)):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                raise ctx.error(f"dim {i} is {a}, never {b} as {format_sinfo(target)} needs", 0)
    if is_base_of(target, have):
        return have  # the value is already at least as specific
    return target


def match_cast_kernel(x, struct_info: TensorStructInfo):
    want = struct_info
    where = f"R.match_cast to {format_sinfo(want)}"
    if want.dtype and str(x.dtype) != want.dtype:
        raise KernelError(f"{where}: the value is a {x.dtype} tensor")
    if want.ndim != -1 and x.ndim != want.ndim:
        raise KernelError(f"{where}: the value has shape {tuple(x.shape)} ({x.ndim}-d)")
    if want.shape is not None:
        seen: dict[str, int] = {}
        for i, (d, n) in enumerate(zip(want.shape, x.shape)):
            if isinstance(d, int):
                ok = d == n
            elif d in seen:
                ok = seen[d] == n
            else:
                seen[d] = n  # a name seen once binds; an expression of names is not checked here
                ok = True
            if not ok:
                raise KernelError(f"{where}: the value has shape {tuple(x.shape)}; dim {i} does not match {d}")
    return x


match_cast = register(
    "relax.match_cast",
    (Arg("value", "tensor"),),
    (Attr("struct_info", _to_tensor_sinfo),),
    infer=_infer,
    kernel=match_cast_kernel,
    grad=lambda call, out, g: [g],
    print_positional=("struct_info",),
    aliases=(0,), view=views.same,
)

__all__ = ["match_cast"]
