"""Every kernel hands back what retrograd.analysis.layout says, on inputs of every layout the executor makes.

Fresh results must be C-contiguous, writeable, of their binding's dtype, and over a new buffer of exactly
their size; views must share their argument's buffer with the predicted strides; `Same` is the argument
itself. Inputs come in C order and as the views the executor produces (transposed, strided, broadcast).
"""

from __future__ import annotations


import numpy as np
import pytest

from retrograd.analysis.layout import Layout, Same, View, results
from retrograd.ir.struct_info import TupleStructInfo, is_float_dtype
from retrograd.ops.registry import all_ops
from retrograd.runtime.interp import coerce, root_of

from ops.cases_core import CASES as CORE_CASES  # noqa: E402
from ops.cases_nn import CASES as NN_CASES  # noqa: E402

STATIC = [c for c in CORE_CASES + NN_CASES if c.is_static]


def variants(a: np.ndarray):
    """(name, array with a's values or a's shape) in the layouts views give."""
    yield "C", a.copy()
    yield "V", a.copy().reshape(-1).reshape(a.shape)
    if a.ndim >= 2:
        yield "T", np.ascontiguousarray(np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
        yield "P", np.ascontiguousarray(a.transpose()).transpose()
    if a.ndim >= 1 and a.shape[0] > 0:
        yield "S", np.repeat(a, 2, axis=0)[::2]
        yield "B", np.broadcast_to(a[:1], a.shape)


def layout_of(a) -> Layout | None:
    if not isinstance(a, np.ndarray):
        return None
    return Layout(a.shape, str(a.dtype), a.strides, bool(a.flags.writeable))


def out_tensors(sinfo):
    if isinstance(sinfo, TupleStructInfo):
        return [f for f in sinfo.fields]
    return [sinfo]


def _significant(shape, strides):
    return tuple(s for d, s in zip(shape, strides) if d > 1)


@pytest.mark.parametrize("case", STATIC, ids=[c.id for c in STATIC])
def test_kernel_results_match_the_layout_rules(case):
    mod = case.build()
    call = mod["main"].body.blocks[0].bindings[0].value
    out_sinfo = out_tensors(mod["main"].body.blocks[0].bindings[0].var.struct_info)
    base = case.make_inputs()
    tried = 0
    trials = [(k, name, va) for k, leaf in enumerate(base) if is_float_dtype(str(leaf.dtype)) for name, va in variants(leaf)]
    for k, name, va in trials or [(0, "C", base[0] if base else None)]:
        leaves = list(base)
        if va is not None:
            leaves[k] = va
        args = case.kernel_args(leaves)
        try:
            out = case.opdef.kernel(*args, **call.attrs)
        except Exception:
            continue  # a layout this kernel rejects (e.g. broadcast values breaking a precondition)
        tried += 1
        out = coerce(out, mod["main"].body.blocks[0].bindings[0].var.struct_info)
        outs = list(out) if isinstance(out, tuple) else [out]
        shapes = [tuple(s.shape) for s in out_sinfo]
        rules = results(call.op, call.attrs, [layout_of(a) for a in args], shapes)
        roots = [root_of(a) for a in args if isinstance(a, np.ndarray)]
        for o, s, rule in zip(outs, out_sinfo, rules, strict=True):
            where = f"{case.id}: input {k} as {name}"
            assert isinstance(o, np.ndarray), where
            assert o.shape == tuple(s.shape) and str(o.dtype) == s.dtype, where
            if isinstance(rule, Same):
                assert o is args[rule.arg], where
            elif isinstance(rule, View):
                assert root_of(o) is root_of(args[rule.arg]), f"{where}: expected a view"
                assert _significant(o.shape, o.strides) == _significant(o.shape, rule.layout.strides), where
                assert bool(o.flags.writeable) == rule.layout.writeable, where
            else:
                r = root_of(o)
                assert all(r is not x for x in roots), f"{where}: expected a fresh buffer, got a view"
                assert o.flags.c_contiguous and o.flags.writeable, f"{where}: fresh result not C-contiguous"
                assert r.nbytes == o.nbytes, f"{where}: buffer of {r.nbytes} bytes for {o.nbytes}"
                assert o.base is None or (type(o.base) is np.ndarray and o.base.base is None), where
    assert tried


def test_every_op_that_declares_aliases_has_a_layout_rule_and_no_other():
    declared = {op.name for op in all_ops() if op.aliases}
    assert declared and declared == {op.name for op in all_ops() if op.view is not None}


def test_aliases_and_view_are_declared_together():
    from retrograd.ops import views
    from retrograd.ops.registry import OpDef

    with pytest.raises(ValueError, match="go together"):
        OpDef("relax.test_alias_only", ("x",), (), infer=lambda ctx: None, aliases=(0,))
    with pytest.raises(ValueError, match="go together"):
        OpDef("relax.test_view_only", ("x",), (), infer=lambda ctx: None, view=views.same)
