"""OpCases for nn.attention, nn.attention_bias, grad.attention_backward and nn.dropout."""

from __future__ import annotations

import numpy as np
from ops.op_case import OpCase, T

ATTENTION_CASES = [
    OpCase("relax.nn.attention", [T(2, 3, 2, 4), T(2, 5, 2, 4), T(2, 5, 2, 3)]),
    OpCase("relax.nn.attention", [T(1, 4, 2, 3), T(1, 4, 2, 3), T(1, 4, 2, 3)], {"causal_mask": "TopLeft"}),
    # BottomRight with fewer queries than keys: TVM's offset |S - S_kv|
    OpCase("relax.nn.attention", [T(1, 3, 1, 4), T(1, 5, 1, 4), T(1, 5, 1, 2)], {"causal_mask": "BottomRight"}),
    # grouped-query attention: 4 query heads share 2 key/value heads
    OpCase("relax.nn.attention", [T(1, 3, 4, 2), T(1, 4, 2, 2), T(1, 4, 2, 3)]),
    OpCase("relax.nn.attention_bias", [T(2, 3, 2, 4), T(2, 5, 2, 4), T(2, 5, 2, 3), T(2, 2, 3, 5)]),
    OpCase("relax.nn.attention_bias", [T(2, 3, 2, 4), T(2, 3, 2, 4), T(2, 3, 2, 4), T(1, 2, 1, 3)], {"causal_mask": "TopLeft"}),
    OpCase("relax.nn.attention", [T(1, 4, 2, 3, dtype="float64"), T(1, 4, 2, 3, dtype="float64"), T(1, 4, 2, 3, dtype="float64")]),
    # TVM prints a given scale as T.float32(0.5), which retrograd's parser does not read yet: the
    # TVM comparisons of these cases are in test_kernels_attention.py.
    OpCase("relax.nn.attention", [T(1, 3, 2, 4), T(1, 3, 2, 4), T(1, 3, 2, 4)], {"scale": 0.5}, tvm=False),
    OpCase("relax.nn.attention_bias", [T(1, 3, 1, 4), T(1, 2, 1, 4), T(1, 2, 1, 4), T(1, 1, 3, 2)], {"scale": 0.25, "causal_mask": "BottomRight"}, tvm=False),
    OpCase("relax.grad.attention_backward", [T(2, 3, 2, 3), T(2, 3, 2, 4), T(2, 5, 2, 4), T(2, 5, 2, 3)], tvm=False),
    OpCase("relax.grad.attention_backward", [T(1, 3, 4, 3), T(1, 3, 4, 2), T(1, 4, 2, 2), T(1, 4, 2, 3), T(1, 4, 3, 4)], {"causal_mask": "TopLeft"}, tvm=False),
    OpCase("relax.grad.attention_backward", [T(1, 4, 2, 2), T(1, 4, 2, 3), T(1, 3, 2, 3), T(1, 3, 2, 2), T(1, 1, 4, 3)], {"causal_mask": "BottomRight", "scale": 0.7}, tvm=False),
]

DROPOUT_CASES = [
    OpCase("relax.nn.dropout", [T(3, 4)], {"rate": 0.3}),
    OpCase("relax.nn.dropout", [T(2, 3, 4)]),
    # retrograd's training form (TVM has none): seeded mask
    OpCase("relax.nn.dropout", [T(4, 5)], {"rate": 0.4, "training": True, "seed": 7}, tvm=False),
    OpCase("relax.nn.dropout", [T(4, 5)], {"rate": 1.0, "training": True}, tvm=False),
    # a key operand (retrograd's, for a fresh mask per training step): mask from (seed, key)
    OpCase("relax.nn.dropout", [T(4, 5), np.array(-3, "int64")], {"rate": 0.4, "training": True, "seed": 7}, tvm=False),
    OpCase("relax.nn.dropout", [T(2, 6, dtype="float64"), np.array(2**40, "int64")], {"rate": 0.25, "training": True}, tvm=False),
    OpCase("relax.nn.dropout", [T(3, 2), np.array(5, "int32")], {"rate": 0.3}, tvm=False),
]

SYMBOLIC_ATTENTION_CASES = [
    OpCase("relax.nn.attention", [T("b", "s", 2, 4), T("b", "t", 2, 4), T("b", "t", 2, 3)], differentiable_args=[]),
]

CASES = ATTENTION_CASES + DROPOUT_CASES + SYMBOLIC_ATTENTION_CASES
