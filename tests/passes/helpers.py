"""Shared by the pass tests: Before/Expected checks of the Gradient pass, random inputs, numeric verification,
redefined ops, and a small typed rewrite (add_exp) for the pass-infrastructure tests."""

from __future__ import annotations

import numpy as np

import retrograd
from retrograd.ir import BlockBuilder, Function
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ir.structural import assert_structural_equal
from retrograd.ir.well_formed import well_formed
from retrograd.ops.api import R
from retrograd.passes.gradient import Gradient
from retrograd.testing import check_gradients


# The import line of TVMScript files: our parser skips it, TVM's from_source needs the names.
TVM_IMPORTS = "from tvm.script import ir as I, relax as R, tir as T\n"


def random_value(sinfo, rng, int_high: int = 3):
    """Random data for a parameter: floats ~ N(0, 1), ints in [0, int_high), bools fair coins."""
    if isinstance(sinfo, TupleStructInfo):
        return tuple(random_value(f, rng, int_high) for f in sinfo.fields)
    assert isinstance(sinfo, TensorStructInfo) and sinfo.is_static, sinfo
    if is_float_dtype(sinfo.dtype):
        return rng.standard_normal(sinfo.shape).astype(sinfo.dtype)
    if sinfo.dtype == "bool":
        return rng.random(sinfo.shape) < 0.5
    return rng.integers(0, int_high, size=sinfo.shape).astype(sinfo.dtype)


def random_inputs(mod, func_name: str = "main", seed: int = 0, int_high: int = 3) -> list:
    rng = np.random.default_rng(seed)
    return [random_value(p.struct_info, rng, int_high) for p in mod[func_name].params]


def check_gradient(before: str, expected: str, func: str = "main", numeric: bool = True, **options):
    """Run Gradient on `before`; every function of `expected` must be structurally equal to the
    function of that name in the result, the result well formed, the input module untouched and,
    unless `numeric=False`, the adjoint must agree with finite differences."""
    before_mod = retrograd.parse(before)
    text = before_mod.script()
    after = Gradient(func, **options)(before_mod)
    assert before_mod.script() == text, "the pass changed its input module"
    assert well_formed(after) == []
    expected_mod = retrograd.parse(expected)
    for name in expected_mod.keys():
        assert name in after, f"missing function {name}"
        assert_structural_equal(after[name], expected_mod[name])
    assert set(after.keys()) == set(before_mod.keys()) | set(expected_mod.keys())
    if numeric:
        for seed in (0, 1):
            report = check_gradients(
                before_mod, func, random_inputs(before_mod, func, seed), seed=seed, **options
            )
            assert report.ok, str(report)
    return after


def redefine_op(monkeypatch, name: str, **changes):
    """For one test, registry lookups of op `name` (hence modules parsed afterwards) get a copy of its
    definition with `changes` (OpDefs are frozen: a test swaps the registered definition instead)."""
    import attrs

    from retrograd.ops import registry

    op = attrs.evolve(registry.get(name), **changes)
    monkeypatch.setitem(registry._REGISTRY, name, op)
    return op


def add_exp(func):
    """A function with one more exp at the end (a real, typed rewrite through BlockBuilder)."""
    bb = BlockBuilder()
    bb.begin_scope()
    for blk in func.body.blocks:
        bb.begin_block(dataflow=False)
        for b in blk.bindings:
            bb.emit_binding(b)
        bb.end_block()
    out = bb.emit(R.exp(func.body.body))
    body = bb.end_scope(out)
    return Function(func.params, body, body.struct_info)
