"""Gradient pass errors: GradientError naming the function and, where there is one, the binding's location."""

from __future__ import annotations

import pytest
from passes.helpers import redefine_op

import retrograd
from retrograd.errors import GradientError
from retrograd.ir.module import IRModule
from retrograd.passes.gradient import Gradient

HEAD = "@I.ir_module\nclass Module:\n"

MAIN = HEAD + '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), w: R.Tensor((3,), "float32"), idx: R.Tensor((2,), "int64"), t: R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32"))) -> R.Tuple(R.Tensor((), "float32"), R.Tensor((3,), "float32"), R.Tensor((), "int64"), R.Tuple(R.Tensor((3,), "float32"), R.Tensor((3,), "float32")), R.Tensor((), "float32")):
        with R.dataflow():
            a = R.multiply(x, w)
            b = R.exp(a)
            s = R.sum(b)
            n = R.sum(idx)
            R.output(b, s, n)
        return (s, b, n, t, R.const(1.0, "float32"))
'''


@pytest.fixture(scope="module")
def mod():
    return retrograd.parse(MAIN, source_name="model.py")


def _error(mod, *args, **kwargs) -> str:
    with pytest.raises(GradientError) as info:
        Gradient(*args, **kwargs)(mod)
    text = str(info.value)
    assert "gradient error" in text
    return text


def test_function_not_found(mod):
    text = _error(mod, "mian")
    assert "no function named 'mian'" in text and "functions: main" in text


def test_not_a_relax_function(mod):
    bad = IRModule({"main": mod["main"], "table": object()})
    assert "'table' is not a Relax function" in _error(bad, "table")


def test_target_not_a_tensor(mod):
    text = _error(mod, "main", target_index=3)
    assert "in function 'main'" in text and "return field 3" in text and "is a tuple, not a tensor" in text
    # The location is the function's definition line.
    assert text.startswith("model.py:5:")


def test_target_not_floating_point(mod):
    assert "not floating point (dtype int64)" in _error(mod, "main", target_index=2)


def test_target_not_a_scalar_unless_seeded(mod):
    text = _error(mod, "main", target_index=1)
    assert "is not a scalar" in text and "seeds='param'" in text
    Gradient("main", target_index=1, seeds="param")(mod)  # a vjp is fine


def test_target_index_out_of_range(mod):
    assert "target_index 5 out of range" in _error(mod, "main", target_index=5)
    assert "target_index -1 out of range" in _error(mod, "main", target_index=-1)
    single = retrograd.parse(HEAD + '''
    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((), "float32"):
        gv = R.sum(x)
        return gv
''')
    assert "returns a single value" in _error(single, "main", target_index=1)


def test_target_pointing_at_a_non_variable(mod):
    assert "is a Constant, not a variable" in _error(mod, "main", target_index=4)


def test_require_grads_not_in_the_function(mod):
    assert "no parameter or variable named 'q'" in _error(mod, "main", require_grads=["q"])
    other = retrograd.parse(MAIN)
    stranger = other["main"].params[0]
    assert "is not a parameter or a top-level variable" in _error(mod, "main", require_grads=[stranger])
    assert "parameter index 9 out of range" in _error(mod, "main", require_grads=[9])
    assert "Vars, names or parameter indices" in _error(mod, "main", require_grads=[1.5])


def test_require_grads_listed_twice(mod):
    assert "lists 'x' twice" in _error(mod, "main", require_grads=["x", 0])


def test_require_grads_not_floating_point(mod):
    text = _error(mod, "main", require_grads=["idx"])
    assert "'idx' is not floating point" in text


def test_integer_parameters_are_skipped_by_default(mod):
    out = Gradient("main")(mod)
    grads = out["main_adjoint"].ret_struct_info.fields[1]
    # x, w and the tuple t: idx (int64) gets no gradient.
    assert len(grads.fields) == 3


def test_seed_errors(mod):
    assert "unknown seed 'zeros'" in _error(mod, "main", seeds="zeros")
    assert "2 seeds given for 1 targets" in _error(mod, "main", seeds=["ones", "ones"])
    assert "does not fit the target" in _error(mod, "main", target_index=1, seeds=[[1.0, 2.0]])
    assert "target 0 is listed twice" in _error(mod, "main", target_index=[0, 0])


def test_op_without_rule_on_the_path_names_op_and_binding(monkeypatch):
    redefine_op(monkeypatch, "relax.exp", grad=None)
    text = _error(retrograd.parse(MAIN, source_name="model.py"), "main")
    assert "binding 'b': R.exp has no gradient rule" in text
    # Located at the binding, with the source line and a caret.
    assert text.startswith("model.py:8:")
    assert "b = R.exp(a)" in text and "^" in text


def test_op_without_rule_off_the_path_is_fine(monkeypatch):
    redefine_op(monkeypatch, "relax.exp", grad=None)
    # The gradient of b (an intermediate) needs nothing upstream of b: exp is never differentiated.
    Gradient("main", require_grads=["b"])(retrograd.parse(MAIN, source_name="model.py"))
    # max on integers is not on the gradient path (no float data flows through it).
    redefine_op(monkeypatch, "relax.max", grad=None)
    ints = retrograd.parse(HEAD + '''
    @R.function
    def main(x: R.Tensor((3,), "float32"), idx: R.Tensor((2,), "int64")) -> R.Tensor((), "float32"):
        with R.dataflow():
            m = R.max(idx)
            k = R.astype(m, "float32")
            gv = R.sum(R.multiply(x, k))
            R.output(gv)
        return gv
''')
    Gradient("main")(ints)


def test_bad_rule_output_is_reported(monkeypatch):
    redefine_op(monkeypatch, "relax.exp", grad=lambda call, out, g: [g, g])
    assert "returned 2 entries for 1 arguments" in _error(retrograd.parse(MAIN, source_name="model.py"), "main")


def test_sparse_grads_errors(mod):
    assert "not among the variables whose gradient is required" in _error(
        mod, "main", require_grads=["x"], sparse_grads=["w"]
    )
    assert "used other than as take(table, indices, axis=0)" in _error(mod, "main", sparse_grads=["w"])
