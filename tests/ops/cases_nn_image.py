"""OpCases for image.resize2d / resize3d, nn.pixel_shuffle and nn.batch_flatten.

TVM prints resize's roi as T.float32(...) values, which retrograd's parser does not read yet, so the
resize cases skip the shared TVM comparisons; test_kernels_image.py checks that TVM reads our text and
infers the same struct info.
"""

from __future__ import annotations

from ops.op_case import OpCase, S, T

RESIZE_CASES = [
    OpCase("relax.image.resize2d", [T(2, 3, 4, 5), S(8, 10)], tvm=False),
    OpCase("relax.image.resize2d", [T(1, 2, 6, 5), S(3, 4)], {"coordinate_transformation_mode": "align_corners"}, tvm=False),
    OpCase("relax.image.resize2d", [T(1, 2, 4, 5), S(7, 3)], {"method": "nearest_neighbor", "coordinate_transformation_mode": "asymmetric", "rounding_method": "floor"}, tvm=False),
    OpCase("relax.image.resize2d", [T(1, 4, 5, 2), S(6, 7)], {"method": "cubic", "layout": "NHWC"}, tvm=False),
    OpCase("relax.image.resize2d", [T(1, 2, 4, 4), S(6, 5)], {"method": "cubic", "cubic_exclude": 1, "cubic_alpha": -0.5, "coordinate_transformation_mode": "pytorch_half_pixel"}, tvm=False),
    OpCase("relax.image.resize2d", [T(1, 2, 3, 3), S(5, 4)], {"out_dtype": "float64"}, tvm=False),
    OpCase("relax.image.resize3d", [T(1, 2, 3, 4, 5), S(5, 3, 6)], tvm=False),
    OpCase("relax.image.resize3d", [T(1, 2, 3, 4, 2), S(6, 8, 4)], {"method": "nearest_neighbor", "coordinate_transformation_mode": "asymmetric", "rounding_method": "floor"}, tvm=False),
]

RESIZE_BACKWARD_CASES = [
    OpCase("relax.grad.resize2d_backward", [T(2, 3, 8, 10), T(2, 3, 4, 5)], differentiable_args=[0], tvm=False),
    OpCase("relax.grad.resize2d_backward", [T(1, 7, 6, 2), T(1, 4, 5, 2)], {"method": "cubic", "layout": "NHWC"}, differentiable_args=[0], tvm=False),
    OpCase("relax.grad.resize3d_backward", [T(1, 2, 5, 3, 6), T(1, 2, 3, 4, 5)], differentiable_args=[0], tvm=False),
]

RESHAPE_CASES = [
    OpCase("relax.nn.pixel_shuffle", [T(2, 8, 3, 4)], {"upscale_factor": 2}),
    OpCase("relax.nn.pixel_shuffle", [T(1, 2, 9, 2, 3)], {"upscale_factor": 3}),
    OpCase("relax.nn.pixel_shuffle", [T(2, 3, 2, 2)], {"upscale_factor": 1}),
    OpCase("relax.nn.batch_flatten", [T(2, 3, 4)]),
    OpCase("relax.nn.batch_flatten", [T(3, 2)]),
    OpCase("relax.nn.batch_flatten", [T("n", 3, 4)]),
]

SAMPLING_CASES = [
    OpCase("relax.image.affine_grid", [T(2, 2, 3), S(4, 5)]),
    OpCase("relax.image.affine_grid", [T(2, 2, 3), S(3, 4)], {"align_corners": False}),
    OpCase("relax.image.affine_grid", [T(1, 3, 4), S(2, 3, 4)]),
    OpCase("relax.image.grid_sample", [T(2, 3, 4, 5), T(2, 2, 3, 4)], low=-1.1, high=1.1),
    OpCase("relax.image.grid_sample", [T(1, 2, 4, 3), T(1, 2, 5, 2)], {"align_corners": True, "padding_mode": "border"}, low=-1.2, high=1.2),
    OpCase("relax.image.grid_sample", [T(1, 2, 4, 3), T(1, 2, 3, 3)], {"method": "nearest"}, differentiable_args=[0], low=-0.9, high=0.9),
    OpCase("relax.grad.grid_sample_backward", [T(2, 3, 3, 4), T(2, 3, 4, 5), T(2, 2, 3, 4)], tvm=False, low=-1.1, high=1.1),
    OpCase("relax.grad.grid_sample_backward", [T(1, 2, 5, 3), T(1, 2, 4, 3), T(1, 2, 5, 3)], {"align_corners": True, "padding_mode": "border"}, tvm=False, low=-1.2, high=1.2),
    OpCase("relax.grad.grid_sample_backward", [T(1, 2, 3, 3), T(1, 2, 4, 3), T(1, 2, 3, 3)], {"method": "nearest"}, differentiable_args=[0, 1], tvm=False, low=-0.9, high=0.9),
]

CASES = RESIZE_CASES + RESIZE_BACKWARD_CASES + RESHAPE_CASES + SAMPLING_CASES
