"""OpCases for the normalization ops and their fused backward ops (attributes in TVM's forms)."""

from __future__ import annotations

from ops.op_case import OpCase, T

NORM_CASES = [
    OpCase("relax.nn.layer_norm", [T(3, 5), T(5), T(5)], {"axes": [-1]}),
    OpCase("relax.nn.layer_norm", [T(2, 3, 4), T(3, 4), T(3, 4)], {"axes": [1, 2], "epsilon": 1e-3}),
    # axes in an unsorted, non-trailing order: gamma is laid out in that order
    OpCase("relax.nn.layer_norm", [T(4, 2, 3), T(3, 4), T(3, 4)], {"axes": [2, 0]}),
    OpCase("relax.nn.layer_norm", [T(3, 4), T(4), T(4)], {"axes": 1, "center": False}, differentiable_args=[0, 1]),
    OpCase("relax.nn.layer_norm", [T(3, 4), T(4), T(4)], {"axes": [-1], "scale": False}, differentiable_args=[0, 2]),
    OpCase("relax.nn.layer_norm", [T(3, 4, dtype="float64"), T(4, dtype="float64"), T(4, dtype="float64")], {"axes": [-1]}),
    OpCase("relax.nn.rms_norm", [T(3, 6), T(6)]),
    OpCase("relax.nn.rms_norm", [T(2, 3, 4), T(3, 4)], {"axes": [-2, -1], "epsilon": 1e-6}),
    OpCase("relax.nn.group_norm", [T(2, 6, 5), T(6), T(6)], {"num_groups": 3, "channel_axis": 1, "axes": [2]}),
    OpCase("relax.nn.group_norm", [T(2, 4, 3, 3), T(4), T(4)], {"num_groups": 2, "channel_axis": 1, "axes": [2, 3], "epsilon": 1e-3}),
    OpCase("relax.nn.group_norm", [T(2, 3, 3, 4), T(4), T(4)], {"num_groups": 2, "channel_axis": -1, "axes": [1, 2]}),
    OpCase("relax.nn.group_norm", [T(2, 4, 5), T(4), T(4)], {"num_groups": 1, "channel_axis": 1, "axes": [2], "center": False}, differentiable_args=[0, 1]),
    OpCase("relax.nn.instance_norm", [T(2, 3, 5), T(3), T(3)], {"channel_axis": 1, "axes": [2]}),
    OpCase("relax.nn.instance_norm", [T(2, 3, 4, 3), T(3), T(3)], {"channel_axis": 1, "axes": [2, 3], "scale": False}, differentiable_args=[0, 2]),
    OpCase("relax.nn.batch_norm", [T(4, 3, 5), T(3), T(3), T(3), T(3)], {"axis": 1}, low=0.1, high=1.0),
    OpCase("relax.nn.batch_norm", [T(3, 2, 3, 3), T(2), T(2), T(2), T(2)], {"axis": 1, "momentum": 0.3, "epsilon": 1e-3}, low=0.1, high=1.0),
    OpCase("relax.nn.batch_norm", [T(6, 4), T(4), T(4), T(4), T(4)], {"axis": -1, "training": False}, low=0.1, high=1.0),
    OpCase("relax.nn.batch_norm", [T(2, 3, 4), T(3), T(3), T(3), T(3)], {"axis": 1, "training": False, "center": False}, differentiable_args=[0, 1, 3, 4], low=0.1, high=1.0),
    OpCase("relax.nn.batch_norm", [T(5, 3), T(3), T(3), T(3), T(3)], {"axis": 1, "scale": False}, differentiable_args=[0, 2, 3, 4], low=0.1, high=1.0),
]

# Our fused backward ops (TVM has none): inference-checked here, compared with the composed
# gradients in test_kernels_norm.py; their own gradient (second order) is not provided.
NORM_BACKWARD_CASES = [
    OpCase("relax.grad.layer_norm_backward", [T(3, 5), T(3, 5), T(5)], {"axes": [-1]}, tvm=False),
    OpCase("relax.grad.layer_norm_backward", [T(2, 3, 4), T(2, 3, 4), T(4, 2)], {"axes": [2, 0], "scale": False, "center": False}, tvm=False),
    OpCase("relax.grad.rms_norm_backward", [T(3, 5), T(3, 5), T(5)], {}, tvm=False),
    OpCase("relax.grad.rms_norm_backward", [T(2, 3, 4), T(2, 3, 4), T(2, 3)], {"axes": [0, 1]}, tvm=False),
    OpCase("relax.grad.group_norm_backward", [T(2, 4, 3), T(2, 4, 3), T(4)], {"num_groups": 2, "channel_axis": 1, "axes": [2]}, tvm=False),
    OpCase("relax.grad.group_norm_backward", [T(2, 3, 2, 4), T(2, 3, 2, 4), T(4)], {"num_groups": 4, "channel_axis": -1, "axes": [1, 2], "scale": False}, tvm=False),
    OpCase("relax.grad.batch_norm_backward", [T(4, 3), T(3), T(3), T(4, 3), T(3), T(3), T(3)], {"axis": 1}, tvm=False, low=0.1),
    OpCase("relax.grad.batch_norm_backward", [T(2, 3, 4), T(3), T(3), T(2, 3, 4), T(3), T(3), T(3)], {"axis": 1, "training": False, "scale": False, "momentum": 0.3}, tvm=False, low=0.1),
]

SYMBOLIC_NORM_CASES = [
    OpCase("relax.nn.layer_norm", [T("n", 8), T(8), T(8)], {"axes": [-1]}),
    OpCase("relax.nn.batch_norm", [T("n", 3, 4), T(3), T(3), T(3), T(3)], {"axis": 1}, low=0.1),
]

CASES = NORM_CASES + NORM_BACKWARD_CASES + SYMBOLIC_NORM_CASES
