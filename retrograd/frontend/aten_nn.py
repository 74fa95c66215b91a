"""ATen's neural-network composites as retrograd's fused ops (their fused gradients and kernels):
linear, convolutions, pooling, normalizations, activations, attention, embedding, dropout, losses,
padding and resampling. PyTorch's semantics are kept where TVM's frontend loses them: embedding's
padding_idx row gets no gradient, BatchNorm's running variance is updated with the unbiased batch
variance, and dropout in training draws a seeded mask."""

from __future__ import annotations

import math

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import ndim, registrar
from retrograd.frontend.aten_select import torch_abs
from retrograd.ir.expr import PrimValue, ShapeExpr, TupleGetItem, const
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


def _channel_bias(cx, y, bias, n_spatial):
    if bias is None:
        return y
    b = cx.emit(R.reshape(bias, ShapeExpr((1, -1) + (1,) * n_spatial))) if n_spatial else bias
    return R.add(cx.emit(y), b)


@op("linear")
def _linear(cx, a):
    w = a["weight"]
    y = R.matmul(a["input"], cx.emit(R.permute_dims(w, axes=[1, 0])) if ndim(w) == 2 else w)
    return y if a["bias"] is None else R.add(cx.emit(y), a["bias"])


# -- convolution --------------------------------------------------------------------------------
_CONV = {1: (R.nn.conv1d, R.nn.conv1d_transpose, "NCW", "OIW", "IOW"),
         2: (R.nn.conv2d, R.nn.conv2d_transpose, "NCHW", "OIHW", "IOHW"),
         3: (R.nn.conv3d, R.nn.conv3d_transpose, "NCDHW", "OIDHW", "IODHW")}


def _n(v, k):
    v = list(v) if isinstance(v, list | tuple) else [v]
    return v * k if len(v) == 1 else v


def _conv(cx, x, w, bias, stride, padding, dilation, groups, transposed=False, output_padding=0):
    k = ndim(w) - 2
    if k not in _CONV:
        raise UnsupportedError(f"{k}-D convolution")
    fwd, bwd, layout, klayout, tlayout = _CONV[k]
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * k
        else:  # "same": stride 1; the extra element of an even window goes after, as PyTorch
            total = [d * (s - 1) for d, s in zip(_n(dilation, k), w.struct_info.shape[2:])]
            pads = [t // 2 for t in total] + [t - t // 2 for t in total]
            return _channel_bias(cx, fwd(x, w, strides=_n(stride, k), padding=pads, dilation=_n(dilation, k),
                                         groups=groups, data_layout=layout, kernel_layout=klayout), bias, k)
    pad = _n(padding, k) * 2
    if transposed:
        y = bwd(x, w, strides=_n(stride, k), padding=pad, output_padding=_n(output_padding, k),
                dilation=_n(dilation, k), groups=groups, data_layout=layout, kernel_layout=tlayout)
    else:
        y = fwd(x, w, strides=_n(stride, k), padding=pad, dilation=_n(dilation, k), groups=groups,
                data_layout=layout, kernel_layout=klayout)
    return _channel_bias(cx, y, bias, k)


@op("conv1d", "conv2d", "conv3d")
def _conv_nd(cx, a):
    return _conv(cx, a["input"], a["weight"], a["bias"], a["stride"], a["padding"], a["dilation"], a["groups"])


@op("conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
def _conv_t(cx, a):
    return _conv(cx, a["input"], a["weight"], a["bias"], a["stride"], a["padding"], a["dilation"], a["groups"],
                 True, a["output_padding"])


@op("convolution", "_convolution")
def _convolution(cx, a):
    return _conv(cx, a["input"], a["weight"], a["bias"], a["stride"], a["padding"], a["dilation"], a["groups"],
                 bool(a["transposed"]), a["output_padding"])


# -- pooling -----------------------------------------------------------------------------------
_POOL = {1: ("NCW", R.nn.max_pool1d, R.nn.avg_pool1d, R.nn.adaptive_avg_pool1d),
         2: ("NCHW", R.nn.max_pool2d, R.nn.avg_pool2d, R.nn.adaptive_avg_pool2d),
         3: ("NCDHW", R.nn.max_pool3d, R.nn.avg_pool3d, R.nn.adaptive_avg_pool3d)}


def _pool(cx, a, kind):
    name = cx.node.target._schema.name.split("::")[1]
    k = int(name.split("pool")[1][0])
    x = a["self"]
    batched = ndim(x) == k + 2
    if not batched:
        x = cx.emit(R.expand_dims(x, axis=0))
    layout, maxp, avgp, _ = _POOL[k]
    size = _n(a["kernel_size"], k)
    stride = _n(a["stride"], k) if a["stride"] else size
    pad = _n(a["padding"], k) * 2
    if kind == "max":
        y = maxp(x, pool_size=size, strides=stride, padding=pad, dilation=_n(a["dilation"], k),
                 ceil_mode=bool(a["ceil_mode"]), layout=layout)
    else:
        if a.get("divisor_override") is not None:
            raise UnsupportedError("avg_pool with divisor_override")
        y = avgp(x, pool_size=size, strides=stride, padding=pad, ceil_mode=bool(a["ceil_mode"]),
                 count_include_pad=bool(a["count_include_pad"]), layout=layout)
    if not batched:
        y = R.squeeze(cx.emit(y), axis=[0])
    # run_decompositions() writes every max_pool2d as max_pool2d_with_indices: the values are computed, the
    # indices have no value (Converter.value names the node that reads them).
    return (y, None) if name.endswith("with_indices") else y


TABLE["max_pool1d"] = TABLE["max_pool2d"] = TABLE["max_pool3d"] = lambda cx, a: _pool(cx, a, "max")
TABLE["avg_pool1d"] = TABLE["avg_pool2d"] = TABLE["avg_pool3d"] = lambda cx, a: _pool(cx, a, "avg")
TABLE["max_pool2d_with_indices"] = TABLE["max_pool3d_with_indices"] = lambda cx, a: _pool(cx, a, "max")


@op("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max(cx, a):
    """Adaptive max pooling where each output cell's window is the same (input sizes multiples of the
    output's): max pooling with that window as kernel and stride. The indices output has no value."""
    x, out = a["self"], list(a["output_size"])
    k = len(out)
    spatial = x.struct_info.shape[-k:] if x.struct_info.shape is not None else None
    if spatial is None or any(not isinstance(s, int) or not isinstance(o, int) or s % o for s, o in zip(spatial, out)):
        raise UnsupportedError(f"adaptive max pooling of {spatial} to {out}: only input sizes that are multiples of the output's")
    window = [s // o for s, o in zip(spatial, out)]
    batched = ndim(x) == k + 2
    if not batched:
        x = cx.emit(R.expand_dims(x, axis=0))
    layout, maxp = _POOL[k][0], _POOL[k][1]
    y = maxp(x, pool_size=window, strides=window, padding=[0] * (2 * k), layout=layout)
    return (y if batched else R.squeeze(cx.emit(y), axis=[0])), None


@op("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
    "_adaptive_avg_pool3d")
def _adaptive(cx, a):
    x = a["self"]
    k = len(a["output_size"])
    batched = ndim(x) == k + 2
    if not batched:
        x = cx.emit(R.expand_dims(x, axis=0))
    layout, _, _, fn = _POOL[k]
    y = fn(x, output_size=list(a["output_size"]), layout=layout)
    return y if batched else R.squeeze(cx.emit(y), axis=[0])


# -- normalization -----------------------------------------------------------------------------
def _affine(cx, w, b, channels, dtype):
    gamma = w if w is not None else const(np.ones(channels, dtype))
    beta = b if b is not None else const(np.zeros(channels, dtype))
    return gamma, beta, w is not None, b is not None


def _batch_norm(cx, x, w, b, mean, var, training, momentum, eps):
    """(y, new running mean, new running var) with PyTorch's update: the running variance takes the
    unbiased batch variance (n / (n - 1) of the biased one the normalization uses)."""
    dt = x.struct_info.dtype
    c = x.struct_info.shape[1]
    gamma, beta, scale, center = _affine(cx, w, b, c, dt)
    if mean is None or var is None:
        if not training:
            raise UnsupportedError("batch_norm in evaluation mode without running statistics")
        mean_in, var_in = const(np.zeros(c, dt)), const(np.ones(c, dt))
    else:
        mean_in, var_in = mean, var
    if momentum is None:
        raise UnsupportedError("batch_norm with momentum=None (a cumulative average)")
    bn = cx.emit(R.nn.batch_norm(x, gamma, beta, mean_in, var_in, axis=1, epsilon=eps, momentum=momentum,
                                 training=bool(training), scale=scale, center=center))
    y = cx.emit(TupleGetItem(bn, 0))
    if not training or mean is None:
        return y, mean, var
    red = [0] + list(range(2, ndim(x)))
    n = math.prod(x.struct_info.shape[i] for i in red)
    new_mean = cx.emit(TupleGetItem(bn, 1))
    xs = cx.emit(R.grad.no_grad(x))
    bvar = cx.emit(R.variance(xs, axis=red))
    if isinstance(n, int):
        factor = const(momentum * n / max(n - 1, 1), dt)
    else:  # a symbolic batch: n counted at run time, per channel
        n = cx.emit(R.sum(cx.emit(R.ones_like(xs)), axis=red))
        factor = cx.emit(R.divide(cx.emit(R.multiply(n, const(momentum, dt))),
                                  cx.emit(R.maximum(cx.emit(R.subtract(n, const(1, dt))), const(1, dt)))))
    unbiased = cx.emit(R.multiply(bvar, factor))
    new_var = cx.emit(R.add(cx.emit(R.multiply(var, const(1.0 - momentum, dt))), unbiased))
    return y, new_mean, new_var


@op("batch_norm")
def _bn(cx, a):
    y, m, v = _batch_norm(cx, a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"],
                          a["training"], a["momentum"], a["eps"])
    if a["training"] and a["running_mean"] is not None:  # the buffers are written in place
        cx.assign(cx.node.args[3], m)
        cx.assign(cx.node.args[4], v)
    return y


@op("_native_batch_norm_legit_functional", "_native_batch_norm_legit", "native_batch_norm")
def _bn_functional(cx, a):
    y, m, v = _batch_norm(cx, a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"],
                          a["training"], a["momentum"], a["eps"])
    if cx.node.target._schema.name.endswith("functional"):
        return y, None, None, m, v
    if a["training"] and a["running_mean"] is not None:
        cx.assign(cx.node.args[3], m)
        cx.assign(cx.node.args[4], v)
    return y, None, None


@op("_native_batch_norm_legit_no_training")
def _bn_eval(cx, a):
    y, _, _ = _batch_norm(cx, a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"],
                          False, a["momentum"], a["eps"])
    return y, None, None


def _layer_norm(cx, x, shape, w, b, eps):
    k = len(shape)
    dt = x.struct_info.dtype
    gamma, beta, scale, center = _affine(cx, w, b, tuple(shape), dt)
    return R.nn.layer_norm(x, gamma, beta, axes=list(range(-k, 0)), epsilon=eps, scale=scale, center=center)


TABLE["layer_norm"] = lambda cx, a: _layer_norm(cx, a["input"], a["normalized_shape"], a["weight"], a["bias"], a["eps"])
TABLE["native_layer_norm"] = lambda cx, a: (_layer_norm(cx, a["input"], a["normalized_shape"], a["weight"], a["bias"],
                                                        a["eps"]), None, None)


@op("rms_norm")
def _rms_norm(cx, a):
    x = a["input"]
    k = len(a["normalized_shape"])
    w = a["weight"] if a["weight"] is not None else const(np.ones(tuple(a["normalized_shape"]), x.struct_info.dtype))
    eps = a["eps"] if a["eps"] is not None else float(np.finfo(x.struct_info.dtype).eps)
    return R.nn.rms_norm(x, w, axes=list(range(-k, 0)), epsilon=eps)


def _group_norm(cx, x, groups, w, b, eps):
    c = x.struct_info.shape[1]
    gamma, beta, scale, center = _affine(cx, w, b, c, x.struct_info.dtype)
    return R.nn.group_norm(x, gamma, beta, num_groups=groups, channel_axis=1, axes=list(range(2, ndim(x))),
                           epsilon=eps, scale=scale, center=center)


TABLE["group_norm"] = lambda cx, a: _group_norm(cx, a["input"], a["num_groups"], a["weight"], a["bias"], a["eps"])
TABLE["native_group_norm"] = lambda cx, a: (_group_norm(cx, a["input"], a["group"], a["weight"], a["bias"], a["eps"]),
                                            None, None)


@op("instance_norm")
def _instance_norm(cx, a):
    x = a["input"]
    if not a["use_input_stats"]:
        raise UnsupportedError("instance_norm with track_running_stats in evaluation mode")
    c = x.struct_info.shape[1]
    gamma, beta, scale, center = _affine(cx, a["weight"], a["bias"], c, x.struct_info.dtype)
    return R.nn.instance_norm(x, gamma, beta, channel_axis=1, axes=list(range(2, ndim(x))), epsilon=a["eps"],
                              scale=scale, center=center)


# -- activations -------------------------------------------------------------------------------
def _softmax(fn):
    def conv(cx, a):
        x = cx.tensor(a["self"], cx.out_dtype())
        return fn(x, axis=a["dim"] % max(ndim(x), 1))

    return conv


TABLE["softmax"] = TABLE["_softmax"] = _softmax(R.nn.softmax)
TABLE["log_softmax"] = TABLE["_log_softmax"] = _softmax(R.nn.log_softmax)


@op("gelu")
def _gelu(cx, a):
    return R.nn.gelu_tanh(a["self"]) if a.get("approximate") == "tanh" else R.nn.gelu(a["self"])


def _k(cx, v):
    return cx.tensor(v, cx.out_dtype())


TABLE["hardsigmoid"] = lambda cx, a: R.divide(cx.emit(R.clip(cx.emit(R.add(a["self"], _k(cx, 3.0))), PrimValue(0.0, cx.out_dtype()),
                                                             PrimValue(6.0, cx.out_dtype()))), _k(cx, 6.0))
TABLE["hardswish"] = lambda cx, a: R.multiply(a["self"], cx.emit(TABLE["hardsigmoid"](cx, a)))
TABLE["leaky_relu"] = lambda cx, a: R.nn.leakyrelu(a["self"], alpha=float(a["negative_slope"]))
@op("rrelu", "rrelu_with_noise", "rrelu_with_noise_functional")
def _rrelu(cx, a):
    """RReLU in eval mode: leaky ReLU with the mean slope (lower + upper) / 2. In training its slopes are drawn
    at random per element, which no op here draws: a clear error."""
    if a.get("training"):
        raise UnsupportedError("rrelu in training mode draws a random slope per element: export the model in eval "
                               "mode (model.eval()), where it is leaky_relu with the mean slope")
    y = R.nn.leakyrelu(a["self"], alpha=(float(a.get("lower", 1 / 8)) + float(a.get("upper", 1 / 3))) / 2)
    # The functional form also returns its (unchanged) noise buffer.
    return (y, a["noise"]) if cx.node.target._schema.name.endswith("functional") else y


TABLE["mish"] = lambda cx, a: R.multiply(a["self"], cx.emit(R.tanh(cx.emit(R.nn.softplus(a["self"])))))
TABLE["prelu"] = TABLE["_prelu_kernel"] = lambda cx, a: R.nn.prelu(a["self"], a["weight"], axis=1 if ndim(a["self"]) > 1 else 0)


@op("softplus")
def _softplus(cx, a):
    return R.nn.softplus(a["self"], beta=float(a["beta"]), threshold=float(a["threshold"]))


@op("elu", "celu")
def _elu(cx, a):
    x = a["self"]
    alpha = float(a["alpha"])
    in_scale = float(a.get("input_scale", 1.0)) if "input_scale" in a else (1.0 / alpha if "celu" in cx.node.target._schema.name else 1.0)
    neg = cx.emit(R.multiply(_k(cx, alpha), cx.emit(R.subtract(cx.emit(R.exp(cx.emit(R.multiply(x, _k(cx, in_scale))))), _k(cx, 1.0)))))
    y = R.where(cx.emit(R.greater(x, _k(cx, 0.0))), x, neg)
    scale = float(a.get("scale", 1.0))
    return y if scale == 1.0 else R.multiply(cx.emit(y), _k(cx, scale))


@op("glu")
def _glu(cx, a):
    x = a["self"]
    d = a["dim"] % ndim(x)
    parts = cx.emit(R.split(x, indices_or_sections=2, axis=d))
    return R.multiply(TupleGetItem(parts, 0), cx.emit(R.sigmoid(cx.emit(TupleGetItem(parts, 1)))))


# -- dropout -----------------------------------------------------------------------------------
def _dropout(cx, x, p, train):
    if not train or p == 0:
        return x, None
    d = cx.emit(R.nn.dropout(x, rate=float(p), training=True, seed=cx.next_seed()))
    return TupleGetItem(d, 0), TupleGetItem(d, 1)


TABLE["dropout"] = TABLE["feature_dropout"] = TABLE["alpha_dropout"] = lambda cx, a: _dropout(cx, a["input"], a["p"], a["train"])[0]


@op("native_dropout")
def _native_dropout(cx, a):
    y, mask = _dropout(cx, a["input"], a["p"], a["train"] if a["train"] is not None else True)
    if mask is None:
        mask = R.ones_like(a["input"], dtype="bool")
    return y, R.astype(mask, dtype="bool")


@op("bernoulli")
def _bernoulli(cx, a):
    """A seeded draw: dropout's keep-mask of ones at rate 1 - p is 1 with probability p."""
    p = a.get("p")
    if not isinstance(p, float | int):
        raise UnsupportedError("bernoulli with a tensor of probabilities")
    dt = cx.out_dtype()
    ones = cx.emit(R.ones(cx.out_shape(), dtype=dt))
    return TupleGetItem(cx.emit(R.nn.dropout(ones, rate=1.0 - float(p), training=True, seed=cx.next_seed())), 1)


# -- embedding ---------------------------------------------------------------------------------
@op("embedding")
def _embedding(cx, a):
    """weight[indices]; with padding_idx the rows read at that index pass no gradient back (PyTorch)."""
    w, idx, pad = a["weight"], a["indices"], a["padding_idx"]
    if a["scale_grad_by_freq"]:
        raise UnsupportedError("embedding with scale_grad_by_freq=True")
    rows = cx.emit(R.take(w, idx, axis=0, mode="fast"))
    if pad is None or pad < 0:
        return rows
    at_pad = cx.emit(R.expand_dims(cx.emit(R.equal(idx, const(pad, idx.struct_info.dtype))), axis=-1))
    return R.where(at_pad, cx.emit(R.grad.no_grad(rows)), rows)


@op("_embedding_bag", "embedding_bag")
def _embedding_bag(cx, a):
    """Bags of rows: bag b holds indices[offsets[b]:offsets[b + 1]]; a (bags, indices) membership matrix
    (without the padding index's entries) sums them by a matmul, averages (an empty bag is zero) or
    takes their maximum. Only the first output (the bags) has a value."""
    w, idx, offsets, mode = a["weight"], a["indices"], a["offsets"], int(a["mode"])
    if a["scale_grad_by_freq"]:
        raise UnsupportedError("embedding_bag with scale_grad_by_freq=True")
    n = idx.struct_info.shape[0] if ndim(idx) == 1 else None
    if not isinstance(n, int) or ndim(offsets) != 1 or not isinstance(offsets.struct_info.shape[0], int):
        raise UnsupportedError("embedding_bag needs 1-D indices and offsets of static lengths")
    bags = offsets.struct_info.shape[0] - (1 if a["include_last_offset"] else 0)
    dt = w.struct_info.dtype
    rows = cx.emit(R.take(w, idx, axis=0, mode="fast"))
    psw = a["per_sample_weights"]
    if psw is not None:
        rows = cx.emit(R.multiply(rows, cx.emit(R.expand_dims(psw, axis=-1))))
    pos = const(np.arange(n, dtype="int64"))
    starts = cx.emit(R.astype(offsets, dtype="int64"))
    started = cx.emit(R.less_equal(cx.emit(R.expand_dims(starts, axis=0)), cx.emit(R.expand_dims(pos, axis=-1))))
    bag_of = cx.emit(R.subtract(cx.emit(R.sum(cx.emit(R.astype(started, dtype="int64")), axis=[1])), const(1, "int64")))
    member = cx.emit(R.equal(cx.emit(R.expand_dims(const(np.arange(bags, dtype="int64")), axis=-1)),
                             cx.emit(R.expand_dims(bag_of, axis=0))))
    pad = a.get("padding_idx")
    if pad is not None and pad >= 0:
        kept = cx.emit(R.not_equal(idx, const(pad, idx.struct_info.dtype)))
        member = cx.emit(R.logical_and(member, cx.emit(R.expand_dims(kept, axis=0))))
    weights = cx.emit(R.astype(member, dtype=dt))
    count = cx.emit(R.sum(weights, axis=[1], keepdims=True))
    if mode == 2:
        inside = cx.emit(R.expand_dims(member, axis=-1))
        masked = cx.emit(R.where(inside, cx.emit(R.expand_dims(rows, axis=0)), const(-np.inf, dt)))
        out = cx.emit(R.max(masked, axis=[1]))
        out = R.where(cx.emit(R.greater(count, const(0, dt))), out, const(0, dt))
    else:
        out = cx.emit(R.matmul(weights, rows))
        if mode == 1:
            out = R.divide(out, cx.emit(R.maximum(count, const(1, dt))))
    return out, None, None, None


@op("grid_sampler_2d")
def _grid_sampler_2d(cx, a):
    """F.grid_sample, bilinear with zero or border padding (TVM's R.image.grid_sample; its grid is (N, 2, H, W))."""
    mode, padding = int(a["interpolation_mode"]), int(a["padding_mode"])
    if mode != 0 or padding not in (0, 1):
        names = ("bilinear", "nearest", "bicubic"), ("zeros", "border", "reflection")
        raise UnsupportedError(f"grid_sample with mode={names[0][mode]!r}, padding_mode={names[1][padding]!r} "
                               "(bilinear with zeros or border padding is supported)")
    grid = cx.emit(R.permute_dims(a["grid"], axes=[0, 3, 1, 2]))
    return R.image.grid_sample(a["input"], grid, method="bilinear", padding_mode=("zeros", "border")[padding],
                               align_corners=bool(a["align_corners"]))


# -- attention ---------------------------------------------------------------------------------
@op("scaled_dot_product_attention")
def _sdpa(cx, a):
    """PyTorch's (B, H, S, D) attention as retrograd's (B, S, H, D) one; a boolean mask becomes an
    additive bias of 0 / -inf, a causal one TopLeft."""
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    if a["dropout_p"] or ndim(q) != 4:
        return _sdpa_composed(cx, a)
    if a.get("enable_gqa"):
        pass  # retrograd's attention takes fewer key / value heads (a divisor of the query's) as GQA
    t = [cx.emit(R.permute_dims(z, axes=[0, 2, 1, 3])) for z in (q, k, v)]
    kw = {"scale": a["scale"], "causal_mask": "TopLeft" if a["is_causal"] else None}
    if mask is None:
        out = cx.emit(R.nn.attention(*t, **kw))
    else:
        dt = q.struct_info.dtype
        if mask.struct_info.dtype == "bool":
            mask = cx.emit(R.where(mask, const(0.0, dt), const(-np.inf, dt)))
        b, h, s = (q.struct_info.shape[i] for i in (0, 1, 2))
        skv = k.struct_info.shape[2]
        while ndim(mask) < 4:
            mask = cx.emit(R.expand_dims(mask, axis=0))
        ms = mask.struct_info.shape
        if ms[2] != s or ms[3] != skv:
            mask = cx.emit(R.broadcast_to(mask, ShapeExpr((ms[0], ms[1], s, skv))))
        out = cx.emit(R.nn.attention_bias(*t, mask, **kw))
    return R.permute_dims(out, axes=[0, 2, 1, 3])


def _sdpa_composed(cx, a):
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    dt = q.struct_info.dtype
    d = q.struct_info.shape[-1]
    scale = a["scale"] if a["scale"] is not None else 1.0 / math.sqrt(d)
    n = ndim(k)
    nq, nk = q.struct_info.shape[1] if n == 4 else 1, k.struct_info.shape[1] if n == 4 else 1
    if n == 4 and isinstance(nq, int) and isinstance(nk, int) and nq != nk:  # grouped-query attention
        k = cx.emit(R.repeat(k, repeats=nq // nk, axis=1))
    kt = cx.emit(R.permute_dims(k, axes=list(range(n - 2)) + [n - 1, n - 2]))
    s = cx.emit(R.multiply(cx.emit(R.matmul(q, kt)), const(scale, dt)))
    if mask is not None:
        s = cx.emit(R.where(mask, s, const(-np.inf, dt)) if mask.struct_info.dtype == "bool" else R.add(s, mask))
    if a["is_causal"]:
        ls, lk = q.struct_info.shape[-2], k.struct_info.shape[-2]
        s = cx.emit(R.where(const(np.tril(np.ones((ls, lk), bool))), s, const(-np.inf, dt)))
    probs = cx.emit(R.nn.softmax(s, axis=-1))
    if a["dropout_p"]:  # attention dropout (training): a seeded mask over the probabilities
        probs = cx.emit(_dropout(cx, probs, a["dropout_p"], True)[0])
    if n == 4 and isinstance(nq, int) and isinstance(nk, int) and nq != nk:
        v = cx.emit(R.repeat(v, repeats=nq // nk, axis=1))
    return R.matmul(probs, v)


# -- losses ------------------------------------------------------------------------------------
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _nll(cx, logp, target, weight, reduction, ignore_index):
    args = (logp, target) if weight is None else (logp, target, weight)
    return R.nn.nll_loss(*args, reduction=_REDUCTIONS[reduction], ignore_index=ignore_index)


TABLE["nll_loss"] = TABLE["nll_loss_nd"] = TABLE["nll_loss2d"] = lambda cx, a: _nll(
    cx, a["self"], a["target"], a["weight"], a["reduction"], a["ignore_index"])
TABLE["nll_loss_forward"] = TABLE["nll_loss2d_forward"] = lambda cx, a: (_nll(
    cx, a["self"], a["target"], a["weight"], a["reduction"], a["ignore_index"]), None)


@op("cross_entropy_loss")
def _cross_entropy(cx, a):
    x, target = a["self"], a["target"]
    if target.struct_info.dtype.startswith("float"):
        raise UnsupportedError("cross_entropy with class probabilities as the target")
    c_axis = 1 if ndim(x) > 1 else 0
    logp = cx.emit(R.nn.log_softmax(x, axis=c_axis))
    loss = _nll(cx, logp, target, a["weight"], a["reduction"], a["ignore_index"])
    eps = float(a["label_smoothing"])
    if eps == 0.0:
        return loss
    if a["weight"] is not None:
        raise UnsupportedError("cross_entropy with both label_smoothing and class weights")
    dt = x.struct_info.dtype
    c = x.struct_info.shape[c_axis]
    keep = cx.emit(R.astype(cx.emit(R.not_equal(target, const(a["ignore_index"], target.struct_info.dtype))), dtype=dt))
    smooth = cx.emit(R.multiply(cx.emit(R.negative(cx.emit(R.sum(logp, axis=[c_axis])))), keep))
    red = _REDUCTIONS[a["reduction"]]
    if red == "sum":
        smooth = cx.emit(R.sum(smooth))
    elif red == "mean":
        smooth = cx.emit(R.divide(cx.emit(R.sum(smooth)), cx.emit(R.sum(keep))))
    loss = cx.emit(R.multiply(cx.emit(loss), const(1.0 - eps, dt)))
    return R.add(loss, cx.emit(R.multiply(smooth, const(eps / c, dt))))


def _pointwise_loss(fn):
    def conv(cx, a):
        d = cx.emit(R.subtract(a["self"], a["target"]))
        e = cx.emit(fn(cx, d))
        red = _REDUCTIONS[a["reduction"]]
        return e if red == "none" else (R.mean(e) if red == "mean" else R.sum(e))

    return conv


TABLE["mse_loss"] = _pointwise_loss(lambda cx, d: R.multiply(d, d))
TABLE["l1_loss"] = _pointwise_loss(lambda cx, d: torch_abs(d))


# -- padding and resampling -------------------------------------------------------------------
def _pad(cx, x, pad, mode, value):
    n = ndim(x)
    widths = [0] * (2 * n)
    for i in range(len(pad) // 2):  # PyTorch lists the last axis first
        axis = n - 1 - i
        widths[2 * axis], widths[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    modes = {"constant": "constant", "reflect": "reflect", "replicate": "replicate", "circular": "circular"}
    return R.nn.pad(x, pad_width=widths, pad_mode=modes[mode], pad_value=float(value or 0.0))


TABLE["pad"] = lambda cx, a: _pad(cx, a["self"], a["pad"], a["mode"], a["value"])
TABLE["constant_pad_nd"] = lambda cx, a: _pad(cx, a["self"], a["pad"], "constant", a["value"])
for _m, _name in (("reflect", "reflection_pad"), ("replicate", "replication_pad")):
    for _d in (1, 2, 3):
        TABLE[f"{_name}{_d}d"] = (lambda m: lambda cx, a: _pad(cx, a["self"], a["padding"], m, 0.0))(_m)


def _resize(cx, a, method):
    x = a["input"] if "input" in a else a["self"]
    k = ndim(x) - 2
    if k != 2:
        raise UnsupportedError(f"{k}-D interpolation (retrograd resizes 2-D images here)")
    size = cx.shape(cx.meta().shape[2:])
    mode = "align_corners" if a.get("align_corners") else ("asymmetric" if method == "nearest_neighbor" else "half_pixel")
    scales = a.get("scale_factors")
    if scales is not None and method != "nearest_neighbor" and not a.get("align_corners"):
        # PyTorch then maps output to input coordinates by 1 / scale, not by in / out: the same map exactly
        # when out = in * scale (an integer scale, say), which is when the size-based resize is taken.
        ins = x.struct_info.shape[2:]
        if not all(isinstance(i, int) and isinstance(o, int) and i * s == o
                   for i, o, s in zip(ins, cx.meta().shape[2:], scales)):
            raise UnsupportedError(f"bilinear interpolation by scale factors {tuple(scales)} whose output size is "
                                   "not the input size times the factor (recompute_scale_factor=False); give a size")
    return R.image.resize2d(x, ShapeExpr(size), method=method, coordinate_transformation_mode=mode,
                            rounding_method="floor" if method == "nearest_neighbor" else "round")


TABLE["upsample_nearest2d"] = lambda cx, a: _resize(cx, a, "nearest_neighbor")
TABLE["upsample_bilinear2d"] = lambda cx, a: _resize(cx, a, "linear")
TABLE["pixel_shuffle"] = lambda cx, a: R.nn.pixel_shuffle(a["self"], upscale_factor=a["upscale_factor"])

