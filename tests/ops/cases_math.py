"""OpCases for clip, the extra elementwise math, the logical and bitwise ops (and, imported, cases_shape's)."""

from __future__ import annotations

import numpy as np

from ops.cases_shape import CASES as SHAPE_CASES
from ops.cases_shape import ERRORS as SHAPE_ERRORS
from ops.op_case import OpCase, P, T
from retrograd.errors import TypeInferenceError

# Domains where the functions are smooth (finite differences stay away from poles and branch points).
_UNARY_RANGE = {
    "acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.2, 3.0),
    "asinh": (-2.0, 2.0), "atan": (-2.0, 2.0), "cosh": (-2.0, 2.0), "sinh": (-2.0, 2.0),
    "tan": (-1.2, 1.2), "rsqrt": (0.5, 2.0), "square": (-2.0, 2.0),
}  # fmt: skip
_FLOAT_UNARY = list(_UNARY_RANGE)
# Piecewise constant: the gradient is zero (PyTorch's convention); inputs avoid integers and halves.
_ROUNDING = ["ceil", "floor", "round", "trunc", "sign"]


def _unary_cases():
    out = []
    for name in _FLOAT_UNARY:
        lo, hi = _UNARY_RANGE[name]
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4)], low=lo, high=hi),
            OpCase(op, [T(2, 3, dtype="float64")], low=lo, high=hi, name="f64"),
            OpCase(op, [T()], low=lo, high=hi, name="scalar"),
            OpCase(op, [T("n", 3)], low=lo, high=hi, name="sym"),
        ]
    out.append(OpCase("relax.square", [T(3, 4, dtype="int32")], low=-9, high=9, name="int"))
    for name in _ROUNDING:
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4)], low=-3.0, high=3.0),
            OpCase(op, [T(2, 5, dtype="int32")], low=-5, high=5, name="int"),
            OpCase(op, [T("n", 2)], name="sym"),
        ]
    out.append(
        OpCase("relax.round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51], "float32")], name="halves-even")
    )
    special = np.array([[0.0, -1.5, np.inf], [-np.inf, np.nan, 3.0]], "float32")
    for name in ("isfinite", "isinf", "isnan"):
        op = f"relax.{name}"
        out += [
            OpCase(op, [special], name="special"),
            OpCase(op, [T(2, 3, dtype="int32")], low=-3, high=3, name="int"),
            OpCase(op, [T("n", 3)], differentiable_args=[], name="sym"),
        ]
    return out


def _clip_cases():
    return [
        OpCase("relax.clip", [T(3, 4), P(-0.5), P(0.5)], name="float-bounds"),
        OpCase("relax.clip", [T(3, 4), P(0), P(6)], low=-3.0, high=8.0, name="relu6"),
        OpCase("relax.clip", [T(2, 5, dtype="int32"), P(-2), P(3)], low=-9, high=9, name="int"),
        OpCase("relax.clip", [T(4, dtype="float64"), P(0.25, "float32"), P(0.75, "float32")], low=0, high=1, name="f32-bounds"),
        OpCase("relax.clip", [T("n", 4), P(-1), P(1)], name="sym"),
    ]


_BINARY_RANGE = {"atan2": (-2.0, 2.0), "log_add_exp": (-3.0, 3.0), "floor_divide": (0.3, 3.0), "mod": (0.3, 3.0), "floor_mod": (0.3, 3.0)}


def _binary_cases():
    out = []
    for name, (lo, hi) in _BINARY_RANGE.items():
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4), T(3, 4)], low=lo, high=hi, name="same"),
            OpCase(op, [T(2, 1, 4), T(3, 1)], low=lo, high=hi, name="bcast"),
            OpCase(op, [T(2, 3, dtype="float64"), T(dtype="float64")], low=lo, high=hi, name="f64-scalar"),
            OpCase(op, [T("n", 4), T(4)], low=lo, high=hi, name="sym"),
        ]
    signs = np.array([[7.5, -7.5, 7.5, -7.5, 0.0, 3.0]], "float32")
    divisors = np.array([[2.0, 2.0, -2.0, -2.0, 3.0, 1.5]], "float32")
    ints_a = np.array([7, -7, 7, -7, 0, 9], "int32")
    ints_b = np.array([2, 2, -2, -2, 5, 3], "int32")
    for name in ("floor_divide", "mod", "floor_mod"):
        op = f"relax.{name}"
        out += [
            OpCase(op, [signs, divisors], name="signs"),
            OpCase(op, [ints_a, ints_b], name="int-signs"),
        ]
    out += [
        OpCase("relax.log_add_exp", [np.array([800.0, -800.0, 0.0], "float32"), np.array([799.0, -801.0, 0.0], "float32")], name="no-overflow"),
        OpCase("relax.ewise_fma", [T(3, 4), T(3, 4), T(3, 4)], name="same"),
        OpCase("relax.ewise_fma", [T(2, dtype="float64"), T(2, dtype="float64"), T(2, dtype="float64")], name="f64"),
        OpCase("relax.ewise_fma", [T(2, 3, dtype="int32"), T(2, 3, dtype="int32"), T(2, 3, dtype="int32")], low=-5, high=5, name="int"),
        OpCase("relax.ewise_fma", [T("n", 3), T("n", 3), T("n", 3)], name="sym"),
    ]
    return out


def _logical_cases():
    out = []
    for name in ("logical_and", "logical_or", "logical_xor"):
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4, dtype="bool"), T(4, dtype="bool")], name="bool"),
            OpCase(op, [T(2, 3, dtype="int32"), T(2, 3, dtype="int32")], low=-1, high=2, name="int"),
            OpCase(op, [T("n", 2, dtype="bool"), T(1, 2, dtype="bool")], name="sym"),
        ]
    out += [
        OpCase("relax.logical_not", [T(3, 4, dtype="bool")], name="bool"),
        OpCase("relax.logical_not", [T(5, dtype="int32")], low=-1, high=2, name="int"),
        OpCase("relax.logical_not", [T("n", dtype="bool")], name="sym"),
    ]
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4, dtype="int32"), T(4, dtype="int32")], low=-64, high=64, name="int32"),
            OpCase(op, [T(2, 3, dtype="uint8"), T(2, 3, dtype="uint8")], low=0, high=255, name="uint8"),
            OpCase(op, [T(2, 2, dtype="bool"), T(2, 2, dtype="bool")], name="bool"),
            OpCase(op, [T("n", 2, dtype="int64"), T(2, dtype="int64")], low=-9, high=9, name="sym"),
        ]
    out += [
        OpCase("relax.bitwise_not", [T(3, 4, dtype="int32")], low=-64, high=64, name="int32"),
        OpCase("relax.bitwise_not", [T(5, dtype="uint8")], low=0, high=255, name="uint8"),
        OpCase("relax.bitwise_not", [T(5, dtype="bool")], name="bool"),
    ]
    for name in ("left_shift", "right_shift"):
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4, dtype="int32"), T(4, dtype="int32")], low=0, high=20, name="int32"),
            OpCase(op, [np.array([-16, -5, 7, 1 << 20], "int64"), np.array([1, 2, 3, 40], "int64")], name="signed"),
            OpCase(op, [T(2, 3, dtype="uint8"), T(dtype="uint8")], low=0, high=8, name="uint8-scalar"),
        ]
    return out


# With the creation, manipulation and indexing cases of cases_shape.py.
CASES: list[OpCase] = _clip_cases() + _unary_cases() + _binary_cases() + _logical_cases() + SHAPE_CASES


# (case, error kind, fragments of the message, whether TVM rejects the call too)
ERRORS = [
    (OpCase("relax.acos", [T(3, dtype="int32")]), TypeInferenceError, ["R.acos (argument 'x')", "float", "int32"], True),
    (OpCase("relax.clip", [T(3), T(), P(1.0)]), TypeInferenceError, ["R.clip (argument 'min')", "prim value"], True),
    (OpCase("relax.atan2", [T(3), T(3, dtype="float64")]), TypeInferenceError, ["R.atan2", "dtypes float32 and float64 differ"], True),
    (OpCase("relax.ewise_fma", [T(3, 4), T(3, 4), T(4)]), TypeInferenceError, ["R.ewise_fma", "same number of dimensions"], True),
    (OpCase("relax.ewise_fma", [T(3, 4), T(3, 4), T(3, 5)]), TypeInferenceError, ["R.ewise_fma", "same shape"], True),
    (OpCase("relax.ewise_fma", [T(3), T(3), T(3, dtype="int32")]), TypeInferenceError, ["R.ewise_fma", "must be equal"], True),
    (OpCase("relax.bitwise_and", [T(3), T(3)]), TypeInferenceError, ["R.bitwise_and", "integer or bool", "float32"], False),
    (OpCase("relax.bitwise_not", [T(3)]), TypeInferenceError, ["R.bitwise_not", "integer or bool"], False),
    (OpCase("relax.logical_or", [T(3, dtype="bool"), T(4, dtype="bool")]), TypeInferenceError, ["R.logical_or", "broadcast"], True),
] + SHAPE_ERRORS
