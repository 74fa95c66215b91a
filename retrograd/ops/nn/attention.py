"""nn.attention and nn.attention_bias (TVM's (B, S, N, H) layout) with grad.attention_backward, and nn.dropout."""

# Gradients (TVM has none): attention's, from recomputed probabilities, for query, key, value and bias.
# grad.attention_backward's own gradient (second order) differentiates attention written with matmul
# and softmax (ComposedVjp, `_composed_attention`).

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import GradientError
from retrograd.ir.expr import TupleGetItem, const
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype, is_int_dtype
from retrograd.ops import attr_types as at
from retrograd.ops.api import R
from retrograd.ops.composed import ComposedVjp
from retrograd.ops.kernels import attention as att_kernels
from retrograd.ops.kernels import dropout as dropout_kernels
from retrograd.ops.cost import Cost, elements
from retrograd.ops.registry import Arg, Attr, InferCtx, register


def _opt_float(v):
    return None if v is None else at.to_float(v)


ATTENTION_ATTRS = (
    Attr("scale", _opt_float, None),
    Attr("causal_mask", lambda v: None if v is None else at.one_of("TopLeft", "BottomRight")(v), None),
    Attr("window_size", at.to_opt_int, None),
)


def _attention_flops(first: int, factor: int):
    """Q·Kᵀ (2·H per score), softmax (5 per score) and scores·V (2·H_v per score), `factor` times (the
    backward recomputes the scores and forms four products); arguments from position `first`."""

    def flops(call, out) -> float:
        q, k, v = (getattr(a.struct_info, "shape", None) for a in call.args[first : first + 3])
        if any(s is None or len(s) != 4 or not _known(*s) for s in (q, k, v)):
            return 2.0 * elements(out)
        scores = q[0] * q[1] * q[2] * k[1]
        return float(factor * scores * (2 * q[3] + 5 + 2 * v[3]))

    return flops


def _known(*dims) -> bool:
    return all(isinstance(d, int) for d in dims)


def _infer_attention_at(ctx: InferCtx, first: int) -> TensorStructInfo:
    """TVM's rules for query, key, value (and bias) at argument positions first, first + 1, ..."""
    names = ("query", "key", "value")
    ts = [ctx.tensor(first + i) for i in range(3)]
    for i, (name, t) in enumerate(zip(names, ts)):
        if t.ndim not in (-1, 4):
            raise ctx.error(f"the {name} must be 4-D (batch size, sequence length, number of heads, "
                            f"dimension of heads), got {t.ndim}-D", first + i)
        if t.dtype and not is_float_dtype(t.dtype):
            raise ctx.error(f"the {name} must be a float tensor, got {t.dtype}", first + i)
    q, k, v = ts
    if q.dtype and any(t.dtype and t.dtype != q.dtype for t in (k, v)):
        raise ctx.error(f"query, key and value must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.shape is None or k.shape is None or v.shape is None:
        return TensorStructInfo(None, q.dtype, 4)
    (b, s, n, h), (kb, skv, kn, kh), (vb, vs, vn, hv) = q.shape, k.shape, v.shape

    def equal(a, c, what, m1, m2, arg):
        if _known(a, c) and a != c:
            raise ctx.error(f"the {m1} {what} ({a}) and the {m2} {what} ({c}) must be the same", arg)

    equal(b, kb, "batch size", "query", "key", first + 1)
    equal(b, vb, "batch size", "query", "value", first + 2)
    for other, name, arg in ((kn, "key", first + 1), (vn, "value", first + 2)):
        if _known(n, other) and (n % other if other else n):  # zero key heads only for zero query heads
            raise ctx.error(f"the query's number of heads ({n}) must be a multiple of the {name}'s ({other})", arg)
    equal(kn, vn, "number of heads", "key", "value", first + 2)
    equal(skv, vs, "sequence length", "key", "value", first + 2)
    equal(h, kh, "dimension of heads", "query", "key", first + 1)
    if len(ctx.sinfo) > first + 3:
        bias = ctx.tensor(first + 3)
        if bias.ndim not in (-1, 4):
            raise ctx.error(f"the bias must be 4-D, got {bias.ndim}-D", first + 3)
        if bias.shape is not None:
            for want, got, what in zip((b, n, s), bias.shape[:3], ("batch size", "number of heads", "sequence length")):
                if _known(want, got) and want != got and got != 1:
                    raise ctx.error(f"the bias {what} ({got}) must be the query's ({want}) or 1", first + 3)
            equal(skv, bias.shape[3], "sequence length", "key", "bias", first + 3)
    return TensorStructInfo((b, s, n, hv), q.dtype)


def _infer_attention(ctx: InferCtx) -> TensorStructInfo:
    return _infer_attention_at(ctx, 0)


def _attention_grad(call, out, g):
    back = R.grad.attention_backward(g, *call.args, **call.attrs)
    return [TupleGetItem(back, i) for i in range(len(call.args))]


attention = register(
    "relax.nn.attention",
    ("query", "key", "value"),
    ATTENTION_ATTRS,
    infer=_infer_attention,
    kernel=att_kernels.attention,
    grad=_attention_grad,
    cost=Cost("matmul", _attention_flops(0, 1)),
)
attention_bias = register(
    "relax.nn.attention_bias",
    ("query", "key", "value", "bias"),
    ATTENTION_ATTRS,
    infer=_infer_attention,
    kernel=att_kernels.attention,
    grad=_attention_grad,
    cost=Cost("matmul", _attention_flops(0, 1)),
)


def _infer_attention_backward(ctx: InferCtx) -> TupleStructInfo:
    out = _infer_attention_at(ctx, 1)
    g = ctx.tensor(0)
    if out.shape is not None and g.shape is not None and (g.shape != out.shape or g.dtype != out.dtype):
        raise ctx.error(f"output_grad must be shaped like the attention's result ({out}), got {g}", 0)
    return TupleStructInfo(tuple(ctx.sinfo[1:]))


def _composed_attention(query, key, value, *bias, scale, causal_mask, window_size, span=None):
    """attention(query, key, value[, bias]) with permute_dims, repeat, matmul, where and softmax."""
    qs, ks = query.struct_info.shape, key.struct_info.shape
    if qs is None or ks is None or not _known(*qs, *ks):
        raise GradientError(f"R.grad.attention_backward: the gradient needs static shapes, got {qs} and {ks}", span)
    if window_size is not None:
        raise GradientError("R.grad.attention_backward: window_size (sliding-window attention) is not supported", span)
    (_, s, n, h), (_, skv, nk, _) = qs, ks
    dtype = query.struct_info.dtype

    def heads_first(t):
        t = R.permute_dims(t, [0, 2, 1, 3])
        return R.repeat(t, n // nk, axis=1) if n > nk else t

    sc = (1.0 / math.sqrt(h) if h else math.inf) if scale is None else scale  # as the kernel (NaN for h = 0)
    kt = R.permute_dims(heads_first(key), [0, 1, 3, 2])
    scores = R.multiply(R.matmul(R.permute_dims(query, [0, 2, 1, 3]), kt), const(sc, dtype))
    if bias:
        scores = R.add(scores, bias[0])
    keep = att_kernels.keep_mask(s, skv, causal_mask)
    if keep is not None:
        scores = R.where(const(keep), scores, const(-np.inf, dtype))
    probs = R.nn.softmax(scores, axis=-1)
    return R.permute_dims(R.matmul(probs, heads_first(value)), [0, 2, 1, 3])


def _attention_backward_grad(call, out, g):
    form = lambda *args: _composed_attention(*args, **call.attrs, span=call.span)  # noqa: E731
    return ComposedVjp(call.args[0], call.args[1:], form)


attention_backward = register(
    "relax.grad.attention_backward",
    ("output_grad", "query", "key", "value", Arg("bias", optional=True)),
    ATTENTION_ATTRS,
    infer=_infer_attention_backward,
    kernel=att_kernels.attention_backward,
    grad=_attention_backward_grad,
    cost=Cost("matmul", _attention_flops(1, 2)),
)

# -- dropout ----------------------------------------------------------------------------------


def _to_rate(v):
    r = at.to_float(v)
    if not 0 <= r <= 1:
        raise ValueError(f"rate must be in [0, 1], got {r}")
    return r


def _infer_dropout(ctx: InferCtx) -> TupleStructInfo:
    x = ctx.float_tensor(0)
    if len(ctx.sinfo) > 1:
        key = ctx.tensor(1)
        if key.dtype and not is_int_dtype(key.dtype):
            raise ctx.error(f"the key must be an integer tensor, got dtype {key.dtype}", 1)
        if key.ndim not in (-1, 0):
            raise ctx.error(f"the key must be 0-d, got {key.ndim}-D", 1)
    return TupleStructInfo((x, x))


def _dropout_grad(call, out, g):
    # The result is x * mask / (1 - rate) (x in inference, where the mask is all ones): the gradient
    # is g * mask / (1 - rate); the mask does not depend on x. PyTorch's convention, also at rate 1
    # (everything dropped: zero gradient).
    a = call.attrs
    gy = g.fields[0] if hasattr(g, "fields") else TupleGetItem(g, 0)
    no_key = [None] * (len(call.args) - 1)  # the key (an integer) gets no gradient
    if not a["training"]:
        return [gy, *no_key]
    x = call.args[0]
    if not isinstance(x.struct_info, TensorStructInfo):
        raise GradientError("R.nn.dropout: the gradient needs a tensor input", call.span)
    keep = 1.0 - a["rate"]
    mask = TupleGetItem(out, 1)
    scaled = R.multiply(gy, mask)
    return [R.multiply(scaled, const(1.0 / keep if keep > 0 else 0.0, x.struct_info.dtype)), *no_key]


dropout = register(
    "relax.nn.dropout",
    # `key` (retrograd's, optional, written key=k): a 0-d integer tensor; the mask is then drawn from
    # (seed, key), so a training step passing its own key gets a fresh mask that is still a pure
    # function of its inputs (recomputed identically by the checkpoint pass).
    ("data", Arg("key", optional=True, keyword=True)),
    (
        Attr("rate", _to_rate, 0.5),
        # retrograd's extension (TVM's dropout has only `rate`, and legalizes to the identity):
        # training=True draws the mask from `seed` (and `key`). Both are left out of the printed call
        # at their defaults, so inference-form text stays TVM's.
        Attr("training", at.to_bool, False),
        Attr("seed", at.int_at_least("seed", 0), 0),
    ),
    infer=_infer_dropout,
    kernel=dropout_kernels.dropout,
    grad=_dropout_grad,
    print_omit={"training": False, "seed": 0},
)
