"""The lowered Python of every corpus and example module (and of their adjoints) computes what the executor does."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.ir.expr import Function
from retrograd.passes import Gradient
from codegen.helpers import CHECKPOINTED, assert_same, load_source, make_inputs

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


def test_lowered_source_imports_every_kernel_from_the_public_namespace():
    """`retrograd lower` names kernels only through `from retrograd.kernels import ...`: no private name,
    no factory rebuilt, no source copied; every other import is NumPy."""
    import ast

    text = retrograd.lower_to_python(retrograd.parse_file(ROOT / "examples" / "mlp.py"))
    imports = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert [ast.unparse(n) for n in imports] == [
        "import numpy as np",
        "from retrograd.kernels import add, matmul, nn_log_softmax, nn_nll_loss, nn_relu",
    ]
    adjoint = retrograd.lower_to_python(Gradient("main")(retrograd.parse_file(ROOT / "examples" / "mlp.py")))
    names = [a for n in ast.walk(ast.parse(adjoint)) if isinstance(n, ast.ImportFrom) for a in n.names]
    assert {a.name for a in names} >= {"grad_nll_loss_backward", "sum", "exp", "permute_dims"}
    assert not any(a.name.startswith("_") for a in names)
    assert "sum_" in {a.asname for a in names}  # kernels that are builtins' names are imported under another


def test_the_kernel_import_binds_every_registered_kernel():
    """The one import line, wrapped when long, binds each alias to the kernel the executor runs."""
    from retrograd.kernels import kernels
    from retrograd.codegen.kernel_refs import kernel_import

    ops = kernels()
    names = {name: f"{name}_alias" if i % 2 else name for i, name in enumerate(ops)}
    text = kernel_import(names)
    assert text.startswith("from retrograd.kernels import (\n") and text.endswith(",\n)")
    scope: dict = {}
    exec(compile(text, "lowered", "exec"), scope)  # our own generated text
    for name, alias in names.items():
        assert scope[alias] is ops[name].kernel, name
    assert kernel_import({"add": "add", "sum": "sum_"}) == "from retrograd.kernels import add, sum as sum_"


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


def test_empty_constants_keep_their_shape(tmp_path):
    # Written as nested lists, an empty constant lost its trailing dims ((2, 0, 2) became (2, 0)): the
    # lowered module broadcast to other shapes or failed where the executor ran.
    from retrograd.ir import BlockBuilder, IRModule, Var, const
    from retrograd.ir.struct_info import TensorStructInfo
    from retrograd.ops.api import R

    x = Var("x", TensorStructInfo((2, 0, 2), "float64"))
    bb = BlockBuilder()
    bb.begin_scope()
    y = bb.emit(R.add(x, const(np.zeros((2, 0, 2)))), "y")
    z = bb.emit(R.add(const(np.zeros((0, 3), "float32")), const(np.ones((4, 1, 3), "float32"))), "z")
    mod = IRModule({"main": Function([x], bb.end_scope(retrograd.ir.Tuple([y, z])))})
    assert check_module(mod, tmp_path, "empty_consts") == 1


NON_LITERAL_ATTRS = """
@R.function
def main(x: R.Tensor((3, 4), "float32")):
    y = R.layout_transform(x, index_map=lambda i, j: (j, i))
    return y
"""


def test_an_attribute_without_a_source_form_is_a_located_error():
    # An IndexMap attribute raised a raw TypeError ("internal error" from `retrograd lower`), and the
    # torch lowering's error named no binding.
    from retrograd.errors import UnsupportedError
    from retrograd.runtime.torch_source import lower_to_torch

    mod = retrograd.parse(NON_LITERAL_ATTRS)
    for lower in (retrograd.lower_to_python, lambda m: lower_to_torch(m, "m")):
        with pytest.raises(UnsupportedError, match=r"R\.layout_transform \(binding 'y'\).*index_map") as info:
            lower(mod)
        assert info.value.span is not None and info.value.span.line == 4
