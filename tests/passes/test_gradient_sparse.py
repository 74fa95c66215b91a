"""Sparse gradients of gathered tables: (indices, rows) pairs, merged or not, and their densification; take's
gradients under each index mode, dense and sparse, and how its backward prints for TVM."""

from __future__ import annotations

import numpy as np
import pytest
from passes.helpers import TVM_IMPORTS

import retrograd
from retrograd.errors import GradientError, KernelError
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient, densify_sparse_grad, merge_sparse_grad
from retrograd.runtime import build
from retrograd.testing import check_gradients
from optional import need  # noqa: E402

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


TAKE = TVM_IMPORTS + """
@I.ir_module
class Module:
    @R.function
    def main(table: R.Tensor((10, 4), "float64"), idx: R.Tensor((5,), "int64"), w: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        e = R.take(table, idx, axis=0, mode="MODE")
        s = R.sum(R.tanh(R.multiply(e, w)))
        return s
"""
# Out-of-range (clip/wrap) indices, a duplicate and a negative one.
IDX = np.array([-3, 12, 2, 2, 9], dtype="int64")


def _take_inputs():
    rng = np.random.default_rng(4)
    return [rng.standard_normal((10, 4)), IDX, rng.standard_normal(4)]


def _naive_take_grad(table, idx, w, mode):
    """d/dtable sum(tanh(table[rows] * w)) with rows mapped by a loop (the definition of clip and wrap)."""
    n = table.shape[0]
    grad = np.zeros_like(table)
    for i in idx:
        row = min(max(int(i), 0), n - 1) if mode == "clip" else int(i) % n
        grad[row] += (1 - np.tanh(table[row] * w) ** 2) * w
    return grad


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_sparse_and_dense_take_gradients_follow_the_mode(mode):
    mod = retrograd.parse(TAKE.replace("MODE", mode))
    args = _take_inputs()
    expected = _naive_take_grad(*args, mode)
    _, (dense, _) = build(Gradient("main")(mod))["main_adjoint"](*args)
    np.testing.assert_allclose(dense, expected, rtol=1e-12, atol=1e-12)
    report = check_gradients(mod, "main", args, require_grads=[0])
    assert report.ok and report.checked == 40, str(report)
    for merge in (False, True):
        out = Gradient("main", sparse_grads=["table"], merge_duplicates=merge)(mod)
        assert well_formed(out) == []
        _, ((rows, vals), _) = build(out)["main_adjoint"](*args)
        assert ((rows >= 0) & (rows < 10)).all()
        np.testing.assert_allclose(densify_sparse_grad(rows, vals, 10), expected, rtol=1e-12, atol=1e-12)
        unique, merged = merge_sparse_grad(rows, vals, 10)
        np.testing.assert_allclose(densify_sparse_grad(unique, merged, 10), expected, rtol=1e-12, atol=1e-12)


def test_sparse_take_with_mode_nan_is_refused_clearly():
    mod = retrograd.parse(TAKE.replace("MODE", "nan"))
    with pytest.raises(GradientError, match="mode fast, or clip/wrap"):
        Gradient("main", sparse_grads=["table"])(mod)


@pytest.mark.parametrize("mode", ["fast", "clip", "wrap"])
def test_take_backward_prints_what_tvm_reads(mode):
    mod = Gradient("main")(retrograd.parse(TAKE.replace("MODE", mode)))
    text = mod.script()
    assert "take_backward(" in text and "mode=" not in text.split("take_backward(")[1].split("\n")[0]
    assert "not loadable in TVM" not in text
    assert retrograd.structural_equal(retrograd.parse(text), mod)
    need("tvm")
    from_source = need("tvm.script").from_source

    from_source(text)  # TVM's own parser reads it


def test_take_backward_mode_nan_says_tvm_cannot_read_it():
    mod = Gradient("main")(retrograd.parse(TAKE.replace("MODE", "nan")))
    text = mod.script()
    assert 'not loadable in TVM: R.grad.take_backward(mode="nan")' in text
    assert retrograd.structural_equal(retrograd.parse(text), mod)
