"""Checkpoint markers in Gradient beyond TVM's tests: If, calls and several blocks inside segments, values
bitwise equal to the unmarked adjoint's, barriers that clean-up cannot undo, the executor's measured
peak on a marked chain, TVM 0.27 as an oracle, second order and deep segments."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import retrograd
from passes.checkpoint_cases import BLOCKS, CONSECUTIVE, DAG, H, IF_CALL, INTERMEDIATE, SEQ_API, SEQUENTIAL, SPARSE, TREE, TUPLE, TWO_GROUPS, chain, unmarked
from passes.helpers import check_gradient, random_inputs
from retrograd.analysis import peak_memory
from retrograd.ir.vars import read_vars
from retrograd.ir.expr import Call
from retrograd.ir.module import IRModule
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient, parse_pipeline
from optional import need  # noqa: E402

START, END = "relax.grad.start_checkpoint", "relax.grad.end_checkpoint"

CASES = {
    "sequential": (SEQUENTIAL, {}),
    "consecutive": (CONSECUTIVE, {}),
    "tuple": (TUPLE, {}),
    "tree": (TREE, {}),
    "tree_z": (TREE, {"require_grads": "z"}),
    "dag": (DAG, {}),
    "checkpoint_sequential": (SEQ_API, {"seeds": "ones"}),
    "intermediate": (INTERMEDIATE, {"require_grads": "lv1_ecp"}),
    "if_call": (IF_CALL, {}),
    "blocks": (BLOCKS, {}),
    "two_groups": (TWO_GROUPS, {}),  # x is the input of two recomputations, at two backward bindings
    "sparse": (SPARSE, {"sparse_grads": ["table"]}),  # the gathered rows' indices are read in a segment
    "two_targets": (SPARSE, {"target_index": [0, 1], "seeds": "ones", "require_grads": ["x", "table"]}),
}


def flat(value) -> list:
    return [np.asarray(value)] if not isinstance(value, tuple) else [a for v in value for a in flat(v)]


def assert_bitwise(a, b) -> None:
    fa, fb = flat(a), flat(b)
    assert len(fa) == len(fb)
    for x, y in zip(fa, fb):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def op_name(value):
    return getattr(value.op, "name", None) if isinstance(value, Call) else None


def top_bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def assert_barriers(adjoint) -> int:
    """The barrier structure of `adjoint` (see test_recomputations_sit_behind_barriers); returns the
    number of recomputed bindings."""
    kind: dict = {}
    for b in top_bindings(adjoint):
        name_ = b.var.name_hint
        op = op_name(b.value)
        reads: list = []
        read_vars(b.value, reads)
        if op == START:
            assert name_.endswith("_ckin")
            kind[b.var] = "ckin"
        elif op == END:
            assert name_.endswith("_ckout") and len(reads) == 1 and kind.get(reads[0]) in ("cp", "ckin")
            kind[b.var] = "ckout"
        elif name_.endswith("_cp"):
            assert reads and all(kind.get(v) in ("cp", "ckin") for v in reads), name_
            kind[b.var] = "cp"
        else:
            assert not any(kind.get(v) in ("cp", "ckin") for v in reads), f"{name_} reads inside a group"
    return sum(1 for k in kind.values() if k == "rc")


def test_if_and_call_inside_a_segment():
    """An If and a call to another function inside a segment are recomputed as they are (the If with
    fresh branch variables, its condition read through a barrier like every input of the group)."""
    expected = H + """    @R.function
    def square(a: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        b: R.Tensor((3,), dtype="float32") = R.multiply(a, a)
        return b

    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        cls = Module
        a: R.Tensor((3,), dtype="float32") = R.sin(x)
        k: R.Tensor((3,), dtype="float32") = R.exp(y)
        if c:
            r_then: R.Tensor((3,), dtype="float32") = R.exp(a)
            r: R.Tensor((3,), dtype="float32") = r_then
        else:
            r_else: R.Tensor((3,), dtype="float32") = R.multiply(a, k)
            r: R.Tensor((3,), dtype="float32") = r_else
        q: R.Tensor((3,), dtype="float32") = cls.square(r)
        t: R.Tensor((3,), dtype="float32") = R.tanh(q)
        lv: R.Tensor((3,), dtype="float32") = R.multiply(t, y)
        out: R.Tensor((), dtype="float32") = R.sum(lv, axis=None, keepdims=False)
        lv_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
        t_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, y)
        y_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, t)
        lv_1: R.Tensor((3,), dtype="float32") = R.multiply(t, t)
        lv_2: R.Tensor((3,), dtype="float32") = R.subtract(R.const(1.0, "float32"), lv_1)
        q_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(t_adjoint, lv_2)
        x_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(x)
        c_ckin: R.Tensor((), dtype="bool") = R.grad.start_checkpoint(c)
        k_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(k)
        a_cp: R.Tensor((3,), dtype="float32") = R.sin(x_ckin)
        if c_ckin:
            r_1: R.Tensor((3,), dtype="float32") = R.exp(a_cp)
            r_cp: R.Tensor((3,), dtype="float32") = r_1
        else:
            r_2: R.Tensor((3,), dtype="float32") = R.multiply(a_cp, k_ckin)
            r_cp: R.Tensor((3,), dtype="float32") = r_2
        a_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(a_cp)
        r_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(r_cp)
        lv_3: R.Tensor((3,), dtype="float32") = cls.square_vjp(r_ckout, q_adjoint)
        if c:
            r_3: R.Tensor((3,), dtype="float32") = R.exp(a_ckout)
            a_cp_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_3, r_3)
            lv_5: R.Tensor((3,), dtype="float32") = R.zeros(R.shape([3]), dtype="float32")
            lv_4: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (a_cp_adjoint, lv_5)
        else:
            a_cp_adjoint_1: R.Tensor((3,), dtype="float32") = R.multiply(lv_3, k)
            k_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_3, a_ckout)
            lv_4: R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32")) = (a_cp_adjoint_1, k_adjoint)
        lv_6: R.Tensor((3,), dtype="float32") = lv_4[0]
        lv_7: R.Tensor((3,), dtype="float32") = lv_4[1]
        lv_8: R.Tensor((3,), dtype="float32") = R.multiply(lv_7, k)
        y_adjoint_1: R.Tensor((3,), dtype="float32") = R.add(y_adjoint, lv_8)
        lv_9: R.Tensor((3,), dtype="float32") = R.cos(x)
        x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_6, lv_9)
        return (out, (x_adjoint, y_adjoint_1))

    @R.function(private=True)
    def square_vjp(a: R.Tensor((3,), dtype="float32"), b_adjoint: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        with R.dataflow():
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint, a)
            a_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(a_adjoint, a_adjoint)
            R.output(a_adjoint_out)
        return a_adjoint_out
"""
    check_gradient(IF_CALL, expected)


def test_segments_across_blocks():
    """Segments in two dataflow blocks with a binding between them: the backward part is a block of its
    own, and a value recomputed for one group (a_ckout) is an input of a later one (read through a_ckin)."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32"), y: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"), R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.sin(x)
            b: R.Tensor((3,), dtype="float32") = R.multiply(a, y)
            R.output(a, b)
        d: R.Tensor((3,), dtype="float32") = R.cos(b)
        with R.dataflow():
            f: R.Tensor((3,), dtype="float32") = R.exp(d)
            g: R.Tensor((3,), dtype="float32") = R.tanh(f)
            lv: R.Tensor((3,), dtype="float32") = R.multiply(g, a)
            out: R.Tensor((), dtype="float32") = R.sum(lv, axis=None, keepdims=False)
            lv_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            x_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(x)
            a_cp: R.Tensor((3,), dtype="float32") = R.sin(x_ckin)
            a_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(a_cp)
            g_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, a_ckout)
            d_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(d)
            f_cp: R.Tensor((3,), dtype="float32") = R.exp(d_ckin)
            g_cp: R.Tensor((3,), dtype="float32") = R.tanh(f_cp)
            f_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(f_cp)
            g_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(g_cp)
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, g_ckout)
            lv_1: R.Tensor((3,), dtype="float32") = R.multiply(g_ckout, g_ckout)
            lv_2: R.Tensor((3,), dtype="float32") = R.subtract(R.const(1.0, "float32"), lv_1)
            f_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(g_adjoint, lv_2)
            d_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(f_adjoint, f_ckout)
            a_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(a_ckout)
            y_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(y)
            b_cp: R.Tensor((3,), dtype="float32") = R.multiply(a_ckin, y_ckin)
            b_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(b_cp)
            lv_3: R.Tensor((3,), dtype="float32") = R.sin(b_ckout)
            lv_4: R.Tensor((3,), dtype="float32") = R.multiply(d_adjoint, lv_3)
            b_adjoint: R.Tensor((3,), dtype="float32") = R.negative(lv_4)
            lv_5: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint, y)
            a_adjoint_1: R.Tensor((3,), dtype="float32") = R.add(a_adjoint, lv_5)
            y_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint, a_ckout)
            lv_6: R.Tensor((3,), dtype="float32") = R.cos(x)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint_1, lv_6)
            R.output(out, y_adjoint_out, x_adjoint_out)
        return (out, (x_adjoint_out, y_adjoint_out))
"""
    check_gradient(BLOCKS, expected)


def test_one_input_two_groups():
    """x feeds two recomputations needed at the same backward binding (one by each partial of the
    multiply): each group reads x through a start_checkpoint of its own, which clean-up keeps apart."""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3,), dtype="float32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tuple(R.Tensor((3,), dtype="float32"))):
        with R.dataflow():
            a: R.Tensor((3,), dtype="float32") = R.exp(x)
            b: R.Tensor((3,), dtype="float32") = R.sin(x)
            lv: R.Tensor((3,), dtype="float32") = R.multiply(a, b)
            gv: R.Tensor((), dtype="float32") = R.sum(lv, axis=None, keepdims=False)
            lv_adjoint: R.Tensor((3,), dtype="float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            x_ckin: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(x)
            b_cp: R.Tensor((3,), dtype="float32") = R.sin(x_ckin)
            b_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(b_cp)
            a_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, b_ckout)
            x_ckin_1: R.Tensor((3,), dtype="float32") = R.grad.start_checkpoint(x)
            a_cp: R.Tensor((3,), dtype="float32") = R.exp(x_ckin_1)
            a_ckout: R.Tensor((3,), dtype="float32") = R.grad.end_checkpoint(a_cp)
            b_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(lv_adjoint, a_ckout)
            lv_1: R.Tensor((3,), dtype="float32") = R.cos(x)
            x_adjoint: R.Tensor((3,), dtype="float32") = R.multiply(b_adjoint, lv_1)
            lv_2: R.Tensor((3,), dtype="float32") = R.multiply(a_adjoint, a_ckout)
            x_adjoint_out: R.Tensor((3,), dtype="float32") = R.add(x_adjoint, lv_2)
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    check_gradient(TWO_GROUPS, expected)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("cleanup", [True, False])
def test_bitwise_equal_to_the_unmarked_adjoint(name, cleanup):
    """Recomputation runs the same kernels on the same inputs: results and gradients are bitwise equal
    to those of the same function without markers."""
    text, options = CASES[name]
    plain = Gradient("main", cleanup=cleanup, **options)(retrograd.parse(unmarked(text)))
    marked = Gradient("main", cleanup=cleanup, **options)(retrograd.parse(text))
    for seed in (0, 1):
        args = random_inputs(retrograd.parse(text), seed=seed)
        assert_bitwise(retrograd.build(marked)["main_adjoint"](*args), retrograd.build(plain)["main_adjoint"](*args))


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("cleanup", [True, False])
def test_recomputations_sit_behind_barriers(name, cleanup):
    """Each recomputed binding (`<v>_cp`) reads only barrier inputs (`<v>_ckin` = start_checkpoint) and
    other recomputed bindings of its group, and leaves only through `<v>_ckout` = end_checkpoint(<v>_cp):
    no forward value is read by a recomputation, so CSE has nothing to merge it with. Any other
    binding reads no barrier input nor recomputed value: the user's markers are gone."""
    text, options = CASES[name]
    adjoint = Gradient("main", cleanup=cleanup, **options)(retrograd.parse(text))["main_adjoint"]
    assert_barriers(adjoint)


def run_adjoint(text: str, args: list, **options):
    """Outputs and run statistics of the adjoint, which the static memory model must predict exactly."""
    mod = Gradient("main", **options)(retrograd.parse(text))
    fn = retrograd.build(mod)["main_adjoint"]
    out = fn(*args)
    assert peak_memory(mod, "main_adjoint") == fn.exe.stats.peak_live_bytes
    return out, fn.exe.stats


@pytest.mark.parametrize("matmul", [False, True])
def test_marked_chain_peak_memory(matmul):
    """32 layers with a segment every 8: the unmarked adjoint keeps every layer's output for the
    backward part (32 activations at least); the marked one keeps the 3 segment inputs h7, h15, h23
    and recomputes one segment at a time (8 activations) next to a few adjoints. Measured by the
    executor (and predicted exactly by the static memory model), with gradients bitwise equal."""
    layers, batch, width = 32, 256, 64
    act = batch * width * 4
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((batch, width)).astype("float32")]
    if matmul:
        args += [(rng.standard_normal((width, width)) / np.sqrt(width)).astype("float32") for _ in range(layers)]
    plain, plain_stats = run_adjoint(chain(layers, 0, width, batch, matmul), args)
    marked, marked_stats = run_adjoint(chain(layers, 8, width, batch, matmul), args)
    assert_bitwise(plain, marked)
    plain_acts = plain_stats.peak_intermediate_bytes / act
    marked_acts = marked_stats.peak_intermediate_bytes / act
    assert plain_acts >= 32
    assert marked_acts <= 16
    assert marked_stats.peak_live_bytes <= plain_stats.peak_live_bytes - 16 * act


def test_clean_up_and_round_trip_keep_the_recomputation():
    """cse, simplify, fold-constant and dce over the marked adjoint, then printing and parsing it back,
    leave the measured peak and the values unchanged: the barriers keep each recomputation apart."""
    text = chain(16, 4)
    args = [np.random.default_rng(1).standard_normal((256, 64)).astype("float32")]
    mod = Gradient("main")(retrograd.parse(text))
    fn = retrograd.build(mod)["main_adjoint"]
    want = fn(*args)
    peak = fn.exe.stats.peak_live_bytes
    again = parse_pipeline("fold-constant, simplify, cse, dce")(mod)
    again = retrograd.parse(again.script())
    fn2 = retrograd.build(again)["main_adjoint"]
    assert_bitwise(fn2(*args), want)
    assert fn2.exe.stats.peak_live_bytes == peak
    plain = retrograd.build(Gradient("main")(retrograd.parse(chain(16, 0))))["main_adjoint"]
    plain(*args)
    assert peak < plain.exe.stats.peak_live_bytes


def test_second_order_over_the_barriers():
    """Differentiating a marked adjoint again treats its barriers as segments (values identical), and
    the second-order adjoint agrees with the one of the unmarked adjoint. Not bitwise: a recomputed
    value is a variable of its own, so its adjoint reaches x along another path and the partial sums
    are added in another order."""
    x = np.random.default_rng(2).standard_normal((4, 3)).astype("float32")
    results = []
    for every in (0, 2):
        first = Gradient("main")(retrograd.parse(chain(6, every, width=3, batch=4)))
        second = Gradient("main_adjoint", target_index=None, seeds="ones")(first)
        results.append(flat(retrograd.build(second)["main_adjoint_adjoint"](x)))
    assert len(results[0]) == len(results[1])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_segment_ten_times_the_recursion_limit():
    """A segment as long as ten recursion limits is recomputed without recursion."""
    layers = 10 * sys.getrecursionlimit()
    x = np.linspace(-1, 1, 6, dtype="float32").reshape(2, 3)
    got = retrograd.build(Gradient("main")(retrograd.parse(chain(layers, layers, width=3, batch=2))))["main_adjoint"](x)
    v, expected = x.astype(np.float64), np.ones((2, 3))
    for _ in range(layers):
        v = np.tanh(v)
        expected *= 1 - v * v
    np.testing.assert_allclose(got[1][0], expected, rtol=1e-3)


def test_marker_of_a_constant():
    """A marker of a constant (not a variable) becomes a plain binding of the constant."""
    before = H + """    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        with R.dataflow():
            c = R.grad.start_checkpoint(R.const(2.0, "float32"))
            a = R.multiply(x, c)
            b = R.grad.end_checkpoint(R.const(1.0, "float32"))
            gv = R.sum(R.add(R.exp(a), b))
            R.output(gv)
        return gv
"""
    expected = H + """    @R.function
    def main_adjoint(x: R.Tensor((3,), "float32")) -> R.Tuple(R.Tensor((), "float32"), R.Tuple(R.Tensor((3,), "float32"))):
        with R.dataflow():
            a: R.Tensor((3,), "float32") = R.multiply(x, R.const(2.0, "float32"))
            lv: R.Tensor((3,), "float32") = R.exp(a)
            lv1: R.Tensor((3,), "float32") = R.add(lv, R.const(1.0, "float32"))
            gv: R.Tensor((), "float32") = R.sum(lv1, axis=None, keepdims=False)
            lv_adjoint: R.Tensor((3,), "float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([3]))
            a_adjoint: R.Tensor((3,), "float32") = R.multiply(lv_adjoint, lv)
            x_adjoint_out: R.Tensor((3,), "float32") = R.multiply(a_adjoint, R.const(2.0, "float32"))
            R.output(gv, x_adjoint_out)
        return (gv, (x_adjoint_out,))
"""
    check_gradient(before, expected)


# -- TVM 0.27 as an oracle -----------------------------------------------------------------------------

TVM_CASES = {
    "sequential": (SEQUENTIAL, None),
    "consecutive": (CONSECUTIVE, None),
    "tuple": (TUPLE, None),
    "tree": (TREE, None),
    "tree_z": (TREE, "z"),
    "dag": (DAG, None),
    "intermediate": (INTERMEDIATE, "lv1_ecp"),
    "intermediate_params": (INTERMEDIATE, None),
}


def recomputed(text: str) -> set:
    """Names of the forward values an adjoint's text recomputes (`<v>_cp`, TVM's name and ours)."""
    return set(re.findall(r"\b(\w+?)_cp\b", text))


@pytest.mark.parametrize("name", list(TVM_CASES))
def test_against_tvm(name):
    """TVM's own Gradient on the same module: the same values, and the same forward values recomputed
    (but for the tuple case, where our simplify finds that lv3[0] is x and rebuilds nothing)."""
    tvm = need("tvm")
    relax = need("tvm.relax")

    text, required = TVM_CASES[name]
    tmod = tvm.script.from_source(text)
    options = {}
    if required is not None:
        bound = {b.var.name: b.var for block in tmod["main"].body.blocks for b in block.bindings}
        bound.update({p.name: p for p in tmod["main"].params})
        options["require_grads"] = [bound[required]]
    theirs = relax.transform.Gradient("main", **options)(tmod)
    ours = Gradient("main", require_grads=required)(retrograd.parse(text))
    if name != "tuple":
        ours_text = IRModule({"main_adjoint": ours["main_adjoint"]}).script()
        assert recomputed(ours_text) == recomputed(theirs["main_adjoint"].script())
    args = random_inputs(retrograd.parse(text), seed=3)
    vm = relax.VirtualMachine(tvm.compile(theirs, target="llvm"), tvm.cpu())
    t_value, t_grads = vm["main_adjoint"](*[tvm.runtime.tensor(a) for a in args])
    value, grads = retrograd.build(ours)["main_adjoint"](*args)
    np.testing.assert_allclose(value, t_value.numpy(), rtol=1e-5, atol=1e-5)
    assert len(grads) == len(t_grads)
    for g, t in zip(grads, t_grads):
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(g).max())))


# -- random programs ---------------------------------------------------------------------------------

UNARY = ("R.sin", "R.tanh", "R.sigmoid", "R.cos", "R.exp")
BINARY = ("R.add", "R.multiply", "R.subtract", "R.maximum")


def random_program(rng) -> str:
    """A random DAG of element-wise ops over x, y (some results tupled and projected back), with random
    start/end_checkpoint markers around reads and results, in one or two dataflow blocks."""
    t = 'R.Tensor((4,), "float32")'
    values, lines, blocks, k = ["x", "y"], [], [], 0

    def read() -> str:
        nonlocal k
        v = values[int(rng.integers(max(0, len(values) - 4), len(values)))]
        if rng.random() < 0.3:
            k += 1
            lines.append(f"m{k} = R.grad.start_checkpoint({v})")
            return f"m{k}"
        return v

    for i in range(int(rng.integers(4, 14))):
        if rng.random() < 0.1:
            a, b = read(), read()
            lines += [f"t{i} = ({a}, {b})", f"v{i} = t{i}[{int(rng.integers(0, 2))}]"]
        elif rng.random() < 0.5:
            lines.append(f"v{i} = {UNARY[int(rng.integers(len(UNARY)))]}({read()})")
        else:
            lines.append(f"v{i} = {BINARY[int(rng.integers(len(BINARY)))]}({read()}, {read()})")
        values.append(f"v{i}")
        if rng.random() < 0.3:
            lines.append(f"e{i} = R.grad.end_checkpoint(v{i})")
            values[-1] = f"e{i}"
        if len(blocks) == 0 and i >= 3 and rng.random() < 0.2:
            blocks.append((lines, list(values)))
            lines = []
    last = values[-1]
    lines += [f"gv = R.sum(R.multiply({last}, {values[-2]}))", "R.output(gv)"]
    text = H + f"    @R.function\n    def main(x: {t}, y: {t}) -> R.Tensor((), \"float32\"):\n"
    for body, visible in blocks:
        # every value the second block may read leaves the first one
        outs = ", ".join(v for v in visible if v not in ("x", "y")) or "x"
        text += "        with R.dataflow():\n" + "".join(f"            {line}\n" for line in body + [f"R.output({outs})"])
    text += "        with R.dataflow():\n" + "".join(f"            {line}\n" for line in lines)
    return text + "        return gv\n"


@pytest.mark.parametrize("seed", range(60))
def test_random_programs(seed):
    """Random segments over random DAGs: well formed, input untouched, values bitwise those of the
    unmarked adjoint (before and after the clean-up pipeline and a print/parse round trip), every
    recomputation behind barriers, the measured peak predicted exactly by the memory model."""
    rng = np.random.default_rng(seed)
    text = random_program(rng)
    marked_mod = retrograd.parse(text)
    before = marked_mod.script()
    marked = Gradient("main")(marked_mod)
    assert marked_mod.script() == before
    assert well_formed(marked) == []
    plain = Gradient("main")(retrograd.parse(unmarked(text)))
    args = random_inputs(marked_mod, seed=seed)
    want = retrograd.build(plain)["main_adjoint"](*args)
    fn = retrograd.build(marked)["main_adjoint"]
    assert_bitwise(fn(*args), want)
    assert peak_memory(marked, "main_adjoint") == fn.exe.stats.peak_live_bytes
    assert_barriers(marked["main_adjoint"])
    again = retrograd.parse(parse_pipeline("cse, simplify, fold-constant, dce")(marked).script())
    assert_bitwise(retrograd.build(again)["main_adjoint"](*args), want)
