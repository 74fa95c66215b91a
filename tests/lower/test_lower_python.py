"""The lowered Python of every corpus and example module (and of their adjoints) computes what the executor does."""

from __future__ import annotations

import functools
import warnings
from pathlib import Path

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.ir.expr import Function
from retrograd.passes import Gradient
from lower.helpers import CHECKPOINTED, assert_same, load_source, make_inputs

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "tests" / "corpus").glob("c*.py")) + sorted((ROOT / "examples").glob("*.py"))


def check_module(mod, tmp_path, name, seed=0):
    """Run every function through the executor and through the lowered source; returns how many agreed."""
    module = load_source(retrograd.lower_to_python(mod), tmp_path, name)
    ex = retrograd.build(mod)
    compared = 0
    for fname, func in mod.items():
        if not isinstance(func, Function):
            continue
        args = make_inputs(func, np.random.default_rng(seed))
        if any(a is None for a in args):
            continue
        # Both ways run quietly: inf and nan are results, never NumPy RuntimeWarnings.
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            try:
                want = ex[fname](*args)
            except DiagnosticError:
                with pytest.raises(Exception):
                    getattr(module, fname)(*args)
                continue
            got = getattr(module, fname)(*args)
        assert_same(got, want, f"{name}.{fname}")
        compared += 1
    return compared


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lowered_module_agrees_with_executor(path, tmp_path):
    mod = retrograd.parse_file(path)
    check_module(mod, tmp_path, path.stem)


def adjoint(mod, fname):
    """The module with fname's adjoint (of the sum of a non-scalar result), or None when it has none."""
    for options in ({}, {"seeds": "ones"}):
        try:
            return Gradient(fname, **options)(mod)
        except DiagnosticError:
            pass  # no adjoint for this function (integer result, no float parameter...)
    return None


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_lowered_adjoints_agree_with_executor(path, tmp_path):
    mod = retrograd.parse_file(path)
    done = 0
    for fname, func in list(mod.items()):
        if not isinstance(func, Function):
            continue
        adj = adjoint(mod, fname)
        if adj is not None:
            done += check_module(adj, tmp_path, f"{path.stem}_{fname}_adj")
    if path.stem in ("c01_mlp", "mlp", "c16_if_else", "c30_conv_pool", "c34_softmax_losses"):
        assert done >= 2


def test_enough_functions_are_compared(tmp_path):
    total = sum(check_module(retrograd.parse_file(p), tmp_path, p.stem) for p in FILES)
    assert total >= len(FILES)


def test_every_kernel_reference_rebuilds_the_registered_kernel():
    from retrograd.lower.kernel_refs import kernel_ref
    from retrograd.ops.registry import all_ops

    for op in all_ops():
        if op.kernel is None:
            continue
        imports, setup = kernel_ref(op, "k_alias")
        scope: dict = {}
        exec("import numpy as np\n" + "\n".join(imports + ([setup] if setup else [])), scope)  # our own text
        got, k = scope["k_alias"], op.kernel
        if got is k:
            continue
        if isinstance(k, functools.partial):  # the same function with equal bound arguments
            assert isinstance(got, functools.partial) and got.func is k.func, op.name
            assert got.args == k.args and got.keywords == k.keywords, op.name
            continue
        if got.__code__ is k.__code__:  # a factory call: the same code over equal captured values
            assert [c.cell_contents for c in got.__closure__] == [c.cell_contents for c in k.__closure__]
        else:  # a copied lambda: same parameters, defaults and names, each bound to the same object
            assert got.__name__ == "<lambda>" and k.__closure__ is None, op.name
            assert got.__code__.co_varnames == k.__code__.co_varnames and got.__defaults__ == k.__defaults__
            assert got.__code__.co_names == k.__code__.co_names, op.name
            for name in got.__code__.co_names:
                if name in scope and name in k.__globals__:
                    assert scope[name] is k.__globals__[name], (op.name, name)


def test_names_never_collide(tmp_path):
    text = """
@I.ir_module
class Module:
    @R.function
    def add(np: R.Tensor((2,), "float32"), sum: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        matmul = R.add(np, sum)
        const0 = R.multiply(matmul, R.const(2.0, "float32"))
        return const0

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        cls = Module
        add = cls.add(x, x)
        add = R.add(add, x)
        return add
"""
    mod = retrograd.parse(text)
    module = load_source(retrograd.lower_to_python(mod), tmp_path, "names")
    x = np.array([1.5, -2.0], "float32")
    assert_same(module.main(x), retrograd.build(mod)["main"](x))
    assert np.array_equal(module.main(x), (x + x) * 2 + x)


def test_checkpointed_adjoint_agrees(tmp_path):
    adj = Gradient("main")(retrograd.parse(CHECKPOINTED))
    assert "grad_end_checkpoint(" in retrograd.lower_to_python(adj)
    assert check_module(adj, tmp_path, "ckpt_adj") == 2


def test_lowered_functions_are_quiet_about_ieee_results_like_the_executor(tmp_path):
    # log(0) - log(0) is -inf - -inf, nan in both; a recursive call re-enters the errstate, and the
    # caller's NumPy error settings are what they were afterwards.
    mod = retrograd.parse("""
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), "float64"), c: R.Tensor((), "bool")) -> R.Tensor((3,), "float64"):
        cls = Module
        if c:
            a = R.log(x)
            y = R.subtract(a, a)
        else:
            y = cls.main(x, R.const(True))
        return y
""")
    module = load_source(retrograd.lower_to_python(mod), tmp_path, "quiet")
    x = np.array([-1.0, 0.0, 4.0])
    expected = [np.nan, np.nan, 0.0]
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for c in (True, False):
            np.testing.assert_array_equal(module.main(x, np.array(c)), expected)
            np.testing.assert_array_equal(retrograd.build(mod)["main"](x, np.array(c)), expected)
    assert np.geterr() == before
