"""OpCases for nn.pad (every mode, negative widths), grad.pad_backward and the pointwise activations."""

from __future__ import annotations

import numpy as np

from ops.op_case import OpCase, T


def away_from_zero(*shape, seed=0):
    """Values in +-[0.05, 1]: finite differences never cross a kink at 0."""
    rng = np.random.default_rng(seed)
    v = rng.uniform(0.05, 1.0, shape) * rng.choice([-1.0, 1.0], shape)
    return v.astype("float32")


PAD_CASES = [
    OpCase("relax.nn.pad", [T(2, 3)], {"pad_width": [1, 2, 0, 1]}),
    OpCase("relax.nn.pad", [T(2, 3, 4)], {"pad_width": [0, 0, 1, 1, 2, 1], "pad_value": 1.5}),
    OpCase("relax.nn.pad", [T(3, 5)], {"pad_width": [1, -1, -2, 1]}),
    OpCase("relax.nn.pad", [T(2, 4, 5)], {"pad_width": [0, 0, 2, 1, 3, 3], "pad_mode": "reflect"}),
    OpCase("relax.nn.pad", [T(2, 3)], {"pad_width": [2, 1, 1, 4], "pad_mode": "replicate"}),
    OpCase("relax.nn.pad", [T(3, 4)], {"pad_width": [1, 2, 3, 2], "pad_mode": "circular"}),
    OpCase("relax.grad.pad_backward", [T(5, 4), T(2, 3)], {"pad_width": [1, 2, 0, 1]}, differentiable_args=[0], tvm=False),
    OpCase("relax.grad.pad_backward", [T(4, 9), T(2, 4)], {"pad_width": [1, 1, 3, 2], "pad_mode": "reflect"}, differentiable_args=[0], tvm=False),
    OpCase("relax.grad.pad_backward", [T(6, 7), T(3, 4)], {"pad_width": [1, 2, 3, 0], "pad_mode": "circular"}, differentiable_args=[0], tvm=False),
]

POINTWISE_CASES = [
    OpCase("relax.nn.gelu_tanh", [T(3, 4)], low=-3.0, high=3.0),
    OpCase("relax.nn.leakyrelu", [away_from_zero(3, 4)], differentiable_args=[0]),
    OpCase("relax.nn.leakyrelu", [away_from_zero(2, 5, seed=1)], {"alpha": 0.2}, differentiable_args=[0]),
    OpCase("relax.nn.prelu", [away_from_zero(2, 3, 4), T(3)], differentiable_args=[0, 1]),
    OpCase("relax.nn.prelu", [away_from_zero(2, 4, 3, seed=2), T(3)], {"axis": -1}, differentiable_args=[0, 1]),
    # PyTorch's default PReLU: one slope shared by every channel
    OpCase("relax.nn.prelu", [away_from_zero(2, 3, seed=3), T(1)], differentiable_args=[0, 1]),
    OpCase("relax.nn.selu", [away_from_zero(3, 4, seed=4)], differentiable_args=[0]),
    OpCase("relax.nn.softplus", [T(3, 4)], low=-3.0, high=3.0),
    OpCase("relax.nn.softplus", [T(3, 4)], {"beta": 2.0, "threshold": 1.0}, low=-1.0, high=0.45),
    OpCase("relax.nn.softplus", [T(3, 4)], {"beta": 2.0, "threshold": 1.0}, low=0.55, high=2.0),
]

SYMBOLIC_POINTWISE_CASES = [
    OpCase("relax.nn.pad", [T("n", 3)], {"pad_width": [1, 1, 0, 2]}),
    OpCase("relax.nn.softplus", [T("n", 3)]),
]

CASES = PAD_CASES + POINTWISE_CASES + SYMBOLIC_POINTWISE_CASES
