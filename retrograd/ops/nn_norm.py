"""Normalization ops (layer, RMS, group, instance, batch norm) and their fused grad.*_norm_backward ops."""

# Gradient conventions (TVM has no rules for these): PyTorch's, with two TVM-specific points: center=False
# / scale=False leave beta / gamma out of the computation (they get no gradient), and batch_norm's
# moving statistics are updated with the biased batch variance (TVM's definition; PyTorch uses the
# unbiased one), so their gradients follow that. Second-order gradients through the backward ops are
# not supported (their rule is absent, a clear error of the Gradient pass).

from __future__ import annotations

from retrograd.ir.expr import TupleGetItem
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.kernels import norm as norm_kernels
from retrograd.ops.reduce import axes_of
from retrograd.ops.registry import Attr, InferCtx, register

_EPS_CENTER_SCALE = (
    Attr("epsilon", at.to_float, 1e-5),
    Attr("center", at.to_bool, True),
    Attr("scale", at.to_bool, True),
)
LAYER_NORM_ATTRS = (Attr("axes", at.to_ints), *_EPS_CENTER_SCALE)
RMS_NORM_ATTRS = (Attr("axes", at.to_ints, (-1,)), Attr("epsilon", at.to_float, 1e-5))
GROUP_NORM_ATTRS = (
    Attr("num_groups", at.to_int),
    Attr("channel_axis", at.to_int),
    Attr("axes", at.to_ints),
    *_EPS_CENTER_SCALE,
)
INSTANCE_NORM_ATTRS = (Attr("channel_axis", at.to_int), Attr("axes", at.to_ints), *_EPS_CENTER_SCALE)
BATCH_NORM_ATTRS = (
    Attr("axis", at.to_int),
    *_EPS_CENTER_SCALE,
    Attr("momentum", at.to_float, 0.1),
    Attr("training", at.to_bool, True),
)

# -- inference -------------------------------------------------------------------------------


def _data(ctx: InferCtx, i: int = 0) -> TensorStructInfo:
    x = ctx.tensor(i)
    if x.dtype and not is_float_dtype(x.dtype):
        raise ctx.error(f"requires a float tensor, got dtype {x.dtype}", i)
    return x


def _param(ctx: InferCtx, i: int, x: TensorStructInfo, dims, what: str) -> TensorStructInfo:
    """Argument i must be a tensor of x's dtype with the given dims (None: unknown)."""
    p = ctx.tensor(i)
    name = ctx.op.args[i + getattr(ctx, "shift", 0)].name
    if p.dtype and x.dtype and p.dtype != x.dtype:
        raise ctx.error(f"{name} must have the data's dtype {x.dtype}, got {p.dtype}", i)
    if dims is None:
        return p
    if p.ndim != -1 and p.ndim != len(dims):
        raise ctx.error(f"{name} must have {len(dims)} dimension(s) ({what}), got {p.ndim}", i)
    if p.shape is not None and any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(p.shape, dims)):
        shown = ", ".join(str(d) for d in dims)
        raise ctx.error(f"{name} must have shape ({shown}{',' if len(dims) == 1 else ''}) ({what})", i)
    return p


def _dims_at(x: TensorStructInfo, axes):
    return None if x.shape is None else tuple(x.shape[a] for a in axes)


def _infer_layer_norm(ctx: InferCtx) -> TensorStructInfo:
    x = _data(ctx)
    if x.ndim == -1:
        for i in range(1, len(ctx.sinfo)):
            _param(ctx, i, x, None, "")
        return x
    axes = axes_of(ctx, ctx.attrs["axes"], x.ndim)
    for i in range(1, len(ctx.sinfo)):
        _param(ctx, i, x, _dims_at(x, axes) or (None,) * len(axes), "the data's dims at axes")
    return x


def _channel_dim(ctx: InferCtx, x: TensorStructInfo, channel_axis: int):
    c_ax = axes_of(ctx, (channel_axis,), x.ndim, 0, "channel_axis")[0]
    return c_ax, (None if x.shape is None else x.shape[c_ax])


def _infer_group_norm(ctx: InferCtx) -> TensorStructInfo:
    x = _data(ctx)
    if x.ndim == -1:
        for i in range(1, len(ctx.sinfo)):
            _param(ctx, i, x, None, "")
        return x
    a = ctx.attrs
    c_ax, c = _channel_dim(ctx, x, a["channel_axis"])
    axes = axes_of(ctx, a["axes"], x.ndim)
    if c_ax in axes:
        raise ctx.error(f"axes {list(a['axes'])} must not include the channel axis {a['channel_axis']}", 0)
    groups = a.get("num_groups")
    if groups is not None:
        if groups < 1:
            raise ctx.error(f"num_groups must be positive, got {groups}")
        if isinstance(c, int) and c % groups:
            raise ctx.error(f"the {c} channels are not divisible by num_groups={groups}", 0)
    for i in range(1, len(ctx.sinfo)):
        _param(ctx, i, x, (c,), "one per channel")
    return x


def _infer_batch_norm(ctx: InferCtx) -> TupleStructInfo:
    x = _data(ctx)
    if x.ndim == -1:
        for i in range(1, 5):
            _param(ctx, i, x, None, "")
        c = None
    else:
        _, c = _channel_dim(ctx, x, ctx.attrs["axis"])
        for i in range(1, 5):
            _param(ctx, i, x, (c,), "one per channel")
    m = ctx.attrs["momentum"]
    if not 0 <= m <= 1:
        raise ctx.error(f"momentum must be in [0, 1], got {m}")
    return TupleStructInfo((x, _stat(x, c), _stat(x, c)))


def _stat(x: TensorStructInfo, c) -> TensorStructInfo:
    """A per-channel statistic of data x with c channels (None: unknown)."""
    return TensorStructInfo(None, x.dtype, 1) if c is None else TensorStructInfo((c,), x.dtype)


# -- gradients -------------------------------------------------------------------------------


def _fields(call_expr, n: int, keep) -> list:
    # The same Call object in every field: the Gradient pass's clean-up (CSE) keeps one evaluation.
    return [TupleGetItem(call_expr, i) if k else None for i, k in zip(range(n), keep)]


def _layer_norm_grad(call, out, g):
    a = call.attrs
    data, gamma, beta = call.args
    back = R.grad.layer_norm_backward(g, data, gamma, **a)
    return _fields(back, 3, (True, a["scale"], a["center"]))


def _rms_norm_grad(call, out, g):
    data, weight = call.args
    return _fields(R.grad.rms_norm_backward(g, data, weight, **call.attrs), 2, (True, True))


def _group_norm_grad(call, out, g):
    a = call.attrs
    data, gamma, beta = call.args
    return _fields(R.grad.group_norm_backward(g, data, gamma, **a), 3, (True, a["scale"], a["center"]))


def _instance_norm_grad(call, out, g):
    # instance_norm is group_norm with one group per channel.
    a = call.attrs
    data, gamma, beta = call.args
    x = data.struct_info
    c = None if x.shape is None else x.shape[a["channel_axis"] % x.ndim]
    if not isinstance(c, int):
        from retrograd.errors import GradientError

        raise GradientError(f"R.nn.instance_norm: the gradient needs a static channel count, got {x}", call.span)
    back = R.grad.group_norm_backward(g, data, gamma, num_groups=c, **a)
    return _fields(back, 3, (True, a["scale"], a["center"]))


def _batch_norm_grad(call, out, g):
    a = call.attrs
    data, gamma, beta, mean, var = call.args
    gy, gm, gv = (g.fields if hasattr(g, "fields") else [TupleGetItem(g, i) for i in range(3)])
    back = R.grad.batch_norm_backward(gy, gm, gv, data, gamma, mean, var, **a)
    return _fields(back, 5, (True, a["scale"], a["center"], True, True))


layer_norm = register(
    "relax.nn.layer_norm",
    ("data", "gamma", "beta"),
    LAYER_NORM_ATTRS,
    infer=_infer_layer_norm,
    kernel=norm_kernels.layer_norm,
    grad=_layer_norm_grad,
)
rms_norm = register(
    "relax.nn.rms_norm",
    ("data", "weight"),
    RMS_NORM_ATTRS,
    infer=_infer_layer_norm,
    kernel=norm_kernels.rms_norm,
    grad=_rms_norm_grad,
)
group_norm = register(
    "relax.nn.group_norm",
    ("data", "gamma", "beta"),
    GROUP_NORM_ATTRS,
    infer=_infer_group_norm,
    kernel=norm_kernels.group_norm,
    grad=_group_norm_grad,
)
instance_norm = register(
    "relax.nn.instance_norm",
    ("data", "gamma", "beta"),
    INSTANCE_NORM_ATTRS,
    infer=_infer_group_norm,
    kernel=norm_kernels.instance_norm,
    grad=_instance_norm_grad,
)
batch_norm = register(
    "relax.nn.batch_norm",
    ("data", "gamma", "beta", "moving_mean", "moving_var"),
    BATCH_NORM_ATTRS,
    infer=_infer_batch_norm,
    kernel=norm_kernels.batch_norm,
    grad=_batch_norm_grad,
)

# -- fused backward ops ----------------------------------------------------------------------


def _check_grad(ctx: InferCtx, x: TensorStructInfo) -> None:
    g = ctx.tensor(0)
    if x.shape is not None and g.shape is not None and g.shape != x.shape or g.dtype != x.dtype and g.dtype and x.dtype:
        raise ctx.error(f"output_grad must be shaped like the data ({x}), got {g}", 0)


def _backward_infer(forward_infer, n_params: int):
    """Inference of a backward op (output_grad, data, params...): (data, param, param, ...)."""

    def infer(ctx: InferCtx) -> TupleStructInfo:
        sub = _Shifted(ctx, 1)
        forward_infer(sub)
        x = ctx.tensor(1)
        _check_grad(ctx, x)
        p = ctx.tensor(2)
        return TupleStructInfo((x,) + (p,) * n_params)

    return infer


class _Shifted:
    """An InferCtx view with the first `k` arguments dropped (a backward op's forward arguments)."""

    def __init__(self, ctx: InferCtx, k: int):
        self._ctx, self._k = ctx, k
        self.shift = k
        self.sinfo = ctx.sinfo[k:]
        self.attrs = ctx.attrs
        self.op = ctx.op

    def tensor(self, i: int) -> TensorStructInfo:
        return self._ctx.tensor(i + self._k)

    def error(self, message: str, arg: int | None = None):
        return self._ctx.error(message, None if arg is None else arg + self._k)


def _norm_backward(name, args, schema, infer, kernel, n_params):
    return register(f"relax.grad.{name}", args, schema, infer=_backward_infer(infer, n_params), kernel=kernel)


layer_norm_backward = _norm_backward(
    "layer_norm_backward", ("output_grad", "data", "gamma"), LAYER_NORM_ATTRS, _infer_layer_norm,
    norm_kernels.layer_norm_backward, 2,
)
rms_norm_backward = _norm_backward(
    "rms_norm_backward", ("output_grad", "data", "weight"), RMS_NORM_ATTRS, _infer_layer_norm,
    norm_kernels.rms_norm_backward, 1,
)
group_norm_backward = _norm_backward(
    "group_norm_backward", ("output_grad", "data", "gamma"), GROUP_NORM_ATTRS, _infer_group_norm,
    norm_kernels.group_norm_backward, 2,
)


def _infer_batch_norm_backward(ctx: InferCtx) -> TupleStructInfo:
    x = _data(ctx, 3)
    c = None
    if x.ndim != -1:
        c = x.shape[axes_of(ctx, (ctx.attrs["axis"],), x.ndim, 3, "axis")[0]] if x.shape is not None else None
    for i in (1, 2, 4, 5, 6):
        _param(ctx, i, x, (c,) if x.ndim != -1 else None, "one per channel")
    _check_grad(ctx, x)
    return TupleStructInfo((x,) + (_stat(x, c),) * 4)


batch_norm_backward = register(
    "relax.grad.batch_norm_backward",
    ("output_grad", "mean_grad", "var_grad", "data", "gamma", "moving_mean", "moving_var"),
    BATCH_NORM_ATTRS,
    infer=_infer_batch_norm_backward,
    kernel=norm_kernels.batch_norm_backward,
)
