"""Executor: elementwise results written over a dying input only when nothing else can see it."""

import numpy as np
import pytest
from runtime.helpers import T, function, module

import retrograd
from retrograd.ops.api import R
from retrograd.ops.registry import Arg, OpDef, get

N = 64 * 1024  # float32: 256 KiB per tensor
KB256 = N * 4


def build(text):
    return retrograd.build(retrograd.parse(text.replace("N", str(N)), "inplace.py"))


def test_chain_reuses_the_dying_buffer_and_keeps_params_intact():
    ex = build('''
@R.function
def main(x: R.Tensor((N,), "float32"), b: R.Tensor((N,), "float32")):
    e = R.exp(x)
    a = R.add(e, b)
    r = R.nn.relu(a)
    n = R.negative(r)
    return n
''')
    x = np.linspace(-2, 2, N, dtype="float32")
    b = np.linspace(1, -1, N, dtype="float32")
    keep_x, keep_b = x.copy(), b.copy()
    out = ex["main"](x, b)
    np.testing.assert_allclose(out, -np.maximum(np.exp(keep_x) + keep_b, 0), rtol=1e-6)
    np.testing.assert_array_equal(x, keep_x)
    np.testing.assert_array_equal(b, keep_b)
    # x, b and one buffer: e is overwritten by add, relu and negative in turn.
    assert ex.stats.peak_live_bytes == 3 * KB256


def test_value_used_later_is_not_overwritten():
    ex = build('''
@R.function
def main(x: R.Tensor((N,), "float32")):
    e = R.exp(x)
    a = R.negative(e)
    s = R.add(a, e)
    return (s, e)
''')
    x = np.linspace(-1, 1, N, dtype="float32")
    s, e = ex["main"](x)
    np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(s, np.zeros(N), atol=1e-6)


def test_aliases_views_tuples_and_constants_block_reuse():
    view_op = OpDef("relax.test_view2", (Arg("x"),), (), infer=lambda c: c.tensor(0), kernel=lambda x: x[::-1])

    def body(bb, x):
        e = bb.emit(R.exp(x), "e")
        v = bb.emit(view_op(e), "v")  # a live view of e: e must not change under it
        n = bb.emit(R.negative(e), "n")  # e's last use
        return bb.emit(R.add(n, v), "s")

    ex = retrograd.build(module(main=function([("x", T((8,)))], body)))
    x = np.arange(8, dtype="float32") / 8
    np.testing.assert_allclose(ex["main"](x), -np.exp(x) + np.exp(x)[::-1], rtol=1e-6)

    ex = build('''
@R.function
def main(x: R.Tensor((N,), "float32")):
    e = R.exp(x)
    t = (e, x)
    n = R.negative(e)
    return (n, t)
''')
    x = np.linspace(-1, 1, N, dtype="float32")
    n, (e, _) = ex["main"](x)
    np.testing.assert_allclose(e, np.exp(x), rtol=1e-6)  # still held by the returned tuple
    np.testing.assert_allclose(n, -np.exp(x), rtol=1e-6)

    ex = build('''
@R.function
def main(x: R.Tensor((2,), "float32")):
    c = R.const([1.0, 2.0], "float32")
    n = R.negative(c)
    m = R.multiply(n, x)
    return m
''')
    for _ in range(2):  # a second run sees the constant unchanged
        np.testing.assert_array_equal(ex["main"](np.ones(2, "float32")), [-1.0, -2.0])


def test_broadcast_and_dtype_mismatch_are_not_reused():
    ex = build('''
@R.function
def main(x: R.Tensor((4, 1), "float32"), y: R.Tensor((1, 3), "float32")):
    a = R.exp(x)
    s = R.add(a, y)
    return s
''')
    x = np.arange(4, dtype="float32").reshape(4, 1) / 4
    y = np.arange(3, dtype="float32").reshape(1, 3)
    np.testing.assert_allclose(ex["main"](x, y), np.exp(x) + y, rtol=1e-6)


@pytest.mark.parametrize("profile", [False, True])
def test_callee_does_not_overwrite_the_callers_value(profile):
    ex = retrograd.build(retrograd.parse('''
@I.ir_module
class Module:
    @R.function
    def f(p: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        n = R.negative(p)
        return n

    @R.function
    def main(x: R.Tensor((3,), "float32")):
        cls = Module
        e = R.exp(x)
        r = cls.f(e)
        s = R.add(r, e)
        return s
'''), profile=profile)
    x = np.array([0.0, 1.0, 2.0], "float32")
    np.testing.assert_allclose(ex["main"](x), np.zeros(3), atol=1e-6)


@pytest.mark.parametrize("rows,cols,dtype", [(3, 4, "float32"), (5, 4, "int32"), (3, 8, "float64"), (2, 3, "float32")])
def test_negating_a_column_view_in_place_reads_the_column(rows, cols, dtype):
    """negative over a dying column of a split (a strided view, written in place): NumPy 2.4's own in-place
    negative reads such an input wrongly, the executor's result must still be the column negated."""
    mod = retrograd.parse(f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({rows}, {cols}), dtype="{dtype}")) -> R.Tensor(({rows}, 1), dtype="{dtype}"):
        s: R.Tensor(({rows}, {cols}), dtype="{dtype}") = R.add(x, x)
        parts: R.Tuple(R.Tensor(({rows}, 1), dtype="{dtype}"), R.Tensor(({rows}, {cols - 1}), dtype="{dtype}")) = R.split(s, indices_or_sections=[1], axis=1)
        col: R.Tensor(({rows}, 1), dtype="{dtype}") = parts[0]
        y: R.Tensor(({rows}, 1), dtype="{dtype}") = R.negative(col)
        return y
''')
    x = (np.arange(rows * cols) % 7 + 1).astype(dtype).reshape(rows, cols)
    want = [-2 * x[i, 0] for i in range(rows)]  # naive: row by row
    got = retrograd.build(mod)["main"](x.copy())
    np.testing.assert_array_equal(got.ravel(), np.array(want, dtype))
    np.testing.assert_array_equal(retrograd.build(mod, check=True)["main"](x.copy()), got)


@pytest.mark.parametrize("cols,dtype", [(4, "float32"), (4, "int32"), (8, "float64"), (3, "float32"), (8, "int64")])
def test_where_written_into_a_column_view_selects(cols, dtype):
    """where's in-place form into a strided column: its bitwise select negates a mask in the output's
    buffer, which NumPy 2.4's in-place negative gets wrong over such a view."""
    rows = 5
    x = (np.arange(rows * cols) % 7 + 1).astype(dtype).reshape(rows, cols)
    m = (np.arange(rows) % 2 == 0).reshape(rows, 1)
    z = np.full((rows, 1), 100, dtype)
    want = [x[i, 0] if m[i, 0] else z[i, 0] for i in range(rows)]  # naive: row by row
    out = np.zeros((rows, cols), dtype)[:, 1:2]
    got = get("relax.where").inplace(m, x[:, :1].copy(), z, out=out)
    np.testing.assert_array_equal(np.asarray(got).ravel(), np.array(want, dtype))
