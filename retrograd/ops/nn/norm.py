"""Normalization ops (layer, RMS, group, instance, batch norm) and their fused grad.*_norm_backward ops."""

# Gradient conventions (TVM has no rules for these): PyTorch's, with two TVM-specific points: center=False
# / scale=False leave beta / gamma out of the computation (they get no gradient), and batch_norm's
# moving statistics are updated with the biased batch variance (TVM's definition; PyTorch uses the
# unbiased one), so their gradients follow that. Second-order gradients through the backward ops are
# not supported (their rule is absent, a clear error of the Gradient pass).

from __future__ import annotations

from retrograd.errors import GradientError
from retrograd.ir.expr import Tuple, TupleGetItem, const, shape_expr
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ir.text import format_sinfo
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.composed import ComposedVjp
from retrograd.ops.kernels import norm as norm_kernels
from retrograd.ops.registry import Attr, InferCtx, register
from retrograd.ops.shape_utils import axes_of

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
    x = ctx.float_tensor(0)
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
    x = ctx.float_tensor(0)
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
    x = ctx.float_tensor(0)
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

    def float_tensor(self, i: int) -> TensorStructInfo:
        return self._ctx.float_tensor(i + self._k)

    def error(self, message: str, arg: int | None = None):
        return self._ctx.error(message, None if arg is None else arg + self._k)


# -- the norms written with other ops (the backward ops' gradients) ----------------------------------


def _normalized(x, stat_axes, centered: bool, eps: float, dtype: str):
    """(x - mean) / sqrt(var + eps) over stat_axes (biased variance; the mean square when not centered)."""
    xc = R.subtract(x, R.mean(x, axis=stat_axes, keepdims=True)) if centered else x
    var = R.mean(R.multiply(xc, xc), axis=stat_axes, keepdims=True)
    return R.multiply(xc, R.rsqrt(R.add(var, const(eps, dtype))))


def _along(p, axes, ndim: int):
    """A parameter shaped like the data's dims at `axes` (in that order), broadcastable against the data."""
    order = sorted(range(len(axes)), key=lambda i: axes[i])
    if order != list(range(len(axes))):
        p = R.permute_dims(p, order)
    rest = [i for i in range(ndim) if i not in axes]
    return R.expand_dims(p, rest) if rest else p


def _affine(y, gamma, beta, axes, ndim):
    return R.add(R.multiply(y, _along(gamma, axes, ndim)), _along(beta, axes, ndim))


def _static_ndim(call, data: int = 1):
    x = call.args[data].struct_info
    if x.ndim == -1:
        raise GradientError(
            f"{call.op.script_name}: the gradient needs the data's rank, got {format_sinfo(x)}", call.span
        )
    return x.ndim


def _norm_params(call, i: int, scale: bool):
    """The backward op's primals (data, gamma, beta): gamma as the kernel uses it (ones when the forward
    does not scale), beta (not an argument of the backward op) as zeros shaped like gamma."""
    gamma = call.args[i]
    return (call.args[i - 1], gamma if scale else R.ones_like(gamma), R.zeros_like(gamma))


def _layer_norm_backward_grad(call, out, g):
    a = call.attrs
    nd = _static_ndim(call)
    axes = [ax % nd for ax in a["axes"]]

    def form(x, gm, bt):
        return _affine(_normalized(x, axes, True, a["epsilon"], x.struct_info.dtype), gm, bt, axes, nd)

    return ComposedVjp(call.args[0], _norm_params(call, 2, a["scale"]), form)


def _rms_norm_backward_grad(call, out, g):
    a = call.attrs
    nd = _static_ndim(call)
    axes = [ax % nd for ax in a["axes"]]

    def form(x, w):
        return R.multiply(_normalized(x, axes, False, a["epsilon"], x.struct_info.dtype), _along(w, axes, nd))

    return ComposedVjp(call.args[0], call.args[1:3], form)


def _group_norm_backward_grad(call, out, g):
    a = call.attrs
    nd = _static_ndim(call)
    shape = call.args[1].struct_info.shape
    c_ax = a["channel_axis"] % nd
    groups = a["num_groups"]
    if shape is None or not isinstance(shape[c_ax], int):
        raise GradientError(
            f"R.grad.group_norm_backward: the gradient needs a static channel count, got {shape}", call.span
        )
    split = shape_expr(tuple(shape[:c_ax]) + (groups, shape[c_ax] // groups) + tuple(shape[c_ax + 1 :]))
    stat = [c_ax + 1] + [ax % nd + 1 if ax % nd > c_ax else ax % nd for ax in a["axes"]]

    def form(x, gm, bt):
        y = R.reshape(_normalized(R.reshape(x, split), stat, True, a["epsilon"], x.struct_info.dtype), shape_expr(shape))
        return _affine(y, gm, bt, [c_ax], nd)

    return ComposedVjp(call.args[0], _norm_params(call, 2, a["scale"]), form)


def _norm_backward(name, args, schema, infer, kernel, n_params, grad):
    return register(f"relax.grad.{name}", args, schema, infer=_backward_infer(infer, n_params), kernel=kernel, grad=grad)


layer_norm_backward = _norm_backward(
    "layer_norm_backward", ("output_grad", "data", "gamma"), LAYER_NORM_ATTRS, _infer_layer_norm,
    norm_kernels.layer_norm_backward, 2, _layer_norm_backward_grad,
)
rms_norm_backward = _norm_backward(
    "rms_norm_backward", ("output_grad", "data", "weight"), RMS_NORM_ATTRS, _infer_layer_norm,
    norm_kernels.rms_norm_backward, 1, _rms_norm_backward_grad,
)
group_norm_backward = _norm_backward(
    "group_norm_backward", ("output_grad", "data", "gamma"), GROUP_NORM_ATTRS, _infer_group_norm,
    norm_kernels.group_norm_backward, 2, _group_norm_backward_grad,
)


def _infer_batch_norm_backward(ctx: InferCtx) -> TupleStructInfo:
    x = ctx.float_tensor(3)
    c = None
    if x.ndim != -1:
        c = x.shape[axes_of(ctx, (ctx.attrs["axis"],), x.ndim, 3, "axis")[0]] if x.shape is not None else None
    for i in (1, 2, 4, 5, 6):
        _param(ctx, i, x, (c,) if x.ndim != -1 else None, "one per channel")
    _check_grad(ctx, x)
    return TupleStructInfo((x,) + (_stat(x, c),) * 4)


def _batch_norm_backward_grad(call, out, g):
    a = call.attrs
    nd = _static_ndim(call, 3)
    gy, gm, gv, data, gamma, mm, mv = call.args
    ax = a["axis"] % nd
    others = [i for i in range(nd) if i != ax]
    eps, m = a["epsilon"], a["momentum"]
    dtype = data.struct_info.dtype

    def form(x, w, b, mean0, var0):
        if a["training"]:
            mean, var = R.mean(x, axis=others), R.variance(x, axis=others)
            stats = [R.add(R.multiply(s0, const(1 - m, dtype)), R.multiply(s, const(m, dtype)))
                     for s0, s in ((mean0, mean), (var0, var))]
            y = _normalized(x, others, True, eps, dtype)
        else:
            stats = [mean0, var0]
            rstd = R.rsqrt(R.add(var0, const(eps, dtype)))
            y = R.multiply(R.subtract(x, _along(mean0, [ax], nd)), _along(rstd, [ax], nd))
        return Tuple([_affine(y, w, b, [ax], nd), *stats])

    gamma_eff = gamma if a["scale"] else R.ones_like(gamma)
    return ComposedVjp(Tuple([gy, gm, gv]), (data, gamma_eff, R.zeros_like(gamma), mm, mv), form)


batch_norm_backward = register(
    "relax.grad.batch_norm_backward",
    ("output_grad", "mean_grad", "var_grad", "data", "gamma", "moving_mean", "moving_var"),
    BATCH_NORM_ATTRS,
    infer=_infer_batch_norm_backward,
    kernel=norm_kernels.batch_norm_backward,
    grad=_batch_norm_backward_grad,
)
