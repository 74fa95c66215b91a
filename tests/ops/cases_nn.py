"""OpCases for the nn.* and grad.* ops: small shapes covering every attribute, tie-free max-pooling inputs."""

from __future__ import annotations

import numpy as np

from ops.op_case import OpCase, T
from retrograd.ir.struct_info import TensorStructInfo


def tie_free(*shape, seed=0):
    """Distinct values at least 0.02 apart, shuffled: finite differences never flip a window's maximum."""
    n = int(np.prod(shape))
    values = np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return np.random.default_rng(seed).permutation(values).reshape(shape).astype("float32")


def ints(values, dtype="int64"):
    return np.array(values, dtype=dtype)


_POOL_VARIANTS = [
    dict(pool_size=(2, 2), strides=(2, 2)),
    dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1), ceil_mode=True),
    dict(pool_size=(2, 3), strides=(2, 1), padding=(0, 1, 1, 0), ceil_mode=False),
    dict(pool_size=(2, 2), strides=(1, 1), dilation=(2, 2)),
    dict(pool_size=(3, 2), strides=(2, 2), padding=(1, 0, 0, 1), ceil_mode=True, dilation=(1, 2)),
]
_AVG_EXTRA = [
    dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), count_include_pad=True),
    dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1), ceil_mode=True, count_include_pad=True),
    dict(pool_size=(2, 2), strides=(2, 2), layout="NHWC"),
]

ACTIVATION_CASES = [
    OpCase("relax.nn.relu", [T(3, 4)]),
    OpCase("relax.nn.relu", [T(2, 3, 4, dtype="float64")]),
    OpCase("relax.nn.silu", [T(3, 4)], low=-3.0, high=3.0),
    OpCase("relax.nn.gelu", [T(3, 4)], low=-3.0, high=3.0),
    OpCase("relax.erf", [T(5,)], low=-2.0, high=2.0),
    OpCase("relax.nn.softmax", [T(3, 5)]),
    OpCase("relax.nn.softmax", [T(2, 3, 4)], {"axis": 1}),
    OpCase("relax.nn.log_softmax", [T(3, 5)]),
    OpCase("relax.nn.log_softmax", [T(4, 3)], {"axis": 0}),
    OpCase("relax.nn.cross_entropy_with_logits", [T(3, 5), T(3, 5)]),
    OpCase("relax.nn.cross_entropy_with_logits", [T(5,), T(5,)]),
]

LOSS_CASES = [
    OpCase("relax.nn.nll_loss", [T(4, 5), ints([0, 3, 4, 1])], differentiable_args=[0]),
    OpCase("relax.nn.nll_loss", [T(4, 5), ints([0, 3, 4, 1])], {"reduction": "sum"}, differentiable_args=[0]),
    OpCase("relax.nn.nll_loss", [T(4, 5), ints([0, 3, 4, 1])], {"reduction": "none"}, differentiable_args=[0]),
    OpCase(
        "relax.nn.nll_loss",
        [T(4, 5), ints([2, 3, 2, 0]), np.array([0.5, 1.0, 2.0, 0.25, 1.5], "float32")],
        {"reduction": "mean"},
        differentiable_args=[0],
    ),
    # ignore_index hits: two of the five targets are ignored.
    OpCase("relax.nn.nll_loss", [T(5, 3), ints([1, -100, 2, -100, 0])], differentiable_args=[0]),
    OpCase(
        "relax.nn.nll_loss",
        [T(5, 3), ints([1, 2, 2, 0, 1]), np.array([1.0, 2.0, 0.5], "float32")],
        {"reduction": "sum", "ignore_index": 2},
        differentiable_args=[0],
    ),
    # spatial (N, C, d1) with targets (N, d1)
    OpCase("relax.nn.nll_loss", [T(2, 4, 3), ints([[0, 1, 3], [2, 2, 0]])], {"reduction": "none"}, differentiable_args=[0]),
    OpCase(
        "relax.nn.nll_loss",
        [T(2, 4, 3), ints([[0, 1, 3], [2, 2, 0]], "int32"), np.array([1.0, 0.5, 2.0, 1.0], "float32")],
        differentiable_args=[0],
    ),
    # no-batch form: (C,) with a scalar target
    OpCase("relax.nn.nll_loss", [T(5,), ints(3)], differentiable_args=[0]),
    OpCase("relax.nn.nll_loss", [T(5,), ints(1)], {"reduction": "none"}, differentiable_args=[0]),
]

CONV_CASES = [
    OpCase("relax.nn.conv2d", [T(2, 3, 6, 6), T(4, 3, 3, 3)]),
    OpCase("relax.nn.conv2d", [T(1, 2, 7, 7), T(3, 2, 3, 3)], {"strides": (2, 2), "padding": (1, 1)}),
    # rows the strides never read (7 + 0 - 3) % 2: the weight gradient crops
    OpCase("relax.nn.conv2d", [T(1, 2, 8, 7), T(2, 2, 3, 2)], {"strides": (2, 3)}),
    OpCase("relax.nn.conv2d", [T(2, 4, 6, 5), T(6, 2, 3, 3)], {"groups": 2, "padding": (1, 0, 2, 1)}),
    OpCase("relax.nn.conv2d", [T(1, 2, 9, 9), T(2, 2, 3, 3)], {"dilation": (2, 2), "strides": (2, 2), "padding": (2, 2)}),
    OpCase("relax.nn.conv2d", [T(1, 4, 5, 5), T(4, 1, 2, 2)], {"groups": 4, "strides": (2, 2), "padding": (1, 1, 0, 0)}),
    OpCase("relax.nn.conv2d", [T(2, 5, 5, 3), T(2, 2, 3, 4)], {"data_layout": "NHWC", "kernel_layout": "HWIO"}),
    OpCase("relax.nn.conv2d", [T(1, 3, 5, 5), T(2, 3, 2, 2)], {"out_dtype": "float64", "padding": (1, 1)}),
    OpCase("relax.nn.conv2d_transpose", [T(1, 3, 4, 4), T(3, 2, 3, 3)]),
    OpCase("relax.nn.conv2d_transpose", [T(1, 4, 3, 3), T(2, 2, 3, 2)], {"data_layout": "NHWC", "kernel_layout": "HWIO", "out_layout": "NCHW", "strides": (2, 2)}),
    OpCase("relax.nn.conv2d_transpose", [T(2, 2, 3, 3), T(2, 3, 3, 3)], {"strides": (2, 2), "padding": (1, 1), "output_padding": (1, 1)}),
    OpCase("relax.nn.conv2d_transpose", [T(1, 4, 3, 4), T(4, 2, 2, 3)], {"strides": (2, 3), "groups": 2, "output_padding": (1, 2)}),
    OpCase("relax.nn.conv2d_transpose", [T(1, 2, 3, 3), T(2, 2, 3, 3)], {"dilation": (2, 2), "strides": (2, 2), "padding": (1, 2, 0, 1)}),
]

POOL_CASES = (
    [OpCase("relax.nn.max_pool2d", [tie_free(2, 2, 7, 7, seed=i)], v, differentiable_args=[0]) for i, v in enumerate(_POOL_VARIANTS)]
    + [OpCase("relax.nn.max_pool2d", [tie_free(1, 6, 6, 2, seed=9)], dict(pool_size=(2, 2), strides=(2, 2), layout="NHWC"), differentiable_args=[0])]
    + [OpCase("relax.nn.avg_pool2d", [T(2, 2, 7, 7)], v) for v in _POOL_VARIANTS + _AVG_EXTRA]
)

GRAD_CASES = [
    # no_grad stops the gradient by definition: finite differences would see the identity.
    OpCase("relax.grad.no_grad", [T(3, 4)], differentiable_args=[]),
    OpCase("relax.grad.start_checkpoint", [T(3, 4)]),
    OpCase("relax.grad.end_checkpoint", [T(3, 4)]),
    OpCase("relax.grad.nll_loss_backward", [T(), T(4, 5), ints([0, 3, 4, 1])], differentiable_args=[0]),
    OpCase(
        "relax.grad.nll_loss_backward",
        [T(5), T(5, 3), ints([1, -100, 2, 0, 1]), np.array([1.0, 2.0, 0.5], "float32")],
        {"reduction": "none"},
        differentiable_args=[0],
    ),
    OpCase(
        "relax.grad.nll_loss_backward",
        [T(), T(2, 4, 3), ints([[0, 1, 3], [2, 2, 0]]), np.array([1.0, 0.5, 2.0, 1.0], "float32")],
        {"reduction": "mean", "ignore_index": 2},
        differentiable_args=[0],
    ),
    OpCase("relax.grad.nll_loss_backward", [T(), T(5,), ints(3)], {"reduction": "sum"}, differentiable_args=[0]),
    OpCase("relax.grad.max_pool2d_backward", [T(2, 2, 4, 4), tie_free(2, 2, 7, 7, seed=1)], _POOL_VARIANTS[1], differentiable_args=[0]),
    OpCase("relax.grad.max_pool2d_backward", [T(2, 2, 4, 4), tie_free(2, 2, 7, 7, seed=2)], _POOL_VARIANTS[2], differentiable_args=[0]),
    OpCase("relax.grad.max_pool2d_backward", [T(2, 2, 4, 4), tie_free(2, 2, 7, 7, seed=3)], _POOL_VARIANTS[5], differentiable_args=[0]),
    # Ours only (the adjoint of max_pool2d_backward in its output_grad, for second-order gradients).
    OpCase("relax.grad.max_pool2d_backward_grad", [T(2, 2, 7, 7), tie_free(2, 2, 7, 7, seed=4)], _POOL_VARIANTS[1], differentiable_args=[0], tvm=False),
    OpCase("relax.grad.max_pool2d_backward_grad", [T(2, 2, 7, 7), tie_free(2, 2, 7, 7, seed=5)], _POOL_VARIANTS[4], differentiable_args=[0], tvm=False),
    OpCase("relax.grad.avg_pool2d_backward", [T(2, 2, 4, 4), T(2, 2, 7, 7)], _POOL_VARIANTS[2] | {"count_include_pad": True}, differentiable_args=[0]),
    OpCase("relax.grad.avg_pool2d_backward", [T(2, 2, 4, 6), T(2, 2, 7, 7)], _POOL_VARIANTS[3], differentiable_args=[0]),
    # duplicate and negative indices (-1 and 4 are the same row)
    OpCase("relax.grad.take_backward", [T(6, 3), T(5, 3), ints([0, 2, 2, -1, 4, 2])], {"axis": 0}, differentiable_args=[0]),
    OpCase("relax.grad.take_backward", [T(4, 2, 2), T(4, 5), ints([[1, -2], [1, 0]])], {"axis": 1}, differentiable_args=[0]),
    OpCase("relax.grad.take_backward", [T(4,), T(2, 3), ints([5, 0, 5, -6], "int32")], differentiable_args=[0]),
]

# Symbolic dims: inference only (TVM's simplified spelling of each output dim).
# Convolution gradients need static channel and spatial dims (output_padding, crops): a symbolic batch is fine.
SYMBOLIC_CASES = [
    OpCase("relax.nn.conv2d", [T("n", 4, "h", "w"), T(6, 2, 3, 3)], {"strides": (2, 2), "padding": (1, 1), "groups": 2}, differentiable_args=[]),
    OpCase("relax.nn.conv2d", [T("n", 4, "h", "w"), T(6, 4, 3, 3)], differentiable_args=[]),
    OpCase("relax.nn.conv2d", [T("n", 4, 7, 6), T(6, 2, 3, 3)], {"strides": (2, 2), "groups": 2}),
    OpCase("relax.nn.conv2d_transpose", [T("n", 4, "h", "w"), T(4, 3, 3, 3)], {"strides": (2, 2)}, differentiable_args=[]),
    OpCase("relax.nn.conv2d_transpose", [T("n", 4, "h", 5), T(4, 3, 3, 3)], {"padding": (1, 1)}, differentiable_args=[]),
    OpCase("relax.nn.conv2d_transpose", [T("n", 4, 3, 3), T(4, 1, 3, 3)], {"strides": (2, 2), "groups": 2, "output_padding": (1, 0)}),
    OpCase("relax.nn.max_pool2d", [T("n", 3, "h", "w")], {"pool_size": (2, 2), "strides": (2, 2), "padding": (1, 1)}),
    OpCase("relax.nn.avg_pool2d", [T("n", 3, "h", "w")], {"pool_size": (3, 3), "padding": (1, 1)}),
    # drawn targets fall in [low, high) = [0, 7)
    OpCase("relax.nn.nll_loss", [T("n", 7), T("n", dtype="int64")], {"reduction": "none"}, low=0.0, high=7.0),
    OpCase("relax.nn.softmax", [T("n", 7)]),
    OpCase("relax.grad.take_backward", [T("k", 3), T(10, 3), T("k", dtype="int64")], {"axis": 0}),
]


def _named(cases: list[OpCase]) -> list[OpCase]:
    """Give each case a readable, unique id: its input shapes and attributes."""
    seen: dict[str, int] = {}
    for c in cases:
        shapes = "-".join(
            "x".join(str(d) for d in (x.shape if isinstance(x, TensorStructInfo) else np.shape(x))) or "s" for x in c.inputs
        )
        attrs = ",".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in c.attrs.items())
        name = f"{shapes}{'-' + attrs if attrs else ''}"
        seen[c.op + name] = seen.get(c.op + name, 0) + 1
        c.name = name if seen[c.op + name] == 1 else f"{name}-{seen[c.op + name]}"
    return cases


CASES: list[OpCase] = _named(ACTIVATION_CASES + LOSS_CASES + CONV_CASES + POOL_CASES + GRAD_CASES + SYMBOLIC_CASES)

# New op families keep their cases in their own files; every shared test runs them through CASES.
from ops.cases_nn_attention import CASES as _ATTENTION_CASES  # noqa: E402
from ops.cases_nn_conv_nd import CASES as _CONV_ND_CASES  # noqa: E402
from ops.cases_nn_image import CASES as _IMAGE_CASES  # noqa: E402
from ops.cases_nn_norm import CASES as _NORM_CASES  # noqa: E402
from ops.cases_nn_pointwise import CASES as _POINTWISE_CASES  # noqa: E402

CASES += _named(_NORM_CASES + _ATTENTION_CASES + _POINTWISE_CASES + _CONV_ND_CASES + _IMAGE_CASES)
