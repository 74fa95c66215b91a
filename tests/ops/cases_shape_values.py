"""OpCases for shapes as values: shape_of, size, shape_to_tensor, tensor_to_shape (TVM 0.27 typing)."""

from __future__ import annotations

import numpy as np

from ops.op_case import OpCase, S, T

CASES = [
    OpCase("relax.shape_of", [T(2, 3)], differentiable_args=[], name="static"),
    OpCase("relax.shape_of", [T("n", 4)], differentiable_args=[], name="sym"),
    OpCase("relax.size", [T(2, 3, 4)], differentiable_args=[], name="3d"),
    OpCase("relax.size", [T()], differentiable_args=[], name="scalar"),
    OpCase("relax.shape_to_tensor", [S(2, 5, 1)], differentiable_args=[], name="literal"),
    OpCase("relax.tensor_to_shape", [np.array([3, 1, 4], dtype=np.int64)], differentiable_args=[], name="int64"),
    OpCase("relax.tensor_to_shape", [np.array([6], dtype=np.int32)], differentiable_args=[], name="int32"),
]
