"""Generated N-layer MLP scripts shared by the parse and gradient benchmarks."""

from __future__ import annotations


def mlp_text(layers: int, width: int = 16, batch: int = 4, *, transposed_weights: bool = False, scalar_loss: bool = False) -> str:
    """A TVMScript module: per layer matmul (of a transposed weight, if asked), bias add and relu,
    optionally followed by a sum to a scalar loss (what Gradient needs). Bindings: 3 or 4 per layer (+1)."""
    t = f'R.Tensor(({batch}, {width}), dtype="float32")'
    params = [f"x: {t}"]
    for i in range(layers):
        params.append(f'w{i}: R.Tensor(({width}, {width}), dtype="float32")')
        params.append(f'b{i}: R.Tensor(({width},), dtype="float32")')
    ret = 'R.Tensor((), dtype="float32")' if scalar_loss else t
    lines = [
        "# from tvm.script import ir as I",
        "# from tvm.script import relax as R",
        "",
        "@I.ir_module",
        "class Module:",
        "    @R.function",
        f"    def main({', '.join(params)}) -> {ret}:",
        "        with R.dataflow():",
    ]
    prev = "x"
    for i in range(layers):
        weight = f"w{i}"
        if transposed_weights:
            lines.append(f'            wt{i}: R.Tensor(({width}, {width}), dtype="float32") = R.permute_dims(w{i}, axes=None)')
            weight = f"wt{i}"
        lines.append(f"            lv{i}: {t} = R.matmul({prev}, {weight}, out_dtype=None)")
        lines.append(f"            lv{i}_b: {t} = R.add(lv{i}, b{i})")
        out = "gv" if i == layers - 1 and not scalar_loss else f"lv{i}_r"
        lines.append(f"            {out}: {t} = R.nn.relu(lv{i}_b)")
        prev = out
    if scalar_loss:
        lines.append(f'            gv: R.Tensor((), dtype="float32") = R.sum({prev}, axis=None, keepdims=False)')
    lines += ["            R.output(gv)", "        return gv"]
    return "\n".join(lines) + "\n"


# -- models of the checkpoint tests and benchmark (each ends in a scalar loss, ready for Gradient) --------------


def _module(params: list[str], body: list[str]) -> str:
    lines = [
        "# from tvm.script import ir as I",
        "# from tvm.script import relax as R",
        "",
        "@I.ir_module",
        "class Module:",
        "    @R.function",
        f"    def main({', '.join(params)}) -> R.Tensor((), dtype=\"float32\"):",
        "        with R.dataflow():",
    ]
    lines += ["            " + line for line in body]
    lines += ["            R.output(gv)", "        return gv"]
    return "\n".join(lines) + "\n"


def _t(*shape) -> str:
    return f'R.Tensor(({", ".join(str(d) for d in shape)}{"," if len(shape) == 1 else ""}), dtype="float32")'


def chain_text(layers: int, width: int = 64, batch: int = 16, op: str = "sin") -> str:
    """x -> op -> op -> ... (layers times) -> sum: the uniform chain of Griewank's Revolve."""
    t = _t(batch, width)
    body, prev = [], "x"
    for i in range(layers):
        body.append(f"h{i}: {t} = R.{op}({prev})")
        prev = f"h{i}"
    body.append(f"gv: R.Tensor((), dtype=\"float32\") = R.sum({prev}, axis=None, keepdims=False)")
    return _module([f"x: {t}"], body)


def matmul_relu_chain_text(layers: int, width: int = 64, batch: int = 16) -> str:
    """x -> (matmul w_i, relu) * layers -> sum."""
    t = _t(batch, width)
    params = [f"x: {t}"] + [f"w{i}: {_t(width, width)}" for i in range(layers)]
    body, prev = [], "x"
    for i in range(layers):
        body.append(f"m{i}: {t} = R.matmul({prev}, w{i}, out_dtype=None)")
        body.append(f"h{i}: {t} = R.nn.relu(m{i})")
        prev = f"h{i}"
    body.append(f"gv: R.Tensor((), dtype=\"float32\") = R.sum({prev}, axis=None, keepdims=False)")
    return _module(params, body)


def transformer_text(blocks: int, seq: int = 32, d: int = 32) -> str:
    """Blocks of softmax attention (q, k, v, output projections, residual) and an MLP d -> 4d -> d with
    gelu in its tanh form written with elementwise ops, and a residual add; sum as the loss."""
    t, tq, th = _t(seq, d), _t(seq, seq), _t(seq, 4 * d)
    params = [f"x: {t}"]
    body, x = [], "x"
    scale = 1.0 / d**0.5

    def c(v):
        return f'R.const({v!r}, "float32")'

    for b in range(blocks):
        params += [f"wq{b}: {_t(d, d)}", f"wk{b}: {_t(d, d)}", f"wv{b}: {_t(d, d)}", f"wo{b}: {_t(d, d)}"]
        params += [f"w1{b}: {_t(d, 4 * d)}", f"w2{b}: {_t(4 * d, d)}"]
        p = f"b{b}_"
        body += [
            f"{p}q: {t} = R.matmul({x}, wq{b}, out_dtype=None)",
            f"{p}k: {t} = R.matmul({x}, wk{b}, out_dtype=None)",
            f"{p}v: {t} = R.matmul({x}, wv{b}, out_dtype=None)",
            f"{p}kt: {_t(d, seq)} = R.permute_dims({p}k, axes=None)",
            f"{p}s: {tq} = R.matmul({p}q, {p}kt, out_dtype=None)",
            f"{p}ss: {tq} = R.multiply({p}s, {c(scale)})",
            f"{p}a: {tq} = R.nn.softmax({p}ss, axis=-1)",
            f"{p}o: {t} = R.matmul({p}a, {p}v, out_dtype=None)",
            f"{p}op: {t} = R.matmul({p}o, wo{b}, out_dtype=None)",
            f"{p}x1: {t} = R.add({x}, {p}op)",
            f"{p}h: {th} = R.matmul({p}x1, w1{b}, out_dtype=None)",
            f"{p}h2: {th} = R.multiply({p}h, {p}h)",
            f"{p}h3: {th} = R.multiply({p}h2, {p}h)",
            f"{p}i1: {th} = R.multiply({p}h3, {c(0.044715)})",
            f"{p}i2: {th} = R.add({p}h, {p}i1)",
            f"{p}i3: {th} = R.multiply({p}i2, {c(0.7978845608)})",
            f"{p}th: {th} = R.tanh({p}i3)",
            f"{p}t1: {th} = R.add({p}th, {c(1.0)})",
            f"{p}hh: {th} = R.multiply({p}h, {c(0.5)})",
            f"{p}g: {th} = R.multiply({p}hh, {p}t1)",
            f"{p}y: {t} = R.matmul({p}g, w2{b}, out_dtype=None)",
            f"{p}x2: {t} = R.add({p}x1, {p}y)",
        ]
        x = f"{p}x2"
    body.append(f"gv: R.Tensor((), dtype=\"float32\") = R.sum({x}, axis=None, keepdims=False)")
    return _module(params, body)


def resnet_text(stages: int = 2, blocks: int = 2, channels: int = 8, size: int = 16, batch: int = 2) -> str:
    """A ResNet-like CNN: a stem conv, then per stage `blocks` residual blocks (conv3x3, relu, conv3x3,
    skip add, relu) and a 2x2 max pool between stages; sum as the loss."""
    conv = 'strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype=None'
    pool = 'pool_size=[2, 2], strides=[2, 2], dilation=[1, 1], padding=[0, 0, 0, 0], ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW"'
    c, s = channels, size
    params = [f"x: {_t(batch, 3, s, s)}", f"w_stem: {_t(c, 3, 3, 3)}"]
    body = [f"stem: {_t(batch, c, s, s)} = R.nn.conv2d(x, w_stem, {conv})", f"h: {_t(batch, c, s, s)} = R.nn.relu(stem)"]
    h = "h"
    for st in range(stages):
        t = _t(batch, c, s, s)
        for b in range(blocks):
            p = f"s{st}b{b}_"
            params += [f"{p}w1: {_t(c, c, 3, 3)}", f"{p}w2: {_t(c, c, 3, 3)}"]
            body += [
                f"{p}c1: {t} = R.nn.conv2d({h}, {p}w1, {conv})",
                f"{p}r1: {t} = R.nn.relu({p}c1)",
                f"{p}c2: {t} = R.nn.conv2d({p}r1, {p}w2, {conv})",
                f"{p}sk: {t} = R.add({p}c2, {h})",
                f"{p}out: {t} = R.nn.relu({p}sk)",
            ]
            h = f"{p}out"
        if st < stages - 1:
            s //= 2
            body.append(f"pool{st}: {_t(batch, c, s, s)} = R.nn.max_pool2d({h}, {pool})")
            h = f"pool{st}"
    body.append(f"gv: R.Tensor((), dtype=\"float32\") = R.sum({h}, axis=None, keepdims=False)")
    return _module(params, body)
