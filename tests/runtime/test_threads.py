"""The runtime decides threading (runtime/threads.py): an executor call of a module with threaded kernels
holds BLAS to one thread, and only inside such a call does an op's `split_kernel` form run in place of its
kernel; a module without them (an MLP) leaves BLAS and the plain kernel alone."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.ops import get
from retrograd.ops.kernels import parallel
from retrograd.ops.kernels.matmul import matmul, matmul_parts
from retrograd.runtime.threads import blas_held, call_scope, when_held

CONV_AND_MATMUL = """
@I.ir_module
class M:
    @R.function
    def main(x: R.Tensor((2, 3, 8, 8), dtype="float32"), w: R.Tensor((4, 3, 3, 3), dtype="float32"),
             a: R.Tensor((64, 32), dtype="float32"), b: R.Tensor((32, 16), dtype="float32")):
        with R.dataflow():
            y = R.nn.conv2d(x, w)
            z = R.matmul(a, b)
            R.output(y, z)
        return (y, z)
"""

MLP = """
@I.ir_module
class M:
    @R.function
    def main(a: R.Tensor((64, 32), dtype="float32"), b: R.Tensor((32, 16), dtype="float32")):
        with R.dataflow():
            z = R.nn.relu(R.matmul(a, b))
            R.output(z)
        return z
"""


@pytest.fixture
def two_threads():
    parallel.set_num_threads(2)
    yield
    parallel.set_num_threads(None)


def blas_threads() -> list[int]:
    return [c.get_num_threads() for c in parallel.blas_controllers()]


def test_modules_with_threaded_kernels_split_and_others_do_not():
    assert retrograd.build(retrograd.parse(CONV_AND_MATMUL))._splits
    assert not retrograd.build(retrograd.parse(MLP))._splits


def test_the_call_scope_holds_blas_only_for_splitting_modules(two_threads):
    before = blas_threads()
    with call_scope(False):
        assert not blas_held() and blas_threads() == before
    with call_scope(True):
        assert blas_held() == bool(parallel.blas_controllers())
        assert all(n == 1 for n in blas_threads())
    assert not blas_held() and blas_threads() == before


def test_one_thread_or_a_call_inside_a_part_holds_nothing():
    parallel.set_num_threads(1)
    try:
        with call_scope(True):
            assert not blas_held()
    finally:
        parallel.set_num_threads(None)


class FakeBlas:
    """A BLAS controller (threadpoolctl's interface) at four threads."""

    threads = 4

    def get_num_threads(self):
        return self.threads

    def set_num_threads(self, n):
        self.threads = n


def test_when_held_picks_the_split_form_inside_a_holding_call(two_threads, monkeypatch):
    fake = FakeBlas()
    monkeypatch.setattr(parallel, "blas_controllers", lambda: [fake])  # as if BLAS could be held
    pick = when_held(lambda x, k=0: ("split", x, k), lambda x, k=0: ("plain", x, k))
    assert pick(1, k=2) == ("plain", 1, 2)
    with call_scope(True):
        assert pick(1, k=2) == ("split", 1, 2)
        assert fake.threads == 1
    assert pick(3) == ("plain", 3, 0) and fake.threads == 4



def test_a_call_nested_in_a_holding_call_leaves_the_hold_to_the_outer_call(two_threads, monkeypatch):
    """An executor called while another executor's call holds BLAS (from a kernel, a callback): when the
    inner call returns, the outer one still holds BLAS and still runs the split forms."""
    fake = FakeBlas()
    monkeypatch.setattr(parallel, "blas_controllers", lambda: [fake])
    pick = when_held(lambda: "split", lambda: "plain")
    with call_scope(True):
        with call_scope(True):
            assert pick() == "split" and fake.threads == 1
        assert blas_held() and pick() == "split" and fake.threads == 1
    assert not blas_held() and pick() == "plain" and fake.threads == 4

def test_matmul_declares_its_split_form_and_both_forms_agree():
    op = get("relax.matmul")
    assert op.kernel is matmul and op.split_kernel is matmul_parts and not op.threaded
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 40, 7)), rng.standard_normal((3, 7, 5))
    np.testing.assert_allclose(matmul_parts(a, b), np.einsum("bij,bjk->bik", a, b), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(matmul(a, b, "float32"), np.einsum("bij,bjk->bik", a, b), rtol=1e-5, atol=1e-5)


def run_recording(source: str, args) -> tuple[list[str], tuple]:
    """The forms of matmul an executor call ran (its results too), recorded through the op's own kernels."""
    op = get("relax.matmul")
    ran: list[str] = []

    def plain(*a, **k):
        ran.append("plain")
        return matmul(*a, **k)

    def split(*a, **k):
        ran.append("split" if blas_held() else "split outside a holding call")
        return matmul_parts(*a, **k)

    saved = op.kernel, op.split_kernel
    object.__setattr__(op, "kernel", plain)  # OpDef is frozen; the build reads these once
    object.__setattr__(op, "split_kernel", split)
    try:
        result = retrograd.build(retrograd.parse(source))["main"](*args)
    finally:
        object.__setattr__(op, "kernel", saved[0])
        object.__setattr__(op, "split_kernel", saved[1])
    return ran, result


def test_the_executor_runs_the_split_form_only_where_it_holds_blas(two_threads):
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 3, 8, 8)).astype("float32"), rng.standard_normal((4, 3, 3, 3)).astype("float32")
    a, b = rng.standard_normal((64, 32)).astype("float32"), rng.standard_normal((32, 16)).astype("float32")
    ran, (_, z) = run_recording(CONV_AND_MATMUL, (x, w, a, b))
    assert ran == (["split"] if bool(parallel.blas_controllers()) else ["plain"])
    np.testing.assert_allclose(z, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    ran, z = run_recording(MLP, (a, b))
    assert ran == ["plain"]  # no threaded kernel: BLAS threads the product itself
    np.testing.assert_allclose(z, np.maximum(a.astype(np.float64) @ b, 0), rtol=1e-5, atol=1e-5)
