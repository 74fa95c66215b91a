"""from_tvm / to_tvm against TVM's own objects: every corpus script and op case, constants, errors."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import retrograd
from retrograd.errors import TypeInferenceError, UnsupportedError
from retrograd.frontend import from_tvm, to_tvm
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Function, Var, const
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "ops"))
from all_cases import ALL_CASES  # noqa: E402 - tests/ops holds the op cases
from optional import need  # noqa: E402

CORPUS = sorted((TESTS / "corpus").glob("c*.py"))


def _tvm_source(text):
    return need("tvm.script").from_source(text)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_from_tvm_objects_equals_our_parse(path):
    """retrograd's parser is the reference: TVM's objects of the same script convert to the same module."""
    text = path.read_text()
    if "# tvm-source:" in text:
        pytest.skip("TVM cannot read this script")
    ours = retrograd.parse_file(path)
    retrograd.assert_structural_equal(from_tvm(_tvm_source(text)), ours)
    # and our printing of it, through to_tvm, comes back the same
    retrograd.assert_structural_equal(from_tvm(to_tvm(ours)), ours)


TVM_CASES = [c for c in ALL_CASES if c.tvm]


@pytest.mark.parametrize("case", TVM_CASES, ids=[c.id for c in TVM_CASES])
def test_every_op_case_converts_like_our_parser_reads_tvm_text(case):
    """Each op's arguments and attributes read from TVM's Call objects (TVM's attribute names,
    arguments TVM passes as expressions that retrograd keeps as attributes) give the call retrograd's
    parser reads from TVM's printing of the same objects (TVM canonicalizes: reshape's -1 resolved,
    arange's and eye's defaults filled in)."""
    need("tvm.script")
    tvm_mod = to_tvm(case.build())
    retrograd.assert_structural_equal(from_tvm(tvm_mod), retrograd.parse(tvm_mod.script()))


def _const_module(*constants):
    bb = BlockBuilder()
    x = Var("x", TensorStructInfo((4, 6), "float32"))
    bb.begin_scope()
    y = x
    for c in constants:
        y = bb.emit(R.add(y, c), "y")
    body = bb.end_scope(y)
    return IRModule({"main": Function((x,), body)})


def _tvm_constants(tvm_mod):
    out = []
    for block in tvm_mod["main"].body.blocks:
        for b in block.bindings:
            for a in b.value.args:
                v = getattr(a, "value", None)
                if hasattr(v, "numpy"):
                    out.append(v.numpy())
    return out


def test_to_tvm_binds_constants_inline_metadata_and_special():
    """Large constants go through our metadata section, small ones inline; TVM reads the same values."""
    rng = np.random.default_rng(0)
    big = rng.standard_normal((4, 6)).astype("float32")
    small = np.array([1.5, -2.25, 3.0, 0.1], "float32").reshape(1, 4)[:, :1].copy()
    special = np.array([[np.inf, -np.inf, 0.0, -0.0, 1e-30, 3.4e38]], "float32")
    mod = _const_module(const(big), const(small), const(special))
    assert 'metadata["relax.expr.Constant"][0]' in mod.script()
    need("tvm.script")
    tvm_mod = to_tvm(mod)
    got = _tvm_constants(tvm_mod)
    assert len(got) == 3
    for want, have in zip((big, small, special), got):
        assert have.dtype == want.dtype and have.shape == want.shape
        np.testing.assert_array_equal(have, want)
        assert (np.signbit(have) == np.signbit(want)).all()
    retrograd.assert_structural_equal(from_tvm(tvm_mod), mod)


def test_to_tvm_module_runs_like_ours():
    """The TVM module to_tvm makes computes what retrograd's does (TVM compiles and runs it)."""
    tvm = need("tvm")
    relax = need("tvm.relax")

    big = np.arange(24, dtype="float32").reshape(4, 6) / 7
    mod = _const_module(const(big))
    x = np.random.default_rng(1).standard_normal((4, 6)).astype("float32")
    vm = relax.VirtualMachine(tvm.compile(to_tvm(mod), target="llvm"), tvm.cpu())
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), x + big, rtol=1e-6)


PRIM_FUNC = """
@I.ir_module
class Module:
    @T.prim_func
    def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        for i in range(4):
            B[i] = A[i] + T.float32(1)

    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((4,), "float32"))
        return y

    @R.function
    def other(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        y = R.nn.relu(x)
        return y
"""


def test_call_tir_is_a_clear_error_naming_the_op_and_callee():
    tvm_mod = _tvm_source(PRIM_FUNC.replace("out_sinfo", "out_ty") if _needs_out_ty() else PRIM_FUNC)
    with pytest.warns(UserWarning, match="add_one"), pytest.raises(UnsupportedError) as info:
        from_tvm(tvm_mod)
    message = str(info.value)
    assert "relax.call_tir" in message and "add_one" in message and "main" in message


def _needs_out_ty():
    import inspect

    tvm_r = need("tvm.script.relax")

    return "out_ty" in inspect.signature(tvm_r.call_tir).parameters


def test_an_unused_prim_func_is_skipped_with_a_warning():
    tvm = need("tvm")
    tvm_mod = _tvm_source(PRIM_FUNC.replace("out_sinfo", "out_ty") if _needs_out_ty() else PRIM_FUNC)
    only = tvm.IRModule({gv: f for gv, f in tvm_mod.functions.items() if str(gv.name_hint) != "main"})
    with pytest.warns(UserWarning, match="skipped functions retrograd cannot hold \\(add_one\\)"):
        mod = from_tvm(only)
    assert list(mod) == ["other"]
    x = np.array([-1.0, 2.0, -3.0, 4.0], "float32")
    np.testing.assert_array_equal(retrograd.build(mod)["other"](x), np.maximum(x, 0))


def test_an_op_retrograd_lacks_names_the_op():
    tvm_mod = _tvm_source(
        "@R.function\ndef main(x: R.Tensor((4,), 'float32')):\n    y = R.memory.ensure_zero_offset(x)\n    return y\n"
    )
    with pytest.raises(UnsupportedError, match="relax.memory.ensure_zero_offset"):
        from_tvm(tvm_mod)


MATCH_CAST = """
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    same = R.match_cast(x, R.Tensor((n, 4), "float32"))
    looser = R.match_cast(x, R.Tensor(ndim=2, dtype="float32"))
    y = R.add(same, looser)
    narrowed = R.match_cast(y, R.Tensor((3, 4), "float32"))
    return narrowed
"""


def test_match_cast_that_only_restates_is_a_binding_narrowing_is_an_error():
    tvm_mod = _tvm_source(MATCH_CAST)
    with pytest.raises(UnsupportedError, match="match_cast of 'narrowed' narrows"):
        from_tvm(tvm_mod)
    ok = _tvm_source(MATCH_CAST.replace("narrowed = R.match_cast(y, R.Tensor((3, 4), \"float32\"))", "narrowed = y"))
    mod = from_tvm(ok)
    x = np.arange(8, dtype="float32").reshape(2, 4)
    np.testing.assert_array_equal(retrograd.build(mod)["main"](x), x + x)


def test_symbolic_dims_and_a_bare_function():
    tvm_mod = _tvm_source(
        "@R.function\ndef f(x: R.Tensor(('n', 'm'), 'float32')):\n"
        "    y = R.reshape(x, R.shape([-1]))\n    z = R.concat((y, y))\n    return z\n"
    )
    mod = from_tvm(tvm_mod)
    assert list(mod) == ["f"]
    assert mod["f"].ret_struct_info.ndim == 1
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(retrograd.build(mod)["f"](x), np.concatenate([x.ravel()] * 2))


def test_a_disagreeing_static_inference_is_an_error(monkeypatch):
    """A retrograd inference that differs from TVM's on a static shape is reported, naming the binding."""
    import retrograd.frontend.tvm_import as module

    tvm_mod = _tvm_source("@R.function\ndef main(x: R.Tensor((2, 3), 'float32')):\n    y = R.sum(x, axis=[1])\n    return y\n")
    real = module.to_sinfo
    monkeypatch.setattr(module, "to_sinfo", lambda ty: TensorStructInfo((7,), "float32") if "(2,)" in str(ty) else real(ty))
    with pytest.raises(TypeInferenceError, match=r"retrograd infers Tensor\(\(2,\), float32\) for 'y' where TVM has Tensor\(\(7,\), float32\) \(a call of relax.sum\)"):
        module.from_tvm(tvm_mod)


def test_frontend_imports_tvm_only_when_called():
    code = "import sys, retrograd, retrograd.frontend; assert 'tvm' not in sys.modules, 'imported tvm'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_to_tvm_without_tvm_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "tvm", None)
    with pytest.raises(UnsupportedError, match="to_tvm needs TVM"):
        to_tvm(_const_module(const(np.ones((4, 6), "float32"))))


def test_from_tvm_drops_no_attribute_silently():
    tvm_mod = _tvm_source(
        "@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor((2,), 'float32')):\n"
        "        R.func_attr({'num_input': 1, 'note': 'kept'})\n        y = R.exp(x)\n        return y\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mod = from_tvm(tvm_mod)
    assert mod["main"].attrs == {"num_input": 1, "note": "kept"}


CNN = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 1, 8, 8), "float32"), w: R.Tensor((4, 1, 3, 3), "float32"),
             lin: R.Tensor((36, 3), "float32"), y: R.Tensor((2,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            c = R.nn.conv2d(x, w)
            r = R.nn.relu(c)
            p = R.nn.max_pool2d(r, pool_size=[2, 2], strides=[2, 2])
            f = R.reshape(p, R.shape([2, 36]))
            s = R.nn.log_softmax(R.matmul(f, lin))
            loss = R.nn.nll_loss(s, y)
            R.output(loss)
        return loss
"""


def test_tvm_gradient_output_runs_in_retrograd_like_our_gradient():
    """TVM's own Gradient pass (grad.nll_loss_backward, grad.max_pool2d_backward, conv2d_transpose,
    ...) converted with from_tvm computes what retrograd's Gradient of the same module computes."""
    tvm_mod = _tvm_source(CNN)
    relax = need("tvm.relax")

    theirs = from_tvm(relax.transform.Gradient("main")(tvm_mod))
    ours = retrograd.passes.Gradient("main", ["x", "w", "lin"])(from_tvm(tvm_mod))
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype("float32") for s in ((2, 1, 8, 8), (4, 1, 3, 3), (36, 3))]
    values.append(np.array([0, 2]))
    loss_t, grads_t = retrograd.build(theirs)["main_adjoint"](*values)
    loss_o, grads_o = retrograd.build(ours)["main_adjoint"](*values)
    np.testing.assert_allclose(loss_t, loss_o, rtol=1e-6)
    assert len(grads_t) == 4 and len(grads_o) == 3  # TVM also returns a (zero) gradient for the labels
    for a, b in zip(grads_t, grads_o):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_from_tvm_of_something_else_is_a_clear_error():
    with pytest.raises(UnsupportedError, match="expects a TVM IRModule or Relax function, got str"):
        from_tvm("@R.function\ndef main(): ...")
