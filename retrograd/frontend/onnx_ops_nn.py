"""ONNX neural-network ops: Conv, ConvTranspose, pooling, normalizations, Dropout, Resize."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import broadcast_to, converter, reshape, dtype_of, input_value, ndim_of, scalar
from retrograd.frontend.onnx_ops_shape import static_shape
from retrograd.ir.expr import TupleGetItem
from retrograd.ops.api import R

_LAYOUT = {1: ("NCW", "OIW"), 2: ("NCHW", "OIHW"), 3: ("NCDHW", "OIDHW")}


def _pads(attrs, spatial, kernel, strides, dilations, in_shape):
    """(begin..., end...) padding, auto_pad resolved against the static input shape."""
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        pads = attrs.get("pads", [0] * (2 * spatial)) if auto == "NOTSET" else [0] * (2 * spatial)
        return tuple(int(p) for p in pads)
    begin, end = [], []
    for i in range(spatial):
        size = in_shape[2 + i]
        out = -(-size // strides[i])
        total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
        lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
        begin.append(lo)
        end.append(total - lo)
    return tuple(begin + end)


def _conv_operands(inputs, attrs):
    """Conv's and ConvTranspose's shared reading: data, weight, optional bias, the spatial rank, kernel,
    strides and dilations."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    spatial = ndim_of(x) - 2
    kernel = attrs.get("kernel_shape") or static_shape(w)[2:]
    strides = tuple(attrs.get("strides", [1] * spatial))
    dil = tuple(attrs.get("dilations", [1] * spatial))
    return x, w, b, spatial, kernel, strides, dil


@converter("Conv")
def _conv(g, node, inputs, attrs):
    x, w, b, spatial, kernel, strides, dil = _conv_operands(inputs, attrs)
    pads = _pads(attrs, spatial, kernel, strides, dil, static_shape(x))
    fn = {1: R.nn.conv1d, 2: R.nn.conv2d, 3: R.nn.conv3d}.get(spatial)
    if fn is None:
        raise UnsupportedError(f"Conv with {spatial} spatial dims")
    y = g.emit(fn(x, w, strides=strides, padding=pads, dilation=dil, groups=int(attrs.get("group", 1))))
    if b is not None:
        y = R.add(y, reshape(b, (1, -1) + (1,) * spatial))
    return y


@converter("ConvTranspose")
def _conv_transpose(g, node, inputs, attrs):
    x, w, b, spatial, kernel, strides, dil = _conv_operands(inputs, attrs)
    outpad = list(attrs.get("output_padding", [0] * spatial))
    in_shape = static_shape(x)
    if "output_shape" in attrs:
        want = attrs["output_shape"][-spatial:]
        pads_b, pads_e = [], []
        for i in range(spatial):
            total = strides[i] * (in_shape[2 + i] - 1) + outpad[i] + ((kernel[i] - 1) * dil[i] + 1) - want[i]
            lo = total // 2 if attrs.get("auto_pad", "NOTSET") != "SAME_UPPER" else total - total // 2
            if attrs.get("auto_pad", "NOTSET") in ("NOTSET", "SAME_UPPER"):
                lo = total - total // 2
            pads_b.append(lo)
            pads_e.append(total - lo)
        pads = tuple(pads_b + pads_e)
    elif attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
        pads_b, pads_e = [], []
        for i in range(spatial):
            want = in_shape[2 + i] * strides[i]
            total = strides[i] * (in_shape[2 + i] - 1) + outpad[i] + ((kernel[i] - 1) * dil[i] + 1) - want
            lo = total // 2 if attrs["auto_pad"] == "SAME_UPPER" else total - total // 2
            pads_b.append(lo)
            pads_e.append(total - lo)
        pads = tuple(pads_b + pads_e)
    else:
        pads = tuple(int(p) for p in attrs.get("pads", [0] * (2 * spatial)))
    if min(pads) < 0:
        raise UnsupportedError("negative ConvTranspose padding")
    fn = {1: R.nn.conv1d_transpose, 2: R.nn.conv2d_transpose, 3: R.nn.conv3d_transpose}.get(spatial)
    if fn is None:
        raise UnsupportedError(f"ConvTranspose with {spatial} spatial dims")
    y = g.emit(fn(x, w, strides=strides, padding=pads, output_padding=tuple(outpad), dilation=dil, groups=int(attrs.get("group", 1))))
    if b is not None:
        y = R.add(y, reshape(b, (1, -1) + (1,) * spatial))
    return y


def _pool(g, node, inputs, attrs, kind):
    x = inputs[0]
    spatial = ndim_of(x) - 2
    kernel = tuple(attrs["kernel_shape"])
    strides = tuple(attrs.get("strides", [1] * spatial))
    dil = tuple(attrs.get("dilations", [1] * spatial))
    pads = _pads(attrs, spatial, kernel, strides, dil, static_shape(x))
    ceil = bool(attrs.get("ceil_mode", 0))
    fns = {"max": (R.nn.max_pool1d, R.nn.max_pool2d, R.nn.max_pool3d), "avg": (R.nn.avg_pool1d, R.nn.avg_pool2d, R.nn.avg_pool3d)}
    if spatial not in (1, 2, 3):
        raise UnsupportedError(f"pooling with {spatial} spatial dims")
    kw = dict(pool_size=kernel, strides=strides, dilation=dil, padding=pads, ceil_mode=ceil, layout=_LAYOUT[spatial][0])
    if kind == "avg":
        kw["count_include_pad"] = bool(attrs.get("count_include_pad", 0))
    return fns[kind][spatial - 1](x, **kw)


@converter("MaxPool")
def _max_pool(g, node, inputs, attrs):
    if len(node.output) > 1 and node.output[1]:
        raise UnsupportedError("MaxPool's Indices output is not supported")
    if attrs.get("storage_order", 0):
        raise UnsupportedError("MaxPool storage_order=1 is not supported")
    return _pool(g, node, inputs, attrs, "max")


@converter("AveragePool")
def _avg_pool(g, node, inputs, attrs):
    return _pool(g, node, inputs, attrs, "avg")


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(g, node, inputs, attrs):
    x = inputs[0]
    axes = tuple(range(2, ndim_of(x)))
    return (R.mean if node.op_type == "GlobalAveragePool" else R.max)(x, axis=axes, keepdims=True)


@converter("LpPool")
def _lp_pool(g, node, inputs, attrs):
    x = inputs[0]
    p = float(attrs.get("p", 2))
    ax = g.emit(R.power(R.abs(x), scalar(g, p, x)))
    attrs = dict(attrs, count_include_pad=1)
    avg = g.emit(_pool(g, node, [ax], attrs, "avg"))
    n = float(np.prod(attrs["kernel_shape"]))
    return R.power(R.multiply(avg, scalar(g, n, x)), scalar(g, 1.0 / p, x))


@converter("BatchNormalization")
def _batch_norm(g, node, inputs, attrs):
    x, scale, bias, mean, var = inputs
    g.buffers.update((mean, var))
    eps, training = float(attrs.get("epsilon", 1e-5)), bool(attrs.get("training_mode", 0))
    # ONNX's training mode normalizes by the batch's mean and population variance; its running statistics
    # move towards them, `momentum` weighting the old ones: relax's batch_norm with momentum 1 - m. One
    # batch_norm call, so that training (training/buffers.py) can run it in inference mode for predict.
    m = 1.0 - float(attrs.get("momentum", 0.9)) if training else 0.1
    out = g.emit(R.nn.batch_norm(x, scale, bias, mean, var, axis=1, epsilon=eps, momentum=m, training=training))
    if not training:
        return [g.emit(TupleGetItem(out, 0))]
    g.buffer_updates.update((name, old) for name, old in zip(node.output[1:3], (mean, var)) if name)
    return [g.emit(TupleGetItem(out, i)) for i in range(3)]


@converter("LayerNormalization")
def _layer_norm(g, node, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = ndim_of(x)
    axis = int(attrs.get("axis", -1)) % nd
    eps = float(attrs.get("epsilon", 1e-5))
    axes = tuple(range(axis, nd))
    norm_shape = static_shape(x)[axis:]
    if len(node.output) > 1 and any(node.output[1:]):
        # also the mean and inverse std deviation, computed directly
        mean = g.emit(R.mean(x, axis=axes, keepdims=True))
        d = g.emit(R.subtract(x, mean))
        var = g.emit(R.mean(g.emit(R.multiply(d, d)), axis=axes, keepdims=True))
        inv = g.emit(R.rsqrt(g.emit(R.add(var, scalar(g, eps, x)))))
        y = g.emit(R.multiply(g.emit(R.multiply(d, inv)), scale))
        if bias is not None:
            y = g.emit(R.add(y, bias))
        return [y, mean, inv]
    scale = g.emit(broadcast_to(scale, norm_shape)) if static_shape(scale) != norm_shape else scale
    if bias is None:
        bias = g.const(np.zeros(norm_shape, dtype=dtype_of(x)))
    elif static_shape(bias) != norm_shape:
        bias = g.emit(broadcast_to(bias, norm_shape))
    return R.nn.layer_norm(x, scale, bias, axes=axes, epsilon=eps)


@converter("InstanceNormalization")
def _instance_norm(g, node, inputs, attrs):
    x, scale, bias = inputs
    axes = tuple(range(2, ndim_of(x)))
    return R.nn.instance_norm(x, scale, bias, channel_axis=1, axes=axes, epsilon=float(attrs.get("epsilon", 1e-5)))


@converter("GroupNormalization")
def _group_norm(g, node, inputs, attrs):
    x, scale, bias = inputs
    groups = int(attrs["num_groups"])
    c = static_shape(x)[1]
    if static_shape(scale)[0] != c:  # opset 18: one scale per group
        scale = g.emit(R.repeat(scale, repeats=c // groups, axis=0))
        bias = g.emit(R.repeat(bias, repeats=c // groups, axis=0))
    axes = tuple(range(2, ndim_of(x)))
    return R.nn.group_norm(x, scale, bias, num_groups=groups, channel_axis=1, axes=axes, epsilon=float(attrs.get("epsilon", 1e-5)))


@converter("MeanVarianceNormalization")
def _mvn(g, node, inputs, attrs):
    x = inputs[0]
    axes = tuple(attrs.get("axes", [0, 2, 3]))
    mean = g.emit(R.mean(x, axis=axes, keepdims=True))
    d = g.emit(R.subtract(x, mean))
    var = g.emit(R.mean(g.emit(R.multiply(d, d)), axis=axes, keepdims=True))
    return R.divide(d, R.add(R.sqrt(var), scalar(g, 1e-9, x)))


@converter("LpNormalization")
def _lp_norm(g, node, inputs, attrs):
    x = inputs[0]
    axis = int(attrs.get("axis", -1))
    p = int(attrs.get("p", 2))
    if p == 1:
        n = g.emit(R.sum(g.emit(R.abs(x)), axis=axis, keepdims=True))
    else:
        n = g.emit(R.sqrt(g.emit(R.sum(g.emit(R.multiply(x, x)), axis=axis, keepdims=True))))
    zero = g.emit(R.equal(n, scalar(g, 0, x)))  # a zero vector stays zero (ONNX), not 0 / 0
    return R.where(zero, scalar(g, 0, x), R.divide(x, g.emit(R.where(zero, scalar(g, 1, x), n))))


@converter("LRN")
def _lrn(g, node, inputs, attrs):
    x = inputs[0]
    size = int(attrs["size"])
    alpha, beta, bias = float(attrs.get("alpha", 1e-4)), float(attrs.get("beta", 0.75)), float(attrs.get("bias", 1.0))
    nd = ndim_of(x)
    sq = g.emit(R.multiply(x, x))
    lo, hi = (size - 1) // 2, size // 2
    padded = g.emit(R.nn.pad(sq, pad_width=(0, 0, lo, hi) + (0, 0) * (nd - 2), pad_value=0.0))
    c = static_shape(x)[1]
    acc = None
    for i in range(size):
        part = g.emit(R.strided_slice(padded, axes=(1,), begin=(i,), end=(i + c,)))
        acc = part if acc is None else g.emit(R.add(acc, part))
    den = g.emit(R.power(R.add(scalar(g, bias, x), R.multiply(acc, scalar(g, alpha / size, x))), scalar(g, beta, x)))
    return R.divide(x, den)


@converter("Dropout", values=(1, 2))
def _dropout(g, node, inputs, attrs):
    x = inputs[0]
    training = input_value(g, node, 2)
    if training is not None and bool(np.asarray(training).reshape(-1)[0]):
        if float(np.asarray(input_value(g, node, 1, attrs.get("ratio", 0.5))).reshape(-1)[0]) != 0:
            raise UnsupportedError("Dropout with training_mode=True and a non-zero ratio (random masks) is not supported")
    outs = [x]
    if len(node.output) > 1 and node.output[1]:
        outs.append(g.const(np.ones(static_shape(x), dtype=bool)))
    return outs


@converter("RMSNormalization")
def _rms_norm(g, node, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    nd = ndim_of(x)
    axes = tuple(range(int(attrs.get("axis", -1)) % nd, nd))
    ms = g.emit(R.mean(g.emit(R.multiply(x, x)), axis=axes, keepdims=True))
    inv = g.emit(R.rsqrt(g.emit(R.add(ms, scalar(g, float(attrs.get("epsilon", 1e-5)), x)))))
    return R.multiply(g.emit(R.multiply(x, inv)), scale)


def nll(g, logp, target, weight, attrs):
    """ONNX NegativeLogLikelihoodLoss on log-probabilities (N, C, d...) and targets (N, d...)."""
    ignore = attrs.get("ignore_index")
    t = target
    mask = None
    if ignore is not None:
        mask = g.emit(R.not_equal(t, scalar(g, int(ignore), t)))
        t = g.emit(R.where(mask, t, scalar(g, 0, t)))
    picked = g.emit(R.gather_elements(logp, g.emit(R.expand_dims(t, axis=1)), axis=1))
    picked = g.emit(R.squeeze(picked, axis=(1,)))
    w = g.emit(R.take(weight, t, axis=0)) if weight is not None else None
    if mask is not None:
        m = g.emit(R.astype(mask, dtype=dtype_of(logp)))
        w = m if w is None else g.emit(R.multiply(w, m))
    loss = g.emit(R.negative(picked))
    if w is not None:
        loss = g.emit(R.multiply(loss, w))
    red = attrs.get("reduction", "mean")
    if red == "none":
        return loss
    total = g.emit(R.sum(loss))
    if red == "sum":
        return total
    if w is None:
        return R.divide(total, scalar(g, int(np.prod(static_shape(t))), total))
    return R.divide(total, g.emit(R.sum(w)))


@converter("NegativeLogLikelihoodLoss")
def _nll_loss(g, node, inputs, attrs):
    return nll(g, inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None, attrs)


@converter("SoftmaxCrossEntropyLoss")
def _sce_loss(g, node, inputs, attrs):
    logp = g.emit(R.nn.log_softmax(inputs[0], axis=1))
    loss = nll(g, logp, inputs[1], inputs[2] if len(inputs) > 2 else None, attrs)
    return [loss, logp]


def _qparams(g, node, inputs, attrs, x):
    """Scale and zero point broadcast against x (per-tensor, per-axis or blocked)."""
    scale = inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    nd = ndim_of(x)
    axis = int(attrs.get("axis", 1)) % max(nd, 1)
    block = int(attrs.get("block_size", 0))

    def fit(v):
        if v is None or ndim_of(v) == 0:
            return v
        if block:
            v = g.emit(R.repeat(v, repeats=block, axis=axis))
            want = static_shape(x)[axis]
            if static_shape(v)[axis] != want:
                v = g.emit(R.strided_slice(v, axes=(axis,), begin=(0,), end=(want,)))
            return v
        if ndim_of(v) == 1 and nd > 1:
            return g.emit(reshape(v, tuple(-1 if a == axis else 1 for a in range(nd))))
        return v

    return fit(scale), fit(zp)


_QRANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535), "int32": (-2**31, 2**31 - 1)}


@converter("DequantizeLinear")
def _dequantize(g, node, inputs, attrs):
    x = inputs[0]
    scale, zp = _qparams(g, node, inputs, attrs, x)
    out_dtype = dtype_of(scale)
    xf = g.emit(R.astype(x, dtype=out_dtype if dtype_of(x) != "int32" else "float64"))
    if zp is not None:
        xf = g.emit(R.subtract(xf, g.emit(R.astype(zp, dtype=dtype_of(xf)))))
    if dtype_of(xf) != out_dtype:
        xf = g.emit(R.astype(xf, dtype=out_dtype))
    y = R.multiply(xf, scale)
    wanted = _output_dtype(attrs)
    return y if wanted in (None, out_dtype) else R.astype(g.emit(y), dtype=wanted)


def _output_dtype(attrs) -> str | None:
    """The `output_dtype` attribute (opset 21+) as a NumPy dtype name; None when absent or 0 (unset)."""
    from retrograd.frontend.onnx_import import np_dtype

    code = int(attrs.get("output_dtype", 0))
    return np_dtype(code) if code else None


@converter("QuantizeLinear")
def _quantize(g, node, inputs, attrs):
    x = inputs[0]
    scale, zp = _qparams(g, node, inputs, attrs, x)
    wanted = _output_dtype(attrs)
    out = dtype_of(zp) if zp is not None else wanted or "uint8"
    if wanted not in (None, out):
        raise UnsupportedError(f"output_dtype {wanted} differs from the zero point's {out}")
    if out not in _QRANGE:
        raise UnsupportedError(f"QuantizeLinear to {out} is not supported")
    lo, hi = _QRANGE[out]
    q = g.emit(R.round(g.emit(R.divide(g.emit(R.astype(x, dtype="float32")), g.emit(R.astype(scale, dtype="float32"))))))
    if zp is not None:
        q = g.emit(R.add(q, g.emit(R.astype(zp, dtype="float32"))))
    q = g.emit(R.minimum(R.maximum(q, g.const(lo, "float32")), g.const(hi, "float32")))
    return R.astype(q, dtype=out)
