"""What recomputing one op costs (FLOPs-like, from static struct info) and its class for the policies.

The per-op figures live here, in one table, until ops carry them as a `register(...)` property of
the frozen OpDef: then COSTS moves into each registration unchanged (not done yet).
Only ratios matter to the planner: a matmul or a conv dwarfs a pointwise op of the same output size,
so plans never recompute one to save recomputing the other.
"""

from __future__ import annotations

from math import prod

from retrograd.ir.expr import Call, Op
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo

KINDS = ("matmul", "conv", "pool", "elementwise", "view", "reduce", "other")


def elements(sinfo) -> int:
    """Number of elements of a static tensor (sum over tuple fields); 0 for non-tensors or unknown shapes."""
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None or not all(isinstance(d, int) for d in sinfo.shape):
            return 0
        return prod(sinfo.shape)
    if isinstance(sinfo, TupleStructInfo):
        return sum(elements(f) for f in sinfo.fields)
    return 0


def _shape(expr) -> tuple:
    s = expr.struct_info
    return tuple(s.shape) if isinstance(s, TensorStructInfo) and s.shape is not None else ()


def _out(call, out):
    return float(elements(out))


def _inputs(call, out):
    return float(sum(elements(a.struct_info) for a in call.args))


def _zero(call, out):
    return 0.0


def _times(k: float):
    return lambda call, out: k * elements(out)


def _matmul(call, out):
    a = _shape(call.args[0])
    k = a[-1] if a else 1
    return 2.0 * elements(out) * k


def _conv(call, out):
    w = _shape(call.args[1])
    layout = call.attrs.get("kernel_layout") or "OIHW"
    if not w or len(w) != len(layout) or "O" not in layout:
        return 2.0 * elements(out)
    # Each output element: (in_channels / groups) * kh * kw multiply-adds.
    return 2.0 * elements(out) * prod(w) / max(1, w[layout.index("O")])


def _conv_transpose(call, out):
    w = _shape(call.args[1])
    layout = call.attrs.get("kernel_layout") or "IOHW"
    if not w or len(w) != len(layout) or "I" not in layout:
        return 2.0 * elements(out)
    # Each input element is scattered into (out_channels / groups) * kh * kw outputs.
    return 2.0 * elements(call.args[0].struct_info) * prod(w) / max(1, w[layout.index("I")])


def _pool(call, out):
    window = call.attrs.get("pool_size") or (1,)
    return float(elements(out) * prod(window))


def _pool_backward(call, out):
    window = call.attrs.get("pool_size") or (1,)
    return float(elements(call.args[0].struct_info) * prod(window))


_ELEMENTWISE = (
    "add subtract multiply divide power maximum minimum equal not_equal greater greater_equal less less_equal "
    "abs negative cos sin exp log sqrt tanh sigmoid erf where astype triu tril zeros ones full zeros_like "
    "ones_like full_like nn.relu nn.silu nn.gelu concat take grad.take_backward grad.merge_sparse_rows"
).split()
_VIEWS = (
    "reshape flatten expand_dims squeeze permute_dims broadcast_to strided_slice split "
    "grad.no_grad grad.start_checkpoint grad.end_checkpoint"
).split()
_REDUCE = "sum mean variance max min cumsum collapse_sum_to collapse_sum_like".split()

# op name (without "relax.") -> (kind, cost(call, out_sinfo)).
COSTS: dict = {}
COSTS.update({name: ("elementwise", _out) for name in _ELEMENTWISE})
COSTS.update({name: ("view", _zero) for name in _VIEWS})
COSTS.update({name: ("reduce", _inputs) for name in _REDUCE})
COSTS.update(
    {
        "matmul": ("matmul", _matmul),
        "nn.conv2d": ("conv", _conv),
        "nn.conv2d_transpose": ("conv", _conv_transpose),
        "nn.max_pool2d": ("pool", _pool),
        "nn.avg_pool2d": ("pool", _pool),
        "grad.max_pool2d_backward": ("pool", _pool_backward),
        "grad.avg_pool2d_backward": ("pool", _pool_backward),
        "grad.max_pool2d_backward_grad": ("pool", _pool_backward),
        # A max, a subtraction, an exp, a sum and a division per element.
        "nn.softmax": ("reduce", _times(5.0)),
        "nn.log_softmax": ("reduce", _times(5.0)),
        "nn.nll_loss": ("reduce", _inputs),
        "nn.cross_entropy_with_logits": ("reduce", lambda call, out: 5.0 * _inputs(call, out)),
        "grad.nll_loss_backward": ("reduce", _inputs),
    }
)


def op_cost(call: Call, out_sinfo) -> tuple[str, float]:
    """(kind, cost) of one op call; unknown ops count one unit per output element, kind "other"."""
    op = call.op
    if not isinstance(op, Op):
        return "other", float(elements(out_sinfo))
    name = op.name[len("relax.") :] if op.name.startswith("relax.") else op.name
    entry = COSTS.get(name)
    if entry is None:
        return "other", float(elements(out_sinfo))
    kind, fn = entry
    return kind, float(fn(call, out_sinfo))
