"""Checkpoint markers in Gradient with TVM 0.27's semantics: TVM's own checkpoint tests
(tests/python/relax/test_transform_gradient_checkpoint.py in apache/tvm) as Before/Expected scripts,
gradients bitwise equal to the unmarked adjoint's, TVM as an oracle, and the measured memory saved.

Our Expected scripts differ from TVM's in these ways, in every test (structural equality is modulo
variable names):
  1. Barriers. Each recomputation group reads its inputs through fresh `R.grad.start_checkpoint`
     calls (`<v>_ckin`), computes `<v>_cp` (TVM's name for the recomputation), and hands its values
     on through `R.grad.end_checkpoint` (`<v>_ckout`), which TVM does not have. The
     barriers keep clean-up passes (CSE above all) from merging a recomputation back into the forward
     value, which would keep that value alive and bring the memory peak back.
  2. Clean-up. Our Gradient folds constants, simplifies, merges common subexpressions and removes dead
     code in the adjoint: `R.subtract(R.const(3), R.const(1))` is `R.const(2.0)`, the ones seed is a
     constant, and TVM's copies (`gv_1 = gv`, `gv_adjoint1 = gv_adjoint`, `x_adjoint_out = x_adjoint`)
     are gone (an output is bound where it is computed).
  3. Placement. A value is recomputed right before the first backward binding that reads it (after
     the adjoint computed just before that); TVM recomputes at the first backward binding whose
     forward binding reads it, which for these tests is one binding earlier.
"""

from __future__ import annotations

import numpy as np

import retrograd
from passes.checkpoint_cases import (
    CONSECUTIVE,
    DAG,
    H,
    INTERMEDIATE,
    SEQ_API,
    SEQUENTIAL,
    TREE,
    TUPLE,
)
from passes.helpers import check_gradient


def assert_closed_form(mod, value, grad) -> None:
    """The adjoint of a function of one (3, 3) input against its value and gradient written out by
    hand in float64 (finite differences cannot resolve polynomials as steep as x^81 in float32)."""
    x = np.linspace(-1.1, 1.1, 9, dtype="float32").reshape(3, 3)
    got_value, (got_grad,) = retrograd.build(mod)["main_adjoint"](x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got_value, value(x64), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_grad, grad(x64), rtol=1e-4, atol=1e-30)


EXPECTED_SEQUENTIAL = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.power(x, R.const(3.0, "float32"))
            lv2: R.Tensor((3, 3), dtype="float32") = R.power(lv1, R.const(3.0, "float32"))
            lv3: R.Tensor((3, 3), dtype="float32") = R.power(lv2, R.const(3.0, "float32"))
            lv4: R.Tensor((3, 3), dtype="float32") = R.power(lv3, R.const(3.0, "float32"))
            gv_ecp: R.Tensor((), dtype="float32") = R.sum(lv4, axis=None, keepdims=False)
            lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            lv2_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(lv2)
            lv3_cp: R.Tensor((3, 3), dtype="float32") = R.power(lv2_ckin, R.const(3.0, "float32"))
            lv3_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv3_cp)
            lv: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint, R.const(3.0, "float32"))
            lv_1: R.Tensor((3, 3), dtype="float32") = R.power(lv3_ckout, R.const(2.0, "float32"))
            lv3_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv, lv_1)
            lv_2: R.Tensor((3, 3), dtype="float32") = R.multiply(lv3_adjoint, R.const(3.0, "float32"))
            lv_3: R.Tensor((3, 3), dtype="float32") = R.power(lv2, R.const(2.0, "float32"))
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv_2, lv_3)
            x_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(x)
            lv1_cp: R.Tensor((3, 3), dtype="float32") = R.power(x_ckin, R.const(3.0, "float32"))
            lv1_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv1_cp)
            lv_4: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2_adjoint, R.const(3.0, "float32"))
            lv_5: R.Tensor((3, 3), dtype="float32") = R.power(lv1_ckout, R.const(2.0, "float32"))
            lv1_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv_4, lv_5)
            lv_6: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1_adjoint, R.const(3.0, "float32"))
            lv_7: R.Tensor((3, 3), dtype="float32") = R.power(x, R.const(2.0, "float32"))
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv_6, lv_7)
            R.output(gv_ecp, x_adjoint_out)
        return (gv_ecp, (x_adjoint_out,))
"""


def test_sequential():
    """TVM's test_sequential: kept are x and lv2 (the second segment's input); lv1 and lv3 are
    recomputed (TVM: `lv3_cp`, `lv1_cp`); lv4 and gv are recomputed by TVM too but dead, so removed.
    The returned `gv_ecp` is an output bound where it is computed (TVM: `gv_1 = gv`)."""
    after = check_gradient(SEQUENTIAL, EXPECTED_SEQUENTIAL, numeric=False)
    assert_closed_form(after, lambda x: np.sum(x**81), lambda x: 81 * x**80)


def test_sequential_consecutive():
    """TVM's test_sequential_consecutive: the end of one segment starts the next (lv2 is kept). The
    adjoint is test_sequential's (as in TVM's Expected, but for the result's name)."""
    after = check_gradient(CONSECUTIVE, EXPECTED_SEQUENTIAL, numeric=False)
    assert_closed_form(after, lambda x: np.sum(x**81), lambda x: 81 * x**80)


def test_tuple():
    """TVM's test_tuple. TVM rebuilds the whole tuple chain (`lv1_cp`, `lv2_cp = (x, lv1_cp)`, `lv3_cp`,
    `lv4_cp = lv3_cp[0]`); our simplify sees that `lv3[0]` is x itself, so the recomputation is the
    barrier pair around x alone and `R.power(lv3[0], 3)` is CSE'd with `lv1 = R.power(x, 3)` in the
    forward part (the same value)."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.power(x, R.const(3.0, "float32"))
            gv: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
            lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            x_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(x)
            lv_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(x_ckin)
            lv: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint, R.const(3.0, "float32"))
            lv_1: R.Tensor((3, 3), dtype="float32") = R.power(lv_ckout, R.const(2.0, "float32"))
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv, lv_1)
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    check_gradient(TUPLE, expected)


def test_tree():
    """TVM's test_tree, all parameters: the two segment outputs lv2 and lv3 are recomputed from the
    kept lv1, z, u, v, each right before the adjoint that reads it (TVM: both before either)."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32"), z: R.Tensor((3, 3), dtype="float32"), u: R.Tensor((3, 3), dtype="float32"), v: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"), R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.multiply(x, y)
            lv2: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1, z)
            lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(u, v)
            lv4: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2, lv3)
            gv: R.Tensor((), dtype="float32") = R.sum(lv4, axis=None, keepdims=False)
            lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            u_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(u)
            v_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(v)
            lv3_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(u_ckin, v_ckin)
            lv3_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv3_cp)
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint, lv3_ckout)
            lv1_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(lv1)
            z_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(z)
            lv2_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1_ckin, z_ckin)
            lv2_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv2_cp)
            lv3_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint, lv2_ckout)
            u_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv3_adjoint, v)
            v_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv3_adjoint, u)
            lv1_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2_adjoint, z)
            z_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2_adjoint, lv1)
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1_adjoint, y)
            y_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1_adjoint, x)
            R.output(gv, u_adjoint_out, v_adjoint_out, z_adjoint_out, x_adjoint_out, y_adjoint_out)
        return (gv, (x_adjoint_out, y_adjoint_out, z_adjoint_out, u_adjoint_out, v_adjoint_out))
"""
    check_gradient(TREE, expected)


def test_tree_one_parameter():
    """TVM's test_tree with require_grads=z: only lv3 is recomputed."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32"), y: R.Tensor((3, 3), dtype="float32"), z: R.Tensor((3, 3), dtype="float32"), u: R.Tensor((3, 3), dtype="float32"), v: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.multiply(x, y)
            lv2: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1, z)
            lv3: R.Tensor((3, 3), dtype="float32") = R.multiply(u, v)
            lv4: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2, lv3)
            gv: R.Tensor((), dtype="float32") = R.sum(lv4, axis=None, keepdims=False)
            lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            u_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(u)
            v_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(v)
            lv3_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(u_ckin, v_ckin)
            lv3_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv3_cp)
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint, lv3_ckout)
            z_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2_adjoint, lv1)
            R.output(gv, z_adjoint_out)
        return (gv, (z_adjoint_out,))
"""
    check_gradient(TREE, expected, require_grads="z")


def test_dag():
    """TVM's test_dag: three segments whose outputs join their inputs (lv4 = x * lv3, lv9 = lv4 * lv8,
    lv14 = lv9 * lv13); kept are x, lv4, lv9; each segment's two bindings are recomputed together
    (TVM: `lv7_cp`, `lv8_cp`, `lv4_cp`, `lv5_cp`, `lv1_cp`, `lv2_cp` in its renumbering); only the
    segment's output leaves the group, its inner value is used inside the group only."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv1: R.Tensor((3, 3), dtype="float32") = R.multiply(x, R.const(2.0, "float32"))
            lv2: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1, R.const(2.0, "float32"))
            lv4: R.Tensor((3, 3), dtype="float32") = R.multiply(x, lv2)
            lv6: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4, R.const(2.0, "float32"))
            lv7: R.Tensor((3, 3), dtype="float32") = R.multiply(lv6, R.const(2.0, "float32"))
            lv9: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4, lv7)
            lv11: R.Tensor((3, 3), dtype="float32") = R.multiply(lv9, R.const(2.0, "float32"))
            lv12: R.Tensor((3, 3), dtype="float32") = R.multiply(lv11, R.const(2.0, "float32"))
            lv14: R.Tensor((3, 3), dtype="float32") = R.multiply(lv9, lv12)
            gv: R.Tensor((), dtype="float32") = R.sum(lv14, axis=None, keepdims=False)
            lv14_adjoint: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            lv9_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(lv9)
            lv11_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(lv9_ckin, R.const(2.0, "float32"))
            lv12_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(lv11_cp, R.const(2.0, "float32"))
            lv12_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv12_cp)
            lv9_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv14_adjoint, lv12_ckout)
            lv12_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv14_adjoint, lv9)
            lv11_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv12_adjoint, R.const(2.0, "float32"))
            lv: R.Tensor((3, 3), dtype="float32") = R.multiply(lv11_adjoint, R.const(2.0, "float32"))
            lv9_adjoint_1: R.Tensor((3, 3), dtype="float32") = R.add(lv9_adjoint, lv)
            lv4_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(lv4)
            lv6_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_ckin, R.const(2.0, "float32"))
            lv7_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(lv6_cp, R.const(2.0, "float32"))
            lv7_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv7_cp)
            lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv9_adjoint_1, lv7_ckout)
            lv7_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv9_adjoint_1, lv4)
            lv6_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv7_adjoint, R.const(2.0, "float32"))
            lv_1: R.Tensor((3, 3), dtype="float32") = R.multiply(lv6_adjoint, R.const(2.0, "float32"))
            lv4_adjoint_1: R.Tensor((3, 3), dtype="float32") = R.add(lv4_adjoint, lv_1)
            x_ckin: R.Tensor((3, 3), dtype="float32") = R.grad.start_checkpoint(x)
            lv1_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(x_ckin, R.const(2.0, "float32"))
            lv2_cp: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1_cp, R.const(2.0, "float32"))
            lv2_ckout: R.Tensor((3, 3), dtype="float32") = R.grad.end_checkpoint(lv2_cp)
            x_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint_1, lv2_ckout)
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv4_adjoint_1, x)
            lv1_adjoint: R.Tensor((3, 3), dtype="float32") = R.multiply(lv2_adjoint, R.const(2.0, "float32"))
            lv_2: R.Tensor((3, 3), dtype="float32") = R.multiply(lv1_adjoint, R.const(2.0, "float32"))
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.add(x_adjoint, lv_2)
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    after = check_gradient(DAG, expected, numeric=False)
    # lv4 = 4 x^2, lv9 = lv4 * 4 lv4 = 64 x^4, lv14 = lv9 * 4 lv9 = 16384 x^8
    assert_closed_form(after, lambda x: np.sum(16384 * x**8), lambda x: 131072 * x**7)


def test_checkpoint_sequential():
    """TVM's test_checkpoint_sequential builds this module with nn.emit_checkpoint_sequential (nine
    `x + x` layers, segments of two); TVM cannot differentiate it (the result is not a scalar), we
    can with seeds="ones". The gradient of an add reads no forward value: nothing is recomputed, and
    every marker disappears."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((3, 3), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv: R.Tensor((3, 3), dtype="float32") = R.add(x, x)
            lv1: R.Tensor((3, 3), dtype="float32") = R.add(lv, lv)
            lv2: R.Tensor((3, 3), dtype="float32") = R.add(lv1, lv1)
            lv3: R.Tensor((3, 3), dtype="float32") = R.add(lv2, lv2)
            lv4: R.Tensor((3, 3), dtype="float32") = R.add(lv3, lv3)
            lv5: R.Tensor((3, 3), dtype="float32") = R.add(lv4, lv4)
            lv6: R.Tensor((3, 3), dtype="float32") = R.add(lv5, lv5)
            lv7: R.Tensor((3, 3), dtype="float32") = R.add(lv6, lv6)
            gv: R.Tensor((3, 3), dtype="float32") = R.add(lv7, lv7)
            gv_adjoint: R.Tensor((3, 3), dtype="float32") = R.ones(R.shape([3, 3]), dtype="float32")
            lv7_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(gv_adjoint, gv_adjoint)
            lv6_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv7_adjoint, lv7_adjoint)
            lv5_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv6_adjoint, lv6_adjoint)
            lv4_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv5_adjoint, lv5_adjoint)
            lv3_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv4_adjoint, lv4_adjoint)
            lv2_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv3_adjoint, lv3_adjoint)
            lv1_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv2_adjoint, lv2_adjoint)
            lv_adjoint: R.Tensor((3, 3), dtype="float32") = R.add(lv1_adjoint, lv1_adjoint)
            x_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.add(lv_adjoint, lv_adjoint)
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    after = check_gradient(SEQ_API, expected, numeric=False, seeds="ones")
    # nine doublings: 512 x, whose elements' sum has gradient 512
    assert_closed_form(after, lambda x: 512 * x, lambda x: np.full_like(x, 512.0))


def test_checkpoint_with_intermediate_require_grads():
    """TVM's test_checkpoint_with_intermediate_require_grads: the gradient of the segment's result,
    asked for by the name of its end_checkpoint var, is the gradient of the value it marks (named
    after it: `lv1_adjoint_out`); nothing else is needed."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3, 3), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3, 3), dtype="float32"))):
        with R.dataflow():
            lv: R.Tensor((3, 3), dtype="float32") = R.multiply(x, x)
            lv1: R.Tensor((3, 3), dtype="float32") = R.multiply(lv, x)
            gv: R.Tensor((), dtype="float32") = R.sum(lv1, axis=None, keepdims=False)
            lv1_adjoint_out: R.Tensor((3, 3), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3, 3]))
            R.output(gv, lv1_adjoint_out)
        return (gv, (lv1_adjoint_out,))
"""
    after = check_gradient(INTERMEDIATE, expected, numeric=False, require_grads="lv1_ecp")
    assert_closed_form(after, lambda x: np.sum(x**3), lambda x: np.ones_like(x))
