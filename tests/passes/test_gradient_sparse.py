"""Sparse gradients of gathered tables: (indices, rows) pairs, merged or not, and their densification."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import KernelError
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient, densify_sparse_grad, merge_sparse_grad

TEXT = '''
@I.ir_module
class Module:
    @R.function
    def main(table: R.Tensor((10, 4), "float32"), idx: R.Tensor((2, 3), "int64"), idx2: R.Tensor((5,), "int32"), w: R.Tensor((4,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            e = R.take(table, idx, axis=0)
            f = R.take(table, idx2, axis=0)
            h = R.multiply(e, w)
            gv = R.add(R.sum(R.tanh(h)), R.sum(R.multiply(f, f)))
            R.output(gv)
        return gv
'''


@pytest.fixture(scope="module")
def mod():
    return retrograd.parse(TEXT)


def _inputs():
    rng = np.random.default_rng(0)
    # duplicates within and across the two gathers, and a negative index
    return [
        rng.standard_normal((10, 4)).astype("float32"),
        np.array([[1, 2, 2], [9, 0, 1]], dtype="int64"),
        np.array([3, -1, 2, 2, 9], dtype="int32"),
        rng.standard_normal(4).astype("float32"),
    ]


def _dense(mod, args):
    _, (table_grad, w_grad) = retrograd.build(Gradient("main")(mod))["main_adjoint"](*args)
    return table_grad, w_grad


def _table_sized(func, rows: int) -> list:
    return [
        b.var.name_hint
        for block in func.body.blocks
        for b in block.bindings
        if isinstance(b.var.struct_info, TensorStructInfo) and b.var.struct_info.shape == (rows, 4)
    ]


def test_sparse_rows_left_unmerged(mod):
    out = Gradient("main", sparse_grads=["table"])(mod)
    assert well_formed(out) == []
    adjoint = out["main_adjoint"]
    # The table-sized gradient is never materialized.
    assert _table_sized(adjoint, 10) == []
    args = _inputs()
    _, ((indices, rows), w_grad) = retrograd.build(out)["main_adjoint"](*args)
    # one row per gathered index, in the order of the gathers (later gathers first), duplicates kept
    assert indices.dtype == np.int64 and rows.shape == (11, 4)
    assert sorted(indices.tolist()) == sorted([1, 2, 2, 9, 0, 1, 3, -1, 2, 2, 9])
    dense, dense_w = _dense(mod, args)
    np.testing.assert_allclose(densify_sparse_grad(indices, rows, 10), dense, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(w_grad, dense_w, rtol=1e-6)


def test_sparse_rows_merged(mod):
    out = Gradient("main", sparse_grads=True, merge_duplicates=True)(mod)
    assert well_formed(out) == []
    args = _inputs()
    _, ((indices, rows), _) = retrograd.build(out)["main_adjoint"](*args)
    # -1 wraps to row 9: duplicates merged, indices sorted and unique
    assert indices.tolist() == [0, 1, 2, 3, 9]
    dense, _ = _dense(mod, args)
    np.testing.assert_allclose(rows, dense[indices], rtol=1e-6, atol=1e-7)
    # the printed module (with the merge op) parses back to an equal module
    retrograd.assert_structural_equal(retrograd.parse(out.script()), out)


def test_sparse_true_skips_tables_used_densely():
    mod = retrograd.parse('''
@I.ir_module
class Module:
    @R.function
    def main(table: R.Tensor((6, 2), "float32"), idx: R.Tensor((3,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            e = R.take(table, idx, axis=0)
            gv = R.add(R.sum(e), R.sum(table))
            R.output(gv)
        return gv
''')
    out = Gradient("main", sparse_grads=True)(mod)
    # table is also summed as a whole: its gradient stays dense
    assert out["main_adjoint"].ret_struct_info.fields[1].fields[0] == TensorStructInfo((6, 2), "float32")


def test_unused_sparse_table_gives_empty_slices():
    mod = retrograd.parse('''
@I.ir_module
class Module:
    @R.function
    def main(table: R.Tensor((6, 2), "float32"), x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            gv = R.sum(x)
            R.output(gv)
        return gv
''')
    out = Gradient("main", sparse_grads=["table"])(mod)
    _, ((indices, rows), _) = retrograd.build(out)["main_adjoint"](np.ones((6, 2), "float32"), np.ones(3, "float32"))
    assert indices.shape == (0,) and rows.shape == (0, 2)


def test_merge_and_densify_helpers_against_a_naive_loop():
    rng = np.random.default_rng(3)
    indices = rng.integers(-7, 7, size=(4, 5))
    values = rng.standard_normal((4, 5, 3))
    expected = np.zeros((7, 3))
    for i, v in zip(indices.reshape(-1), values.reshape(-1, 3)):
        expected[i] += v
    np.testing.assert_allclose(densify_sparse_grad(indices, values, 7), expected, rtol=1e-12)
    unique, merged = merge_sparse_grad(indices, values, 7)
    assert list(unique) == sorted(set((indices.reshape(-1) % 7).tolist()))
    np.testing.assert_allclose(merged, expected[unique], rtol=1e-12)
    with pytest.raises(KernelError, match="index 7 out of range for a table of 7 rows"):
        densify_sparse_grad(np.array([7]), np.ones((1, 3)), 7)
