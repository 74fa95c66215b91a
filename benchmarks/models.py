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

