"""Kernels of the ops of cases_math against naive references (their inference against TVM, printing
round trips and inference errors run in test_infer_core with the core cases)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from ops.cases_math import CASES
from ops.ref_math import REFERENCES
from ops.helpers import assert_same

import retrograd
from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo

STATIC = [c for c in CASES if c.is_static]


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.id)
def test_kernel_matches_reference(case):
    values = case.make_inputs(seed=3)
    name = case.op.split("relax.")[1]
    attrs = case.opdef.normalize_attrs(case.attrs)
    ref = REFERENCES[name](*case.kernel_args([v.copy() for v in values]), **attrs)
    # Through the executor: the kernel contract (prim values as Python scalars, tuples) end to end.
    ours = retrograd.build(case.build())["main"](*values)
    sinfo = case.build()["main"].ret_struct_info
    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is None:
        # Data-dependent extent (dynamic_strided_slice): the ndim is what inference promises.
        assert ours.ndim == sinfo.ndim, case.id
        sinfo = TensorStructInfo(ref.shape, sinfo.dtype)
    assert_same(ours, ref, sinfo, case.id)


def test_every_case_op_has_a_reference():
    missing = sorted({c.op.split("relax.")[1] for c in STATIC} - set(REFERENCES))
    assert not missing, f"no reference for {missing}"


def test_references_are_not_the_kernels():
    # A reference that calls the kernel under test would compare the kernel with itself.
    for name, ref in REFERENCES.items():
        kernel = retrograd.ops.get(f"relax.{name}").kernel
        assert ref is not kernel, name


def test_round_and_mods_follow_tvm_by_hand():
    R = retrograd.ops.api.R
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], "float32")
    np.testing.assert_array_equal(R.round.kernel(x), [-2, -2, -0, 0, 2, 2])
    a, b = np.array([7, -7, 7, -7], "int32"), np.array([2, 2, -2, -2], "int32")
    np.testing.assert_array_equal(R.mod.kernel(a, b), [1, -1, 1, -1])  # the sign of x1 (C's %)
    np.testing.assert_array_equal(R.floor_mod.kernel(a, b), [1, 1, -1, -1])  # the sign of x2 (Python's %)
    np.testing.assert_array_equal(R.floor_divide.kernel(a, b), [3, -4, -4, 3])
    assert math.isclose(float(R.log_add_exp.kernel(np.float32(1000.0), np.float32(1000.0))), 1000 + math.log(2), rel_tol=1e-6)


@pytest.mark.parametrize(
    "op, arrays, fragment",
    [
        ("floor_divide", [np.array([1], "int32"), np.array([0], "int32")], "integer division by zero"),
        ("mod", [np.array([1], "int64"), np.array([0], "int64")], "integer division by zero"),
        ("left_shift", [np.array([1], "int32"), np.array([32], "int32")], "shift amounts must be in [0, 32)"),
        ("right_shift", [np.array([1], "int8"), np.array([-1], "int8")], "[0, 8)"),
    ],
)
def test_kernel_errors(op, arrays, fragment):
    with pytest.raises(KernelError, match=re.escape(fragment)):
        retrograd.ops.get(f"relax.{op}").kernel(*arrays)


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.id)
def test_kernel_does_not_mutate_its_inputs(case):
    values = case.make_inputs(seed=5)
    before = [v.copy() for v in values]
    case.run_kernel(values)
    for a, b in zip(values, before):
        np.testing.assert_array_equal(a, b, err_msg=case.id)


def test_topk_with_many_ties_picks_the_lowest_indices_as_a_stable_sort():
    rng = np.random.default_rng(11)
    topk = retrograd.ops.get("relax.topk").kernel
    for dtype in ("float32", "int32", "uint8", "bool"):
        x = rng.integers(0, 3, size=(4, 40, 5)).astype(dtype)
        for k in (1, 3, 9, 40):
            for largest in (True, False):
                _, idx = topk(x, k=k, axis=1, largest=largest, dtype="int64")
                for b, c in np.ndindex(4, 5):
                    col = [int(v) for v in x[b, :, c]]
                    # Naive stable selection: best value first, lower index first among equals.
                    want = sorted(range(40), key=lambda j: (-col[j] if largest else col[j], j))[:k]
                    assert list(idx[b, :, c]) == want, (dtype, k, largest)


def test_scatter_add_sums_duplicates_into_rows_and_elements():
    data = np.zeros((3, 2), "float32")
    out = retrograd.ops.get("relax.scatter_nd").kernel(data, np.array([[1], [1], [2]]), np.ones((3, 2), "float32"), reduction="add")
    np.testing.assert_array_equal(out, [[0, 0], [2, 2], [1, 1]])
    out = retrograd.ops.get("relax.scatter_elements").kernel(data, np.array([[1, 1], [1, 0]]), np.full((2, 2), 0.5, "float32"), axis=1, reduction="add")
    np.testing.assert_array_equal(out, [[0, 1], [0.5, 0.5], [0, 0]])
