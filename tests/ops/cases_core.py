"""OpCases for the core (non-nn) ops: broadcasting, keepdims, axes, negative axes, 1-D and batched matmul, symbolic dims."""

from __future__ import annotations

import numpy as np

from ops.op_case import OpCase, P, S, T
from retrograd.ir.struct_info import TensorStructInfo


def ints(values, dtype="int64"):
    return np.array(values, dtype=dtype)


def ndim_only(ndim, dtype="float32"):
    return TensorStructInfo(None, dtype, ndim)


_BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum"]
_COMPARE = ["equal", "not_equal", "greater", "greater_equal", "less", "less_equal"]
# Domains where finite differences are well behaved (log/sqrt/power of positives, divisors away from 0).
_RANGE = {"divide": (0.5, 2.0), "power": (0.5, 2.0), "log": (0.5, 2.0), "sqrt": (0.5, 2.0), "sigmoid": (-3.0, 3.0)}


def _binary_cases():
    out = []
    for name in _BINARY:
        lo, hi = _RANGE.get(name, (-1.0, 1.0))
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4), T(3, 4)], low=lo, high=hi, name="same"),
            OpCase(op, [T(3, 4), T(4)], low=lo, high=hi, name="bcast-row"),
            OpCase(op, [T(2, 1, 4), T(3, 1)], low=lo, high=hi, name="bcast-both"),
            OpCase(op, [T(), T(2, 3)], low=lo, high=hi, name="scalar"),
            OpCase(op, [T(2, 3, dtype="float64"), T(3, dtype="float64")], low=lo, high=hi, name="f64"),
            OpCase(op, [T("n", 4), T(4)], low=lo, high=hi, name="sym"),
            OpCase(op, [T("n", 1), T(1, "m")], low=lo, high=hi, name="sym-outer"),
        ]
    out += [
        OpCase("relax.add", [T(3, 4, dtype="int32"), T(4, dtype="int32")], low=-5, high=5, name="int"),
        # TVM integer division truncates toward zero
        OpCase(
            "relax.divide",
            [ints([[7, -7, 3], [-3, 8, -9]], "int32"), ints([[2, 2, -2], [2, -3, 4]], "int32")],
            name="int-trunc",
        ),
        OpCase("relax.maximum", [ndim_only(2), T(3, 4)], name="ndim-only"),
    ]
    return out


def _compare_cases():
    out = []
    for name in _COMPARE:
        op = f"relax.{name}"
        out += [
            # comparisons have no gradient: their inputs are not checked
            OpCase(op, [T(3, 4), T(4)], differentiable_args=[], name="bcast"),
            OpCase(op, [ints([[1, 2, 3], [3, 2, 1]], "int32"), ints([2, 2, 2], "int32")], name="ties"),
        ]
    return out


def _unary_cases():
    out = []
    for name in ["abs", "cos", "sin", "exp", "log", "negative", "sigmoid", "sqrt", "tanh"]:
        lo, hi = _RANGE.get(name, (-1.0, 1.0))
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4)], low=lo, high=hi),
            OpCase(op, [T(2, 3, 2, dtype="float64")], low=lo, high=hi, name="f64"),
            OpCase(op, [T()], low=lo, high=hi, name="scalar"),
            OpCase(op, [T("n", 3)], low=lo, high=hi, name="sym"),
        ]
    out += [
        OpCase("relax.abs", [T(2, 3, dtype="int32")], low=-5, high=5, name="int"),
        OpCase("relax.negative", [T(2, 3, dtype="int64")], low=-5, high=5, name="int"),
    ]
    return out


def _reduce_cases():
    out = []
    for name in ["sum", "mean", "variance", "max", "min"]:
        op = f"relax.{name}"
        out += [
            OpCase(op, [T(3, 4)], name="all"),
            OpCase(op, [T(3, 4)], {"axis": [1]}, name="axis1"),
            OpCase(op, [T(3, 4)], {"axis": [0], "keepdims": True}, name="keepdims"),
            OpCase(op, [T(2, 3, 4)], {"axis": [-1]}, name="neg-axis"),
            OpCase(op, [T(2, 3, 4)], {"axis": [0, 2]}, name="two-axes"),
            OpCase(op, [T(2, 3, 4)], {"axis": [2, 0], "keepdims": True}, name="two-axes-keep"),
            OpCase(op, [T(2, 3)], {"axis": None, "keepdims": True}, name="all-keep"),
            OpCase(op, [T("n", 4)], {"axis": [1]}, name="sym"),
            OpCase(op, [ndim_only(3)], {"axis": [1]}, name="ndim-only"),
        ]
    out += [
        OpCase("relax.sum", [T(3, 4, dtype="int32")], {"axis": [0]}, low=-9, high=9, name="int"),
        OpCase("relax.mean", [ints([[1, 2, 4], [-1, -2, -4]], "int32")], {"axis": [1]}, name="int-trunc"),
        OpCase("relax.max", [T(2, 3, dtype="float64")], {"axis": [1]}, name="f64"),
    ]
    out += [
        OpCase("relax.cumsum", [T(2, 3)], name="flat"),
        OpCase("relax.cumsum", [T(2, 3)], {"axis": 1}, name="axis1"),
        OpCase("relax.cumsum", [T(2, 3, 4)], {"axis": -2}, name="neg-axis"),
        OpCase("relax.cumsum", [T(2, 5)], {"axis": 1, "exclusive": True}, name="exclusive"),
        OpCase("relax.cumsum", [T(2, 3)], {"exclusive": True}, name="flat-exclusive"),
        OpCase("relax.cumsum", [T(3, 2)], {"axis": 0, "dtype": "float64"}, name="dtype"),
        OpCase("relax.cumsum", [T(2, 4, dtype="int32")], {"axis": 1}, low=-5, high=5, name="int"),
        OpCase("relax.cumsum", [T("n", 4)], name="sym"),
    ]
    return out


MATMUL_CASES = [
    OpCase("relax.matmul", [T(3, 4), T(4, 5)], name="2d"),
    OpCase("relax.matmul", [T(4), T(4, 5)], name="vec-mat"),
    OpCase("relax.matmul", [T(3, 4), T(4)], name="mat-vec"),
    OpCase("relax.matmul", [T(4), T(4)], name="vec-vec"),
    OpCase("relax.matmul", [T(2, 3, 4), T(4, 5)], name="batched-left"),
    OpCase("relax.matmul", [T(3, 4), T(2, 4, 5)], name="batched-right"),
    OpCase("relax.matmul", [T(2, 1, 3, 4), T(5, 4, 2)], name="batch-bcast"),
    OpCase("relax.matmul", [T(4), T(3, 4, 2)], name="vec-batched"),
    OpCase("relax.matmul", [T(3, 2, 4), T(4)], name="batched-vec"),
    OpCase("relax.matmul", [T(3, 4), T(4, 2)], {"out_dtype": "float64"}, name="out-dtype"),
    OpCase("relax.matmul", [T(3, 4, dtype="int32"), T(4, 2, dtype="int32")], low=-4, high=4, name="int"),
    OpCase("relax.matmul", [T("b", 3, 4), T(4, "m")], name="sym"),
    OpCase("relax.matmul", [T("b", 3, "k"), T("k", "m")], name="sym-inner"),
    OpCase("relax.matmul", [ndim_only(3), T(4, 5)], name="ndim-only"),
]

MANIPULATE_CASES = [
    OpCase("relax.permute_dims", [T(2, 3, 4)], name="reverse"),
    OpCase("relax.permute_dims", [T(2, 3, 4)], {"axes": [1, 0, 2]}, name="swap"),
    OpCase("relax.permute_dims", [T(2, 3, 4)], {"axes": [-1, 0, 1]}, name="neg-axes"),
    OpCase("relax.permute_dims", [T("n", 3)], {"axes": [1, 0]}, name="sym"),
    OpCase("relax.concat", [[T(2, 3), T(4, 3)]], {"axis": 0}, name="axis0"),
    OpCase("relax.concat", [[T(2, 3), T(2, 1), T(2, 2)]], {"axis": -1}, name="three-neg-axis"),
    OpCase("relax.concat", [[T(3), T(2)]], {"axis": None}, name="axis-none"),
    OpCase("relax.concat", [[T(2, 3)]], {"axis": 1}, name="single"),
    OpCase("relax.concat", [[T(3, 4), T("n", 4)]], {"axis": 0}, name="sym"),
    OpCase("relax.split", [T(4, 3)], {"indices_or_sections": 2, "axis": 0}, name="sections"),
    OpCase("relax.split", [T(2, 7)], {"indices_or_sections": 3, "axis": 1}, name="uneven"),
    OpCase("relax.split", [T(5, 2)], {"indices_or_sections": [1, 3], "axis": 0}, name="indices"),
    OpCase("relax.split", [T(2, 4)], {"indices_or_sections": [2, 6], "axis": -1}, name="clamped"),
    OpCase("relax.split", [T(3, 4)], {"indices_or_sections": [1, 3], "axis": 0}, name="empty-last"),
    # One section is the tensor itself, not a 1-tuple (TVM; x.split(n) with n at least the size exports so)
    OpCase("relax.split", [T(3, 4)], {"indices_or_sections": [], "axis": 1}, name="one-piece"),
    OpCase("relax.split", [T(3, 4)], {"indices_or_sections": 1, "axis": 0}, name="one-section"),
    OpCase("relax.expand_dims", [T(3, 4)], {"axis": [1]}, name="middle"),
    OpCase("relax.expand_dims", [T(3, 4)], {"axis": [0, -1]}, name="ends"),
    OpCase("relax.expand_dims", [T(3, 4)], {"axis": [-3]}, name="neg"),
    OpCase("relax.expand_dims", [T("n", 4)], {"axis": [2]}, name="sym"),
    OpCase("relax.squeeze", [T(1, 3, 1, 4)], name="all"),
    OpCase("relax.squeeze", [T(1, 3, 1, 4)], {"axis": [0]}, name="axis0"),
    OpCase("relax.squeeze", [T(1, 3, 1, 4)], {"axis": [-2, 0]}, name="neg-axes"),
    OpCase("relax.squeeze", [T(1, "n")], {"axis": [0]}, name="sym"),
    OpCase("relax.squeeze", [T(3, 1, 4)], {"axis": [0, 1, 2]}, name="non-unit-listed"),  # x.squeeze() from PyTorch
    OpCase("relax.flatten", [T(2, 3, 4)], name="3d"),
    OpCase("relax.flatten", [T()], name="scalar"),
    OpCase("relax.flatten", [T("n", "m")], name="sym"),
    OpCase("relax.reshape", [T(2, 3, 4), S(6, 4)], name="merge"),
    OpCase("relax.reshape", [T(2, 3, 4), S(-1)], name="flat"),
    OpCase("relax.reshape", [T(3, 4), S(2, -1, 3)], name="hole"),
    OpCase("relax.reshape", [T(3, 4), S(12, 1)], name="unit"),
    OpCase("relax.reshape", [T("n", 4), S(-1, 2)], name="sym-hole"),
    OpCase("relax.reshape", [T("n", 4), S(4, -1)], name="sym-hole2"),
    # valid only for even n: inference only
    OpCase("relax.reshape", [T("n", 6), S(4, -1)], differentiable_args=[], name="sym-floordiv"),
    OpCase("relax.broadcast_to", [T(4), S(3, 4)], name="row"),
    OpCase("relax.broadcast_to", [T(3, 1), S(2, 3, 5)], name="expand"),
    OpCase("relax.broadcast_to", [T(3, 4), S(3, 4)], name="same"),
    OpCase("relax.broadcast_to", [T("n", 1), S("n", 4)], name="sym"),
    OpCase("relax.collapse_sum_to", [T(3, 4), S(4)], name="lead"),
    OpCase("relax.collapse_sum_to", [T(2, 3, 4), S(3, 1)], name="lead-and-unit"),
    OpCase("relax.collapse_sum_to", [T(3, 4), S(1, 1)], name="units"),
    OpCase("relax.collapse_sum_to", [T(3, 4), S(3, 4)], name="same"),
    OpCase("relax.collapse_sum_like", [T(3, 4), T(1, 4)], differentiable_args=[0], name="unit"),
    OpCase("relax.collapse_sum_like", [T(2, 3, 4), T(4)], differentiable_args=[0], name="lead"),
    OpCase("relax.strided_slice", [T(4, 3)], {"axes": [0], "begin": [1], "end": [3]}, name="basic"),
    OpCase(
        "relax.strided_slice", [T(4, 5)], {"axes": [0, 1], "begin": [1, 0], "end": [4, 5], "strides": [1, 2]}, name="stride2"
    ),
    OpCase("relax.strided_slice", [T(3, 4)], {"axes": [1], "begin": [-1], "end": [0], "strides": [-1]}, name="reverse"),
    OpCase("relax.strided_slice", [T(3, 4)], {"axes": [1], "begin": [10], "end": [-10], "strides": [-2]}, name="clamp-neg"),
    OpCase("relax.strided_slice", [T(8, 2)], {"axes": [0], "begin": [1], "end": [100], "strides": [3]}, name="stride3"),
    OpCase("relax.strided_slice", [T(5, 2)], {"axes": [-2], "begin": [-4], "end": [-1]}, name="neg-begin"),
    OpCase(
        "relax.strided_slice", [T(4, 3, 6)], {"axes": [2, 0], "begin": [5, 0], "end": [0, 4], "strides": [-2, 2]}, name="multi"
    ),
    OpCase(
        "relax.strided_slice",
        [T(4, 3, 6)],
        {"axes": [0, 2], "begin": [1, 0], "end": [4, 5], "strides": [2, 2], "assume_inbound": True},
        name="inbound",
    ),
    OpCase(
        "relax.strided_slice",
        [T(4, 6)],
        {"axes": [1], "begin": [5], "end": [0], "strides": [-2], "assume_inbound": True},
        name="inbound-neg",
        tvm=False,
        note="TVM 0.27 counts 4 elements for 5, 3, 1 when assume_inbound (rounding of negative strides)",
    ),
    OpCase("relax.strided_slice", [T(4, 3)], {"axes": [0], "begin": [2], "end": [2]}, name="empty"),
    OpCase("relax.strided_slice", [T("n", 8)], {"axes": [1], "begin": [1], "end": [7], "strides": [2]}, name="sym"),
    OpCase("relax.take", [T(5, 3), ints([0, 4, 1, 1])], {"axis": 0}, name="rows-dup"),
    OpCase("relax.take", [T(3, 4), ints([[0, 3], [1, 1]])], {"axis": 1}, name="2d-indices"),
    OpCase("relax.take", [T(2, 3, 4), ints([3, -1, 0], "int32")], {"axis": -1}, name="neg"),
    OpCase("relax.take", [T(6), ints([5, 0, 2])], name="axis-none"),
    OpCase("relax.take", [T(4, 3), ints(2)], {"axis": 0}, name="scalar-index"),
    OpCase("relax.take", [T(3, 4), ints([5, -6, 1])], {"axis": 1, "mode": "wrap"}, name="wrap"),
    OpCase("relax.take", [T(3, 4), ints([9, -3, 1])], {"axis": 1, "mode": "clip"}, name="clip"),
    OpCase("relax.take", [T("n", 3), ints([0, 2])], {"axis": 1}, name="sym"),
    OpCase("relax.where", [T(3, 4, dtype="bool"), T(3, 4), T(3, 4)], name="same"),
    OpCase("relax.where", [T(4, dtype="bool"), T(3, 1), T()], name="bcast"),
    OpCase("relax.where", [T(2, 1, 3, dtype="bool"), T(4, 1), T(3)], name="bcast3"),
    OpCase("relax.where", [T("n", 4, dtype="bool"), T(4), T(4)], name="sym"),
    OpCase("relax.astype", [T(3, 4)], {"dtype": "float64"}, name="f64"),
    OpCase("relax.astype", [T(3, 4, dtype="float64")], {"dtype": "float32"}, name="f32"),
    OpCase("relax.astype", [T(3, 4)], {"dtype": "int32"}, low=-5, high=5, differentiable_args=[], name="to-int"),
    OpCase("relax.astype", [T(3, 4, dtype="int32")], {"dtype": "float32"}, low=-5, high=5, name="from-int"),
    OpCase("relax.astype", [T(3, 4)], {"dtype": "float16"}, name="f16", differentiable_args=[]),
    OpCase("relax.astype", [T("n", 4)], {"dtype": "bool"}, differentiable_args=[], name="sym"),
]

for _name in ("triu", "tril"):
    MANIPULATE_CASES += [
        OpCase(f"relax.{_name}", [T(3, 4)], name="k0"),
        OpCase(f"relax.{_name}", [T(3, 4)], {"k": 1}, name="k1"),
        OpCase(f"relax.{_name}", [T(4, 3)], {"k": -1}, name="kneg"),
        OpCase(f"relax.{_name}", [T(2, 3, 3)], {"k": 0}, name="batched"),
        OpCase(f"relax.{_name}", [T("n", 3)], {"k": 2}, name="sym"),
    ]

CREATE_CASES = [
    OpCase("relax.zeros", [S(2, 3)], {"dtype": "float32"}),
    OpCase("relax.zeros", [S()], {"dtype": "int32"}, name="scalar"),
    OpCase("relax.ones", [S(4)], {"dtype": "float64"}),
    OpCase("relax.ones", [S("n", 2)], {"dtype": "float32"}, name="sym", tvm=False, note="TVM needs n bound by a parameter"),
    OpCase("relax.full", [S(2, 3), T()], name="fill"),
    OpCase("relax.full", [S(2, 3), T()], {"dtype": "float64"}, differentiable_args=[], name="dtype"),
    OpCase("relax.full", [S(4), T(dtype="int32")], low=-3, high=3, name="int"),
    # zeros_like/ones_like do not depend on the values of x
    OpCase("relax.zeros_like", [T(3, 4)], differentiable_args=[]),
    OpCase("relax.zeros_like", [T(3, 4)], {"dtype": "int32"}, differentiable_args=[], name="dtype"),
    OpCase("relax.ones_like", [T(2, 3, dtype="float64")], differentiable_args=[]),
    OpCase("relax.ones_like", [T("n", 3)], {"dtype": "bool"}, differentiable_args=[], name="sym"),
    OpCase("relax.full_like", [T(3, 4), T()], differentiable_args=[1]),
    OpCase("relax.full_like", [T(3, 4), T(dtype="int32")], {"dtype": "int64"}, differentiable_args=[], name="dtype"),
]

_NO_TVM_OP = "R.match_cast is a binding in TVM, not an op (tests/parser/test_tvm_text.py has TVM read it)"
MATCH_CAST_CASES = [
    OpCase("relax.match_cast", [T(3, 4)], {"struct_info": TensorStructInfo((3, 4), "float32")}, name="static",
           tvm=False, note=_NO_TVM_OP),
    OpCase("relax.match_cast", [ndim_only(2)], {"struct_info": TensorStructInfo((3, 4), "float32")}, name="ndim",
           tvm=False, note=_NO_TVM_OP),
    OpCase("relax.match_cast", [T("n", 4)], {"struct_info": TensorStructInfo(("n", 4), "float32")}, name="sym",
           tvm=False, note=_NO_TVM_OP),
]

# An impure op: OpCase.build puts it outside a dataflow block, in an impure function.
ASSERT_CASES = [
    OpCase("relax.assert_op", [np.array(True)], {"format": "never raised"}, name="tensor"),
    OpCase("relax.assert_op", [P(True)], name="prim"),
]

CASES: list[OpCase] = (
    _binary_cases() + _compare_cases() + _unary_cases() + _reduce_cases() + MATMUL_CASES + MANIPULATE_CASES + CREATE_CASES
    + MATCH_CAST_CASES + ASSERT_CASES
)
