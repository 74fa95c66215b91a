"""OpCases of TVM 0.27's data-dependent, quantization and layout ops: nonzero, unique, quantize, dequantize,
multinomial_from_uniform, layout_transform (hand-written references, TVM comparisons: test_data_dependent_ops.py)."""

from __future__ import annotations

import numpy as np

from ops.op_case import OpCase, P, T

from retrograd.ops.manipulate.index_map import IndexMap

_F = np.float32
_DUPS = np.array([3.0, 1.0, 3.0, -2.0, 1.0, 0.5, 3.0], _F)
_ROWS = np.array([[1, 2, 1, 2], [0, 0, 0, 0], [1, 2, 1, 2]], np.int32)
_SCALE4 = np.array([0.5, 0.25, 2.0, 0.1], _F)
_ZP4 = np.array([0, 3, -2, 5], np.int8)
_HALVES = np.array([[-2.5, -1.5, -0.5, 0.5], [1.5, 2.5, 100.0, -100.0], [0.26, -0.74, 3.0, 7.49]], _F)
_PROB = np.array([[0.2, 0.3, 0.5], [0.3, 0.4, 0.3], [0.0, 0.0, 1.0]], _F)
_USAMPLE = np.array([[0.4], [0.9], [0.0], [0.2], [0.5], [0.99], [1.0]], _F)
_SAMPLE_ROWS = np.array([[0], [1], [2], [0], [0], [1], [1]], np.int64)

CASES = [
    OpCase("relax.nonzero", [np.array([[0, 1], [2, 0]], _F)], name="2d"),
    OpCase("relax.nonzero", [np.array([[[0, 1, 0], [0, 0, 7]], [[5, 0, 0], [0, 0, 0]]], np.int32)], name="3d-int"),
    OpCase("relax.nonzero", [np.array([True, False, True, True])], name="bool"),
    OpCase("relax.nonzero", [np.array(2.5, _F)], name="scalar"),
    OpCase("relax.nonzero", [np.zeros((2, 3), _F)], name="none"),
    OpCase("relax.nonzero", [T("n", 4)], name="sym", differentiable_args=[]),
    OpCase("relax.unique", [_DUPS], name="flat"),
    OpCase("relax.unique", [T(2, 3)], name="distinct"),
    OpCase("relax.unique", [T(4), P(False), P(True), P(True), P(True)], differentiable_args=[0], name="distinct-unsorted-all"),
    OpCase("relax.unique", [T(3, 2), P(True), P(False), P(False), P(True), P(0)], differentiable_args=[0], name="distinct-axis0"),
    OpCase("relax.unique", [_DUPS, P(False), P(True), P(True), P(True)], name="unsorted-all"),
    OpCase("relax.unique", [_DUPS, P(True), P(True), P(True), P(True)], name="sorted-all"),
    OpCase("relax.unique", [_ROWS, P(True), P(False), P(True), P(False)], name="2d-inverse"),
    OpCase("relax.unique", [_ROWS, P(True), P(True), P(True), P(True), P(0)], name="axis0"),
    OpCase("relax.unique", [_ROWS, P(False), P(True), P(True), P(True), P(-1)], name="axis-1-unsorted"),
    OpCase("relax.unique", [np.array(4, np.int64), P(True), P(True), P(True), P(True)], name="scalar"),
    OpCase("relax.unique", [T("n", 3), P(True), P(False), P(False), P(True), P(1)], name="sym", differentiable_args=[]),
    OpCase("relax.quantize", [_HALVES, _SCALE4, _ZP4], {"axis": 1}, name="per-channel"),
    OpCase("relax.quantize", [_HALVES, np.array(0.5, _F), np.array(-3, np.int8)], name="ties"),
    OpCase("relax.quantize", [_HALVES, np.array(0.01, _F), np.array(0, np.int8)], name="saturate"),
    OpCase("relax.quantize", [_HALVES, np.array([0.5, 2.0, 1.0], _F), np.array(4, np.int8)], {"axis": 0, "out_dtype": "uint8"},
           name="uint8-axis0"),
    OpCase("relax.quantize", [_HALVES, _SCALE4, _ZP4.astype(np.int32)], {"out_dtype": "int16"}, name="int16"),
    OpCase("relax.quantize", [T("n", 4), T(4), T(4, dtype="int8")], name="sym", differentiable_args=[]),
    OpCase("relax.dequantize", [np.array([[-128, -1, 0, 127], [5, 6, 7, 8], [3, 3, -3, -3]], np.int8), T(4), _ZP4], {"axis": 1},
           differentiable_args=[1], low=0.1, high=2.0, name="per-channel"),
    OpCase("relax.dequantize", [np.array([[200, 0, 3, 255]], np.uint8), T(), np.array(3, np.uint8)],
           differentiable_args=[1], name="uint8-scalar"),
    OpCase("relax.dequantize", [T(2, 3), T(3), np.array([1.5, -0.5, 2.0], np.float16)], {"axis": -1},
           differentiable_args=[0, 1], name="float-data"),
    OpCase("relax.dequantize", [np.array([[30000, -30000, 1], [2, 3, 4]], np.int16), np.array([4.0, 0.5, 1.0], _F),
                                np.array(0, np.int8)], {"out_dtype": "float16"}, name="float16-clip"),
    OpCase("relax.dequantize", [T("n", 4, dtype="int8"), T(4), T(dtype="int8")], name="sym"),
    OpCase("relax.multinomial_from_uniform", [_PROB, _USAMPLE, _SAMPLE_ROWS], name="rows"),
    OpCase("relax.multinomial_from_uniform", [_PROB, _USAMPLE, _SAMPLE_ROWS.astype(np.int32)], {"dtype": "int32"},
           name="int32"),
    OpCase("relax.multinomial_from_uniform", [T(2, 5), T("n", 1), T("n", 1, dtype="int64")], name="sym", differentiable_args=[]),
    OpCase("relax.layout_transform", [T(3, 4)], {"index_map": IndexMap.make(["i", "j"], ["j", "i"])}, name="transpose"),
    OpCase("relax.layout_transform", [T(3, 4)], {"index_map": IndexMap.make(["i", "j"], ["i", ("//", "j", 3), ("%", "j", 3)]),
                                                 "pad_value": 1.5}, name="split-pad"),
    OpCase("relax.layout_transform", [T(2, 3, 4)], {"index_map": IndexMap.make(["i", "j", "k"], ["k", ("+", ("*", "i", 3), "j")])},
           name="merge"),
    OpCase("relax.layout_transform", [T(2, 5, dtype="int32")], {"index_map": IndexMap.make(["i", "j"], [("//", "j", 2), "i", ("%", "j", 2)]),
                                                                "pad_value": -7}, name="int-pad"),
    OpCase("relax.layout_transform", [T("n", 4)], {"index_map": IndexMap.make(["i", "j"], ["i", ("//", "j", 2), ("%", "j", 2)])},
           name="sym"),
]
