"""`retrograd.kernels`: every registered op's kernel under the op's name, the very function the executor runs."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
import retrograd.kernels as K
from retrograd.errors import UnsupportedError
from retrograd.ops import registry
from retrograd.ops.registry import Arg, OpDef, all_ops, get


def test_every_op_with_a_kernel_is_there_under_its_name():
    ops = [op for op in all_ops() if op.kernel is not None]
    names = [K.kernel_name(op.name) for op in ops]
    assert len(set(names)) == len(ops)  # no two ops share a name
    for op, name in zip(ops, names):
        assert name.isidentifier() and not name.startswith("_"), op.name
        assert getattr(K, name) is op.kernel, op.name  # a module global must not hide a kernel
    assert sorted(K.__all__) == sorted(names)
    assert {"add", "nn_relu", "grad_avg_pool2d_backward", "sum", "image_resize2d"} <= set(dir(K))


def test_the_names_follow_the_op_names():
    assert K.kernel_name("relax.nn.relu") == "nn_relu"
    assert K.kernel_name("relax.grad.avg_pool2d_backward") == "grad_avg_pool2d_backward"
    assert K.kernel_name("relax.add") == "add"
    assert K.kernel_name("relax.import") == "import_"  # a keyword cannot be imported


def test_imported_kernels_compute_the_ops():
    from retrograd.kernels import add, nn_relu, sum  # noqa: A004 - the op's name

    x = np.array([[-1.0, 2.0], [3.0, -4.0]], dtype="float32")
    y = np.array([0.5, 0.5], dtype="float32")
    got = sum(nn_relu(add(x, y)), axis=None, keepdims=False)
    assert got == np.float32(2.5 + 3.5) and got.dtype == np.float32
    assert add is get("relax.add").kernel


def test_an_op_registered_later_is_there_too(monkeypatch):
    op = OpDef("relax.test_namespace_twice", (Arg("x"),), (), lambda ctx: ctx.tensor(0), kernel=lambda x: 2 * x)
    monkeypatch.setitem(registry._REGISTRY, op.name, op)
    assert K.test_namespace_twice is op.kernel
    assert K.test_namespace_twice(np.array([1.5])) == np.array([3.0])


def test_a_missing_name_says_so():
    with pytest.raises(AttributeError, match="no kernel named 'not_an_op'"):
        K.not_an_op  # noqa: B018
    with pytest.raises(ImportError):
        from retrograd.kernels import relax_add  # noqa: F401


def test_lowering_an_op_that_is_no_longer_registered_is_a_clear_error(monkeypatch):
    op = OpDef("relax.test_namespace_gone", (Arg("x"),), (), lambda ctx: ctx.tensor(0), kernel=lambda x: 2 * x)
    with monkeypatch.context() as m:
        m.setitem(registry._REGISTRY, op.name, op)
        mod = retrograd.parse('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.test_namespace_gone(x)\n    return y\n')
        assert "from retrograd.kernels import test_namespace_gone" in retrograd.lower_to_python(mod)
    with pytest.raises(UnsupportedError, match="test_namespace_gone is not the registered op"):
        retrograd.lower_to_python(mod)
