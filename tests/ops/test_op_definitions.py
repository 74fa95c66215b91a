"""OpDef properties checked against the kernels themselves: frozen definitions, declared aliasing, in-place forms."""

from __future__ import annotations

import attrs
import numpy as np
import pytest
from ops.all_cases import ALL_CASES
from ops.op_case import OpCase, S, T

from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.registry import all_ops, get, lookup, register

# Ops no shared case runs (and kernels whose aliasing depends on attributes the shared cases do not
# vary): run here too, so that every registered kernel is checked.
EXTRA_CASES = [
    OpCase("relax.grad.merge_sparse_rows", [np.array([2, 0, 2, 1]), T(4, 3)], {"num_rows": 3}),
    OpCase("relax.grad.merge_sparse_rows", [np.array([], dtype="int64"), T(0, 3)], {"num_rows": 3}, name="empty"),
    OpCase("relax.astype", [T(3, 4)], {"dtype": "float32"}, name="same"),
    OpCase("relax.collapse_sum_to", [T(3, 4), S(3, 4)], name="noop"),
    OpCase("relax.collapse_sum_like", [T(3, 4), T(3, 4)], name="noop"),
    OpCase("relax.sum", [T(3, 4)], {"axis": []}, name="no-axes"),
    OpCase("relax.max", [T(3, 4)], {"axis": []}, name="no-axes"),
    OpCase("relax.concat", [[T(3, 4)]], {"axis": 0}, name="one"),
    OpCase("relax.take", [T(3, 4), np.array(1)], {"axis": 0}, name="scalar-index"),
    OpCase("relax.where", [np.array(True), T(3, 4), T(3, 4)], name="scalar-cond"),
]


def _runnable(cases):
    out = []
    for case in cases:
        if case.is_static and all(not isinstance(leaf, TensorStructInfo) or leaf.shape is not None for leaf in case.leaves()):
            out.append(case)
    return out


CASES = _runnable(ALL_CASES + EXTRA_CASES)


def _arrays(v) -> list:
    if isinstance(v, np.ndarray):
        return [v]
    if isinstance(v, tuple | list):
        return [a for x in v for a in _arrays(x)]
    return []


def _kernel_outputs(case: OpCase):
    """(argument position -> its input arrays, output arrays), or None when the kernel rejects the case."""
    values = case.make_inputs(seed=3)
    args = case.kernel_args(values)
    try:
        out = case.run_kernel(values)
    except Exception:  # cases of rejected inputs belong to the error tests
        return None
    return {i: _arrays(a) for i, a in enumerate(args)}, _arrays(out)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_a_result_shares_memory_only_with_declared_arguments(case):
    got = _kernel_outputs(case)
    if got is None:
        pytest.skip("the kernel rejects this case")
    inputs, outputs = got
    declared = set(case.opdef.aliases)
    for i, arrays in inputs.items():
        if i in declared:
            continue
        for a in arrays:
            for o in outputs:
                assert not np.shares_memory(o, a), f"{case.op}: the result shares memory with argument {i}"


def test_every_registered_kernel_is_checked_for_aliasing():
    ran = {c.op for c in CASES if _kernel_outputs(c) is not None}
    missing = sorted(op.name for op in all_ops() if op.kernel is not None and op.name not in ran)
    assert not missing, f"no runnable case for {missing}: add one to EXTRA_CASES"


def test_declared_aliasing_does_happen():
    """Each declared alias is real on some case (a declaration is not a blanket excuse)."""
    shared = set()
    for case in CASES:
        got = _kernel_outputs(case)
        if got is None:
            continue
        inputs, outputs = got
        for i, arrays in inputs.items():
            if any(np.shares_memory(o, a) for a in arrays for o in outputs):
                shared.add((case.op, i))
    declared = {(op.name, i) for op in all_ops() for i in op.aliases}
    assert declared <= shared, f"declared but never observed: {sorted(declared - shared)}"


def test_the_identity_markers_return_their_input_itself():
    x = np.ones((2, 3), "float32")
    for name in ("relax.grad.no_grad", "relax.grad.start_checkpoint", "relax.grad.end_checkpoint"):
        assert get(name).kernel(x) is x


INPLACE_CASES = [c for c in CASES if c.opdef.inplace is not None]


@pytest.mark.parametrize("case", INPLACE_CASES, ids=lambda c: c.id)
def test_the_inplace_form_computes_the_kernel_bitwise(case):
    values = case.make_inputs(seed=5)
    expected = np.asarray(case.run_kernel([v.copy() for v in values]))
    args = case.kernel_args(values)
    out_sinfo = case.build()["main"].ret_struct_info
    arg_sinfo = case.param_sinfo()
    positions = case.opdef.inplace_candidates(arg_sinfo, out_sinfo)
    for p in positions:
        fresh = [np.array(a, copy=True) for a in args]
        result = case.opdef.inplace(*fresh, out=fresh[p])
        assert result is fresh[p]
        np.testing.assert_array_equal(result, expected)
        assert result.dtype == expected.dtype


def test_inplace_candidates_need_a_static_float_result_of_the_arguments_struct_info():
    add, neg, matmul = get("relax.add"), get("relax.negative"), get("relax.matmul")
    f = TensorStructInfo((3, 4), "float32")
    assert add.inplace_candidates([f, f], f) == [0, 1]
    assert add.inplace_candidates([TensorStructInfo((4,), "float32"), f], f) == [1]  # broadcast: only x2
    i = TensorStructInfo((3, 4), "int32")
    assert add.inplace_candidates([i, i], i) == []  # integer results are not reused
    sym = TensorStructInfo(("n", 4), "float32")
    assert add.inplace_candidates([sym, sym], sym) == []
    assert neg.inplace_candidates([f], f) == [0]
    assert matmul.inplace is None and matmul.inplace_candidates([f, f], f) == []


def test_op_definitions_are_frozen():
    op = get("relax.add")
    for field, value in [("kernel", None), ("grad", None), ("print_positional", ("x",)), ("aliases", (0,))]:
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(op, field, value)
    with pytest.raises(TypeError):
        get("relax.grad.take_backward").print_omit["mode"] = "fast"
    assert get("relax.grad.take_backward").print_omit == {"mode": ""}
    assert get("relax.strided_slice").print_positional == ("axes", "begin", "end", "strides")


def test_register_refuses_a_second_definition_and_aliases_of_no_argument():
    with pytest.raises(ValueError, match="registered twice"):
        register("relax.add", ("x1", "x2"), infer=lambda ctx: ctx.tensor(0))
    with pytest.raises(ValueError, match="name no argument"):
        register("relax.test_bad_alias", ("x",), infer=lambda ctx: ctx.tensor(0), aliases=(1,))
    assert lookup("relax.test_bad_alias") is None
