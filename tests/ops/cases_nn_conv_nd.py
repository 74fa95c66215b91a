"""OpCases for the 1-D and 3-D convolutions (every attribute, layouts, groups) and their pools."""

from __future__ import annotations

from ops.cases_nn import tie_free
from ops.op_case import OpCase, T

CONV_ND_CASES = [
    OpCase("relax.nn.conv1d", [T(2, 3, 9), T(4, 3, 3)]),
    OpCase("relax.nn.conv1d", [T(2, 4, 9), T(6, 2, 3)], {"strides": 2, "padding": 1, "groups": 2}),
    OpCase("relax.nn.conv1d", [T(1, 2, 10), T(3, 2, 3)], {"strides": 3, "padding": (1, 2), "dilation": 2}),
    OpCase("relax.nn.conv1d", [T(2, 7, 3), T(3, 3, 4)], {"data_layout": "NWC", "kernel_layout": "WIO"}),
    OpCase("relax.nn.conv1d_transpose", [T(1, 3, 5), T(3, 2, 3)]),
    OpCase("relax.nn.conv1d_transpose", [T(2, 4, 5), T(4, 3, 3)], {"strides": 2, "padding": 1, "output_padding": 1, "groups": 2}),
    OpCase("relax.nn.conv1d_transpose", [T(1, 2, 4), T(2, 2, 2)], {"strides": 3, "dilation": 2, "padding": (0, 1)}),
    OpCase("relax.nn.conv3d", [T(1, 2, 4, 5, 4), T(3, 2, 2, 3, 2)]),
    OpCase("relax.nn.conv3d", [T(1, 4, 5, 5, 4), T(4, 2, 3, 3, 2)], {"strides": 2, "padding": 1, "groups": 2}),
    OpCase("relax.nn.conv3d", [T(1, 2, 5, 4, 6), T(2, 2, 2, 2, 3)], {"strides": (2, 1, 2), "padding": (1, 0, 2), "dilation": (2, 1, 1)}),
    OpCase("relax.nn.conv3d_transpose", [T(1, 2, 3, 3, 2), T(2, 3, 2, 2, 2)]),
    OpCase("relax.nn.conv3d_transpose", [T(1, 4, 3, 2, 3), T(4, 1, 3, 2, 2)], {"strides": 2, "padding": 1, "output_padding": 1, "groups": 2}),
]

POOL_ND_CASES = [
    OpCase("relax.nn.max_pool1d", [tie_free(2, 3, 9)], {"pool_size": 3, "strides": 2, "padding": 1}, differentiable_args=[0]),
    OpCase("relax.nn.max_pool1d", [tie_free(1, 2, 10, seed=1)], {"pool_size": 2, "strides": 3, "dilation": 2, "ceil_mode": True}, differentiable_args=[0]),
    OpCase("relax.nn.max_pool1d", [tie_free(2, 8, 3, seed=2)], {"pool_size": 2, "strides": 2, "layout": "NWC"}, differentiable_args=[0]),
    OpCase("relax.nn.avg_pool1d", [T(2, 3, 9)], {"pool_size": 3, "strides": 2, "padding": 1}),
    OpCase("relax.nn.avg_pool1d", [T(2, 3, 9)], {"pool_size": 3, "strides": 2, "padding": (1, 0), "count_include_pad": False, "ceil_mode": True}),
    OpCase("relax.nn.max_pool3d", [tie_free(1, 2, 5, 5, 4, seed=3)], {"pool_size": 2, "strides": 2}, differentiable_args=[0]),
    OpCase("relax.nn.max_pool3d", [tie_free(1, 2, 5, 4, 5, seed=4)], {"pool_size": (3, 2, 2), "strides": (2, 1, 2), "padding": 1, "ceil_mode": True}, differentiable_args=[0]),
    OpCase("relax.nn.avg_pool3d", [T(1, 2, 5, 4, 5)], {"pool_size": 2, "strides": 2, "padding": 1}),
    OpCase("relax.nn.avg_pool3d", [T(1, 2, 5, 4, 5)], {"pool_size": (3, 2, 2), "strides": 2, "padding": (1, 0, 1), "count_include_pad": False, "ceil_mode": True}),
    OpCase("relax.grad.max_pool3d_backward", [T(1, 2, 2, 2, 2), tie_free(1, 2, 5, 5, 4, seed=5)], {"pool_size": 2, "strides": 2}, differentiable_args=[0], tvm=False),
    OpCase("relax.grad.max_pool3d_backward_grad", [T(1, 2, 5, 5, 4), tie_free(1, 2, 5, 5, 4, seed=6)], {"pool_size": 2, "strides": 2}, differentiable_args=[0], tvm=False),
    OpCase("relax.grad.max_pool3d_backward_grad", [T(1, 1, 5, 4, 6), tie_free(1, 1, 5, 4, 6, seed=7)], {"pool_size": [2, 3, 2], "strides": [1, 2, 2], "padding": 1, "ceil_mode": True}, differentiable_args=[0], tvm=False),
    OpCase("relax.grad.avg_pool3d_backward", [T(1, 2, 3, 3, 3), T(1, 2, 5, 4, 5)], {"pool_size": 2, "strides": 2, "padding": 1, "count_include_pad": True}, differentiable_args=[0], tvm=False),
]

ADAPTIVE_CASES = [
    OpCase("relax.nn.adaptive_avg_pool1d", [T(2, 3, 10)], {"output_size": 4}),
    OpCase("relax.nn.adaptive_avg_pool1d", [T(2, 3, 5)]),
    OpCase("relax.nn.adaptive_avg_pool2d", [T(2, 3, 7, 9)], {"output_size": (3, 4)}),
    OpCase("relax.nn.adaptive_avg_pool2d", [T(2, 3, 7, 9)], {"output_size": 1}),
    OpCase("relax.nn.adaptive_avg_pool2d", [T(2, 7, 6, 3)], {"output_size": (3, 6), "layout": "NHWC"}),
    OpCase("relax.nn.adaptive_avg_pool2d", [T(2, 3, 7, 9)], {"output_size": (2, 2), "out_layout": "NHWC"}),
    OpCase("relax.nn.adaptive_avg_pool3d", [T(1, 2, 5, 6, 7)], {"output_size": (2, 3, 4)}),
]

SYMBOLIC_CONV_ND_CASES = [
    OpCase("relax.nn.adaptive_avg_pool2d", [T("n", 3, 7, 9)], {"output_size": 2}),
    OpCase("relax.nn.conv1d", [T("n", 4, "w"), T(6, 4, 3)], {"strides": 2, "padding": 1}, differentiable_args=[]),
    OpCase("relax.nn.conv1d", [T("n", 4, 9), T(6, 4, 3)], {"padding": 1}),
]

CASES = CONV_ND_CASES + POOL_ND_CASES + ADAPTIVE_CASES + SYMBOLIC_CONV_ND_CASES
