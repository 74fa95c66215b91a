"""OpCases for creation from prim values, stacking/tiling/repeating/flipping, and gathers/scatters."""

from __future__ import annotations

import numpy as np

from ops.op_case import OpCase, P, T
from retrograd.errors import OpError, TypeInferenceError


def ints(values, dtype="int64"):
    return np.array(values, dtype=dtype)


CREATE_CASES = [
    OpCase("relax.arange", [P(0), P(5), P(1)], {"dtype": "int64"}, name="int"),
    OpCase("relax.arange", [P(7)], name="end-only"),
    OpCase("relax.arange", [P(2), P(11), P(3)], {"dtype": "int32"}, name="step3"),
    OpCase("relax.arange", [P(0.5), P(2.0), P(0.25)], {"dtype": "float32"}, name="float"),
    OpCase("relax.arange", [P(0), P(1.0), P(0.3)], name="mixed-default-f32"),
    OpCase("relax.arange", [P(5), P(0), P(-2)], {"dtype": "int64"}, name="neg-step", tvm=False,
           note="TVM 0.27 counts floordiv(end - start + step - 1, step) = 4 elements; NumPy (its legalization) gives 3"),
    OpCase("relax.eye", [P(3)], name="square"),
    OpCase("relax.eye", [P(3), P(5), P(1)], {"dtype": "float64"}, name="k1"),
    OpCase("relax.eye", [P(4), P(2), P(-1)], {"dtype": "int32"}, name="kneg"),
    OpCase("relax.eye_like", [T(3, 4)], differentiable_args=[], name="default"),
    OpCase("relax.eye_like", [T(4, 3), P(-2)], {"dtype": "int64"}, differentiable_args=[], name="k-dtype"),
    OpCase("relax.eye_like", [T("n", 3)], differentiable_args=[], name="sym"),
    OpCase("relax.hamming_window", [P(6), P(True), P(0.54), P(0.46)], {"dtype": "float32"}, name="periodic"),
    OpCase("relax.hamming_window", [P(5), P(False), P(0.5), P(0.5)], {"dtype": "float64"}, name="symmetric-hann"),
    OpCase("relax.hamming_window", [P(1), P(True), P(0.54), P(0.46)], {"dtype": "float32"}, name="one"),
    OpCase("relax.meshgrid", [[T(3), T(4)]], name="ij"),
    OpCase("relax.meshgrid", [[T(3), T(4), T(2)]], {"indexing": "xy"}, name="xy3", tvm=False,
           note="TVM 0.27's inference ignores indexing='xy' (its topi kernel swaps the first two dims, as NumPy)"),
    OpCase("relax.meshgrid", [[T(5, dtype="float64")]], name="one"),
    OpCase("relax.meshgrid", [[T("n"), T(2)]], name="sym"),
    OpCase("relax.one_hot", [ints([0, 2, 1, 3]), P(1), P(0)], {"depth": 4}, name="int"),
    OpCase("relax.one_hot", [ints([[0, 5], [-1, 2]], "int32"), P(1.0, "float32"), P(0.0, "float32")], {"depth": 3, "axis": 0}, name="f32-axis0-outside"),
    OpCase("relax.one_hot", [ints([[1, 0], [2, 2]]), P(2.5), P(-1.0)], {"depth": 3, "axis": 1}, name="f64-middle"),
    OpCase("relax.one_hot", [T("n", dtype="int64"), P(1), P(0)], {"depth": 3}, name="sym"),
]

SHAPE_CASES = [
    OpCase("relax.stack", [[T(2, 3), T(2, 3)]], name="axis0"),
    OpCase("relax.stack", [[T(2, 3), T(2, 3), T(2, 3)]], {"axis": -1}, name="neg-axis"),
    OpCase("relax.stack", [[T(4), T(4)]], {"axis": 1}, name="1d-end"),
    OpCase("relax.stack", [[T(2, 3)]], {"axis": 1}, name="single"),
    OpCase("relax.stack", [[T("n", 3), T("n", 3)]], {"axis": 1}, name="sym"),
    OpCase("relax.tile", [T(2, 3)], {"repeats": [2, 1]}, name="rows"),
    OpCase("relax.tile", [T(2, 3)], {"repeats": [2]}, name="short"),
    OpCase("relax.tile", [T(3)], {"repeats": [2, 1, 2]}, name="long"),
    OpCase("relax.tile", [T(2, 2, dtype="int32")], {"repeats": [1, 3]}, low=-5, high=5, name="int"),
    OpCase("relax.tile", [T("n", 2)], {"repeats": [3, 2]}, name="sym"),
    OpCase("relax.repeat", [T(2, 3)], {"repeats": 2, "axis": 1}, name="axis1"),
    OpCase("relax.repeat", [T(2, 3)], {"repeats": 3, "axis": -2}, name="neg-axis"),
    OpCase("relax.repeat", [T(2, 3)], {"repeats": 2}, name="flat"),
    OpCase("relax.repeat", [T("n", 3)], {"repeats": 2, "axis": 0}, name="sym"),
    OpCase("relax.flip", [T(3, 4)], {"axis": 0}, name="axis0"),
    OpCase("relax.flip", [T(2, 3, 4)], {"axis": -1}, name="neg-axis"),
    OpCase("relax.flip", [T(5, dtype="int32")], {"axis": 0}, low=-9, high=9, name="int"),
    OpCase("relax.flip", [T("n", 2)], {"axis": 1}, name="sym"),
    OpCase("relax.reverse_sequence", [T(3, 5), ints([2, 5, 0])], {"seq_axis": 1, "batch_axis": 0}, name="rows"),
    OpCase("relax.reverse_sequence", [T(4, 2, 3), ints([1, 4], "int32")], {"seq_axis": 0, "batch_axis": 1}, name="seq-first"),
    OpCase("relax.reverse_sequence", [T(2, 4, 3), ints([3, 9])], name="defaults-clamped"),
]

INDEX_CASES = [
    OpCase("relax.gather_elements", [T(3, 4), ints([[0, 3], [1, 1], [2, -1]])], {"axis": 1}, name="axis1-dup-neg"),
    OpCase("relax.gather_elements", [T(3, 4), ints([[2, 0, 1, 1]], "int32")], {"axis": 0}, name="axis0-smaller"),
    OpCase("relax.gather_elements", [T(2, 3, 2), ints(np.zeros((2, 2, 2), int))], {"axis": -2}, name="3d"),
    OpCase("relax.gather_nd", [T(3, 4), ints([[0, 1], [2, 3], [0, 1]])], name="points"),
    OpCase("relax.gather_nd", [T(3, 4), ints([[2], [0]])], name="rows"),
    OpCase("relax.gather_nd", [T(2, 3, 4), ints([[1], [0]])], {"batch_dims": 1}, name="batch"),
    OpCase("relax.gather_nd", [T(2, 3, 4), ints([[[0, 1], [2, 3]], [[1, 1], [0, 0]]])], {"batch_dims": 1}, name="batch-pairs"),
    OpCase("relax.scatter_elements", [T(3, 4), ints([[0, 3], [1, 0], [2, 2]]), T(3, 2)], {"axis": 1}, name="update"),
    OpCase("relax.scatter_elements", [T(3, 4), ints([[0, 0], [1, 1], [2, 0]]), T(3, 2)], {"axis": 1, "reduction": "add"}, name="add-dup"),
    OpCase("relax.scatter_elements", [T(3, 2), ints([[2, 0], [2, 0]]), T(2, 2)], {"axis": 0, "reduction": "mul"}, differentiable_args=[0, 2], name="mul"),
    OpCase("relax.scatter_elements", [T(3, 2), ints([[2, 0], [2, 0], [1, 0]]), T(3, 2)], {"axis": 0, "reduction": "mean"}, differentiable_args=[], name="mean"),
    OpCase("relax.scatter_elements", [T(2, 3, dtype="int32"), ints([[1, 1, 1], [0, 2, 0]]), T(2, 3, dtype="int32")], {"axis": 1, "reduction": "mean"}, low=-9, high=9, name="mean-int"),
    OpCase("relax.scatter_elements", [T(2, 3), ints([[1, 1, 0]]), T(1, 3)], {"axis": 1, "reduction": "max"}, differentiable_args=[0, 2], name="max"),
    OpCase("relax.scatter_elements", [T(2, 3), ints([[1, -1, 0]]), T(1, 3)], {"axis": 1, "reduction": "min"}, differentiable_args=[0, 2], name="min"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[1], [3]]), T(2, 3)], name="rows"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[1], [3], [1]]), T(3, 3)], name="rows-dup-last-wins"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[1, 2], [3, 0], [1, 2]]), T(3)], {"reduction": "add"}, name="points-add-dup"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[1], [3], [1]]), T(3, 3)], {"reduction": "max"}, differentiable_args=[0, 2], name="rows-max-dup"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[1, 2], [3, 0], [1, 2]]), T(3)], {"reduction": "mul"}, differentiable_args=[0, 2], name="points-mul-dup"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[0, 1], [2, 2]]), T(2)], {"reduction": "mul"}, differentiable_args=[0, 2], name="mul"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[0], [0]]), T(2, 3)], {"reduction": "max"}, differentiable_args=[], name="max-dup"),
    OpCase("relax.scatter_nd", [T(4, 3), ints([[0], [2]]), T(2, 3)], {"reduction": "min"}, differentiable_args=[0, 2], name="min"),
]

LINALG_CASES = [
    OpCase("relax.einsum", [[T(3, 4), T(4, 5)]], {"subscripts": "ij,jk->ik"}, name="matmul"),
    OpCase("relax.einsum", [[T(3, 4)]], {"subscripts": "ij->ji"}, name="transpose"),
    OpCase("relax.einsum", [[T(3, 4)]], {"subscripts": "ij->"}, name="sum-all"),
    OpCase("relax.einsum", [[T(2, 3), T(3, 4)]], {"subscripts": "ij,jk"}, name="implicit"),
    OpCase("relax.einsum", [[T(2, 3, 4), T(2, 4, 5)]], {"subscripts": "bij,bjk->bik"}, name="batched"),
    OpCase("relax.einsum", [[T(2, 3, 4), T(4, 5)]], {"subscripts": "...j,jk->...k"}, name="ellipsis"),
    OpCase("relax.einsum", [[T(3), T(4), T(3, 4)]], {"subscripts": "i,j,ij->"}, name="three"),
    OpCase("relax.einsum", [[T(3, 4), T(5)]], {"subscripts": "ij,k->ik"}, name="summed-away"),
    OpCase("relax.einsum", [[T(3, 3)]], {"subscripts": "ii->i"}, name="diagonal"),
    OpCase("relax.einsum", [[T(3, 3)]], {"subscripts": "ii"}, name="trace"),
    OpCase("relax.einsum", [[T(2, 2, 3), T(3, 2)]], {"subscripts": "iij,jk->ik"}, name="diagonal-contracted"),
    OpCase("relax.einsum", [[T("n", 4), T(4, 2)]], {"subscripts": "ij,jk->ik"}, name="sym"),
    OpCase("relax.outer", [T(3), T(4)], name="vectors"),
    OpCase("relax.outer", [T(2, dtype="int32"), T(3, dtype="int32")], low=-5, high=5, name="int"),
    OpCase("relax.outer", [T("n"), T(2)], name="sym"),
]

INDEX_CASES += [
    OpCase("relax.index_tensor", [T(4, 3), [ints([0, 3, -1])]], name="rows"),
    OpCase("relax.index_tensor", [T(4, 3), [ints([[0, 1], [3, 3]]), ints([2, 0], "int32")]], name="bcast-dup"),
    OpCase("relax.index_tensor", [T(2, 3, 4), [ints([1, 0]), ints([2, 2])]], name="prefix"),
    OpCase("relax.index_tensor", [T(4, 3), [T("n", dtype="int64"), T("m", dtype="int64")]], name="sym-may-differ"),
    OpCase("relax.index_tensor", [T(4, 3), [T("n", dtype="int64"), T(1, dtype="int64")]], name="sym"),
    OpCase("relax.index_put", [T(4), [T("n", dtype="int64")], T("m")], name="sym"),
    OpCase("relax.index_put", [T(4, 3), [ints([0, 3, 1]), ints([2, 0, 1])], T(3)], name="points"),
    OpCase("relax.index_put", [T(4, 3), [ints([0, 3, 0]), ints([2, 0, 2])], T(3)], {"accumulate": True}, name="accumulate-dup"),
    OpCase("relax.index_put", [T(3, 3), [ints([[0], [2]]), ints([0, 1, 2])], T()], name="bcast-scalar"),
    OpCase("relax.slice_scatter", [T(6, 3), T(2, 3), P(1), P(5), P(2)], name="axis0-step2"),
    OpCase("relax.slice_scatter", [T(3, 5), T(3, 3), P(0), P(3), P(1)], {"axis": 1}, name="axis1"),
    OpCase("relax.slice_scatter", [T(3, 5), T(3, 0), P(2), P(2), P(1)], {"axis": -1}, name="empty"),
    OpCase("relax.dynamic_strided_slice", [T(5, 6), ints([1, 5]), ints([4, 0]), ints([2, -2])], differentiable_args=[0], name="static"),
    OpCase("relax.dynamic_strided_slice", [T(4, 3), ints([-3, 0]), ints([100, 3]), ints([1, 1])], differentiable_args=[0], name="clamped"),
    OpCase("relax.grad.dynamic_strided_slice_backward", [T(2, 3), T(5, 6), ints([1, 5]), ints([4, 0]), ints([2, -2])], differentiable_args=[0], tvm=False),
    OpCase("relax.grad.dynamic_strided_slice_backward", [T(3, 3), T(4, 3), ints([-3, 2]), ints([100, -5]), ints([1, -1])], differentiable_args=[0], tvm=False),
]

REDUCE_CASES = []
for _name in ("prod", "std", "median"):
    _op = f"relax.{_name}"
    REDUCE_CASES += [
        OpCase(_op, [T(3, 4)], low=0.5, high=1.5, name="all"),
        OpCase(_op, [T(3, 4)], {"axis": [1]}, low=0.5, high=1.5, name="axis1"),
        OpCase(_op, [T(2, 3, 4)], {"axis": [-1], "keepdims": True}, low=0.5, high=1.5, name="keepdims"),
        OpCase(_op, [T(2, 3, 4)], {"axis": [0, 2]}, low=0.5, high=1.5, name="two-axes"),
        OpCase(_op, [T(2, 3)], {"keepdims": True}, low=0.5, high=1.5, name="all-keep"),
        OpCase(_op, [T("n", 4)], {"axis": [1]}, name="sym"),
    ]
REDUCE_CASES += [
    OpCase("relax.prod", [np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.5, 2.0, -1.0]], "float32")], {"axis": [1]}, name="zeros"),
    OpCase("relax.prod", [T(2, 3, dtype="int32")], {"axis": [0]}, low=-4, high=4, name="int"),
    OpCase("relax.median", [T(4, 4)], {"axis": [0]}, name="even"),
    OpCase("relax.std", [T(3, 4, dtype="float64")], {"axis": [0]}, name="f64"),
    OpCase("relax.cumprod", [T(2, 4)], {"axis": 1}, low=0.5, high=1.5, name="axis1"),
    OpCase("relax.cumprod", [T(2, 3)], low=0.5, high=1.5, name="flat"),
    OpCase("relax.cumprod", [T(2, 5)], {"axis": -1, "exclusive": True}, low=0.5, high=1.5, name="exclusive"),
    OpCase("relax.cumprod", [T(3, 2)], {"axis": 0, "dtype": "float64"}, low=0.5, high=1.5, name="dtype"),
    OpCase("relax.cumprod", [T(2, 4, dtype="int32")], {"axis": 1}, low=-3, high=3, name="int"),
    OpCase("relax.cumprod", [T("n", 4)], {"axis": 0}, name="sym"),
]

SORT_CASES = [
    OpCase("relax.sort", [T(3, 5)], name="last"),
    OpCase("relax.sort", [T(4, 3)], {"axis": 0, "descending": True}, name="axis0-desc"),
    OpCase("relax.sort", [np.array([3, 1, 2, 1, 3], "int32")], {"descending": True}, name="int-ties"),
    OpCase("relax.sort", [T("n", 3)], name="sym"),
    OpCase("relax.argsort", [T(3, 5)], differentiable_args=[], name="default-int32"),
    OpCase("relax.argsort", [np.array([[2.0, 1.0, 2.0, 0.5], [1.0, 1.0, 1.0, 1.0]], "float32")], {"axis": 1, "descending": True, "dtype": "int64"}, name="ties-stable"),
    OpCase("relax.argsort", [T(4, 2)], {"axis": 0, "dtype": None}, differentiable_args=[], name="dtype-of-data"),
    OpCase("relax.topk", [T(3, 6)], {"k": 2}, name="both"),
    OpCase("relax.topk", [T(5, 3)], {"k": 3, "axis": 0, "ret_type": "values", "largest": False}, name="values-smallest"),
    OpCase("relax.topk", [T(3, 4)], {"k": 2, "ret_type": "indices", "dtype": "int64"}, differentiable_args=[], name="indices"),
    OpCase("relax.topk", [T(2, 4)], {"k": 0}, name="k0-all"),
    OpCase("relax.topk", [T(2, 3)], {"k": 7, "ret_type": "values"}, name="k-large"),
    OpCase("relax.topk", [T("n", 5)], {"k": 2}, name="sym"),
    OpCase("relax.argmax", [T(3, 4)], differentiable_args=[], name="all"),
    OpCase("relax.argmax", [T(3, 4)], {"axis": 1}, differentiable_args=[], name="axis1"),
    OpCase("relax.argmax", [T(3, 4)], {"axis": -2, "keepdims": True}, differentiable_args=[], name="keepdims"),
    OpCase("relax.argmax", [T(2, 3)], {"keepdims": True}, differentiable_args=[], name="all-keep"),
    OpCase("relax.argmax", [np.array([[1, 3, 3], [2, 2, 0]], "int32")], {"axis": 1}, name="ties-first"),
    OpCase("relax.argmin", [T(3, 4)], {"axis": 0}, differentiable_args=[], name="axis0"),
    OpCase("relax.argmin", [T(3, 4)], differentiable_args=[], name="all"),
    OpCase("relax.argmin", [T("n", 4)], {"axis": 1}, differentiable_args=[], name="sym"),
    OpCase("relax.bucketize", [T(3, 4), np.array([-0.5, 0.0, 0.25, 0.5], "float32")], differentiable_args=[], name="left"),
    OpCase("relax.bucketize", [np.array([0.0, 0.5, 0.7, 2.0, -1.0], "float32"), np.array([0.0, 0.5, 1.0], "float32")], {"right": True}, name="right-equal"),
    OpCase("relax.bucketize", [np.array([0.0, 0.5, 0.7], "float32"), np.array([0.0, 0.5, 1.0], "float32")], {"out_int32": True}, name="int32-equal"),
    # NaN sorts last: a NaN input lands past every boundary; NaN boundaries (sorted: last) follow ATen's search path.
    OpCase("relax.bucketize", [np.array([np.nan, -1.0, 0.0, 0.5, 2.0, np.inf], "float32"), np.array([0.0, 0.5, 1.0], "float32")], name="nan-input", tvm=False,
           note="PyTorch is the oracle here: TVM's bucketize puts a NaN input in bucket 0"),
    OpCase("relax.bucketize", [np.array([np.nan, -1.0, 0.0, 0.5, 2.0, np.inf], "float64"), np.array([0.0, 1.0, 2.0, 3.0, np.nan], "float64")], name="nan-boundary", tvm=False,
           note="PyTorch is the oracle here: TVM's bucketize puts a NaN input in bucket 0"),
    OpCase("relax.bucketize", [np.array([[np.nan, -1.0, 0.5], [1.0, 2.0, 5.0]], "float32"), np.array([0.0, 1.0, np.nan, np.nan, np.nan], "float32")], {"right": True}, name="nan-boundaries-right", tvm=False,
           note="PyTorch is the oracle here: TVM's bucketize puts a NaN input in bucket 0"),
]

CASES: list[OpCase] = CREATE_CASES + SHAPE_CASES + INDEX_CASES + LINALG_CASES + REDUCE_CASES + SORT_CASES

ERRORS = [
    (OpCase("relax.arange", [P(0), P(5), P(0)]), TypeInferenceError, ["R.arange (argument 'step')", "non-zero"], False),
    (OpCase("relax.eye_like", [T(3)]), TypeInferenceError, ["R.eye_like (argument 'x')", "2-D"], True),
    (OpCase("relax.hamming_window", [P(4), P(True), P(0.5), P(0.5)], {"dtype": "int32"}), TypeInferenceError, ["R.hamming_window", "float dtype"], True),
    (OpCase("relax.meshgrid", [[T(3, 2), T(4)]]), TypeInferenceError, ["R.meshgrid", "1-D"], True),
    (OpCase("relax.one_hot", [T(3), P(1), P(0)], {"depth": 3}), TypeInferenceError, ["R.one_hot (argument 'indices')", "integer"], True),
    (OpCase("relax.one_hot", [ints([1]), P(1), P(0)], {"depth": 3, "axis": 3}), TypeInferenceError, ["R.one_hot", "axis 3 is out of range"], True),
    (OpCase("relax.stack", [[T(2, 3), T(3, 2)]]), TypeInferenceError, ["R.stack", "identical shapes", "dimension 0"], True),
    (OpCase("relax.stack", [[T(2), T(2, dtype="int32")]]), TypeInferenceError, ["R.stack", "different dtypes"], True),
    (OpCase("relax.stack", [[T(2)]], {"axis": 2}), TypeInferenceError, ["R.stack", "axis 2 is out of range"], False),
    (OpCase("relax.repeat", [T(2, 3)], {"repeats": 2, "axis": 2}), TypeInferenceError, ["R.repeat", "axis 2 is out of range"], True),
    (OpCase("relax.flip", [T(2, 3)], {"axis": -3}), TypeInferenceError, ["R.flip", "axis -3 is out of range"], True),
    (OpCase("relax.flip", [T(2, 3)]), OpError, ["R.flip: missing required attribute 'axis'"], True),
    (OpCase("relax.reverse_sequence", [T(3, 4), ints([1, 2])]), TypeInferenceError, ["R.reverse_sequence (argument 'seq_lengths')", "2 entries", "data.shape[0] is 3"], True),
    (OpCase("relax.gather_elements", [T(3, 4), ints([0, 1])]), TypeInferenceError, ["R.gather_elements", "same rank"], True),
    (OpCase("relax.gather_elements", [T(3, 4), np.zeros((3, 4), "float32")]), TypeInferenceError, ["R.gather_elements (argument 'indices')", "integer"], True),
    (OpCase("relax.gather_nd", [T(3, 4), ints([[0, 1, 2]])]), TypeInferenceError, ["R.gather_nd (argument 'indices')", "exceeds the rank"], True),
    (OpCase("relax.gather_nd", [T(3, 4), ints([[0]], "int32")]), TypeInferenceError, ["R.gather_nd (argument 'indices')", "int64"], True),
    (OpCase("relax.scatter_elements", [T(3, 4), ints([[0, 1]]), T(1, 3)]), TypeInferenceError, ["R.scatter_elements (argument 'updates')", "same shape"], True),
    (OpCase("relax.scatter_elements", [T(3, 4), ints([[0, 1]]), T(1, 2, dtype="float64")]), TypeInferenceError, ["R.scatter_elements", "same dtype"], True),
    (OpCase("relax.scatter_nd", [T(4, 3), ints([[1], [3]]), T(2, 2)]), TypeInferenceError, ["R.scatter_nd (argument 'updates')", "indices.shape[:-1] + data.shape[k:]"], True),
    (OpCase("relax.einsum", [[T(3, 4), T(5, 6)]], {"subscripts": "ij,jk->ik"}), TypeInferenceError, ["R.einsum", "subscript 'j' has sizes 4 and 5"], True),
    (OpCase("relax.einsum", [[T(3, 4)]], {"subscripts": "ijk->i"}), TypeInferenceError, ["R.einsum", "3 letters but its operand has 2 dimensions"], True),
    (OpCase("relax.einsum", [[T(3, 4), T(4)]], {"subscripts": "ij->i"}), TypeInferenceError, ["R.einsum", "name 1 operands, got 2"], True),
    (OpCase("relax.einsum", [[T(3, 4), T(4, dtype="float64")]], {"subscripts": "ij,j->i"}), TypeInferenceError, ["R.einsum", "different dtypes"], True),
    (OpCase("relax.outer", [T(3, 1), T(4)]), TypeInferenceError, ["R.outer", "two 1-D tensors"], True),
    (OpCase("relax.index_tensor", [T(3), [ints([0]), ints([1])]]), TypeInferenceError, ["R.index_tensor (argument 'indices')", "2 index tensors for a tensor of ndim 1"], True),
    (OpCase("relax.index_tensor", [T(3, 4), [np.zeros(2, "float32")]]), TypeInferenceError, ["R.index_tensor (argument 'indices')", "integer dtype"], True),
    (OpCase("relax.index_put", [T(3, 4), [ints([0])], T(1)]), TypeInferenceError, ["R.index_put (argument 'indices')", "one index tensor per dimension"], True),
    (OpCase("relax.index_put", [T(3, 4), [ints([0]), ints([1])], T(1, dtype="float64")]), TypeInferenceError, ["R.index_put (argument 'values')", "same dtype"], True),
    (OpCase("relax.slice_scatter", [T(6, 3), T(3, 3), P(1), P(5), P(2)]), TypeInferenceError, ["R.slice_scatter (argument 'src')", "the slice 1:5:2 has 2"], True),
    (OpCase("relax.slice_scatter", [T(6, 3), T(2, 3), P(1), P(5), P(0)]), TypeInferenceError, ["R.slice_scatter (argument 'step')", ">= 1"], True),
    (OpCase("relax.slice_scatter", [T(6, 3), T(2, 3), P(1.0), P(5), P(2)]), TypeInferenceError, ["R.slice_scatter (argument 'start')", "integer"], True),
    (OpCase("relax.dynamic_strided_slice", [T(3, 4), ints([0]), ints([1]), ints([1])]), TypeInferenceError, ["R.dynamic_strided_slice (argument 'begin')", "one value per dimension"], True),
    (OpCase("relax.median", [T(3, 4)], {"axis": [2]}), TypeInferenceError, ["R.median", "axis 2 is out of range"], True),
    (OpCase("relax.sort", [T(3, 4)], {"axis": 2}), TypeInferenceError, ["R.sort", "axis 2 is out of range"], False),
    (OpCase("relax.topk", [T(3, 4)], {"ret_type": "all"}), OpError, ["R.topk: bad value 'all' for attribute 'ret_type'"], False),
    (OpCase("relax.argmax", [T(3, 4)], {"axis": -3}), TypeInferenceError, ["R.argmax", "axis -3 is out of range"], True),
    (OpCase("relax.bucketize", [T(3), T(2, 2)]), TypeInferenceError, ["R.bucketize (argument 'boundaries')", "1-D"], True),
    (OpCase("relax.scatter_elements", [T(3), ints([0]), T(1)], {"reduction": "sum"}), OpError, ["R.scatter_elements: bad value 'sum' for attribute 'reduction'"], False),
]
