"""Against TVM 0.27 on modules where its Gradient succeeds and is right: same values from TVM's compiled
adjoint, and no more bindings in our adjoint than in TVM's."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from passes.helpers import random_inputs
from retrograd.passes import Gradient

from optional import need  # noqa: E402
tvm = need("tvm")
relax = need("tvm.relax")

HEAD = "@I.ir_module\nclass Module:\n"

MODULES = {
    "mlp": HEAD + '''
    @R.function
    def main(x: R.Tensor((8, 16), "float32"), w1: R.Tensor((32, 16), "float32"), b1: R.Tensor((32,), "float32"), w2: R.Tensor((10, 32), "float32"), b2: R.Tensor((10,), "float32"), labels: R.Tensor((8,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            lv0 = R.permute_dims(w1, axes=None)
            lv1 = R.matmul(x, lv0, out_dtype=None)
            lv2 = R.add(lv1, b1)
            lv3 = R.nn.relu(lv2)
            lv4 = R.permute_dims(w2, axes=None)
            lv5 = R.matmul(lv3, lv4, out_dtype=None)
            lv6 = R.add(lv5, b2)
            lv7 = R.nn.log_softmax(lv6, axis=-1)
            gv = R.nn.nll_loss(lv7, labels, reduction="mean", ignore_index=-100)
            R.output(gv)
        return gv
''',
    "tuples": HEAD + '''
    @R.function
    def main(x: R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((4,), "float32")), y: R.Tensor((3, 4), "float32"), z: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((), "float32")):
        with R.dataflow():
            a = x[0]
            b = x[1]
            c = R.multiply(a, b)
            t = ((c, y), z)
            u = t[0]
            v = u[1]
            w = R.exp(R.add(v, c))
            s = R.sum(R.multiply(w, z))
            R.output(c, s)
        return (c, s)
''',
    "elementwise": HEAD + '''
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3,), "float32"), u: R.Tensor((5,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.subtract(x, y)
            b = R.multiply(a, R.subtract(R.const(3.0, "float32"), R.const(1.0, "float32")))
            c = R.sigmoid(b)
            d = R.divide(c, R.add(R.multiply(y, y), R.const(1.0, "float32")))
            e = R.mean(R.tanh(d), axis=[1], keepdims=False)
            gv = R.sum(R.sqrt(R.add(R.multiply(e, e), R.const(1.0, "float32"))))
            R.output(gv)
        return gv
''',
}


def _to_numpy(value):
    if hasattr(value, "numpy"):
        return value.numpy()
    return tuple(_to_numpy(v) for v in value)


def _bindings(func) -> int:
    return sum(len(block.bindings) for block in func.body.blocks)


TARGET = {"tuples": 1}


@pytest.mark.parametrize("name", list(MODULES))
def test_adjoint_agrees_with_tvm_and_is_no_larger(name):
    text = MODULES[name]
    index = TARGET.get(name, 0)
    ours_mod = Gradient("main", target_index=index)(retrograd.parse(text))
    tvm_mod = tvm.script.from_source(text)
    # TVM returns zeros for integer parameters (labels) by default; we skip them: ask for the float ones.
    floats = [p for p in tvm_mod["main"].params if "dtype=\"int" not in str(p.ty)]
    theirs_mod = relax.transform.Gradient("main", require_grads=floats, target_index=index)(tvm_mod)
    assert _bindings(ours_mod["main_adjoint"]) <= _bindings(theirs_mod["main_adjoint"])

    args = random_inputs(retrograd.parse(text), seed=7, int_high=10)
    flat = []
    for a in args:
        flat.append(tuple(tvm.runtime.tensor(x) for x in a) if isinstance(a, tuple) else tvm.runtime.tensor(a))
    vm = relax.VirtualMachine(tvm.compile(theirs_mod, target="llvm"), tvm.cpu())
    t_result, t_grads = _to_numpy(vm["main_adjoint"](*flat))
    result, grads = retrograd.build(ours_mod)["main_adjoint"](*args)

    def close(a, b):
        if isinstance(a, tuple):
            assert len(a) == len(b)
            for x, y in zip(a, b):
                close(x, y)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(b).max())))

    close(result, t_result)
    close(grads, t_grads)


def test_our_printed_adjoint_parses_in_tvm():
    ours = Gradient("main")(retrograd.parse(MODULES["mlp"]))
    theirs = tvm.script.from_source(ours.script())
    assert "main_adjoint" in [gv.name_hint for gv in theirs.get_global_vars()]


def test_maximum_minimum_ties_follow_tvms_adjoint():
    """At ties TVM's adjoint gives maximum's gradient to x1 and minimum's to x2."""
    text = HEAD + """
    @R.function
    def main(x: R.Tensor((6,), "float32"), y: R.Tensor((6,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            a = R.minimum(x, y)
            b = R.maximum(x, y)
            gv = R.sum(R.add(a, R.multiply(b, R.const(10.0, "float32"))))
            R.output(gv)
        return gv
"""
    x = np.array([1.0, 2.0, 3.0, -1.0, 0.0, 5.0], "float32")
    y = np.array([1.0, 3.0, 2.0, -1.0, 0.0, 4.0], "float32")  # ties at 0, 3 and 4
    theirs = relax.transform.Gradient("main")(tvm.script.from_source(text))
    vm = relax.VirtualMachine(tvm.compile(theirs, target="llvm"), tvm.cpu())
    _, t_grads = _to_numpy(vm["main_adjoint"](tvm.runtime.tensor(x), tvm.runtime.tensor(y)))
    _, grads = retrograd.build(Gradient("main")(retrograd.parse(text)))["main_adjoint"](x, y)
    for g, t in zip(grads, t_grads):
        np.testing.assert_array_equal(g, t)
