"""Malformed calls of every core op (a wrong dtype, an extra or missing dimension, a changed extent, an axis out
of range): what TVM 0.27's inference rejects is rejected here too, always with a located DiagnosticError."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ops.cases_core import CASES as CORE_CASES
from ops.cases_math import CASES as MATH_CASES
from ops.helpers import tvm_infer, tvm_script

from retrograd.errors import DiagnosticError
from retrograd.ir.struct_info import TensorStructInfo
from optional import need  # noqa: E402

CASES = CORE_CASES + MATH_CASES


def _first_tensor(case, f):
    done = [False]

    def conv(i):
        if isinstance(i, list):
            return [conv(x) for x in i]
        if isinstance(i, TensorStructInfo) and i.shape is not None and not done[0]:
            done[0] = True
            return f(i)
        return i

    return [conv(i) for i in case.inputs]


def _malformed():
    out, seen = [], set()
    for case in CASES:
        if not case.tvm or case.op in seen:
            continue
        seen.add(case.op)  # one case per op keeps TVM's parsing (the slow part) to a few seconds
        flip = lambda t: TensorStructInfo(t.shape, "int32" if t.dtype != "int32" else "float32")  # noqa: E731
        out.append(replace(case, inputs=_first_tensor(case, flip), name=f"{case.name}-dtype"))
        out.append(replace(case, inputs=_first_tensor(case, lambda t: TensorStructInfo(tuple(t.shape) + (2,), t.dtype)), name=f"{case.name}-rank+1"))
        out.append(replace(case, inputs=_first_tensor(case, lambda t: TensorStructInfo(tuple(t.shape)[1:], t.dtype)), name=f"{case.name}-rank-1"))
        out.append(replace(case, inputs=_first_tensor(case, lambda t: TensorStructInfo(tuple(t.shape)[:-1] + (7,), t.dtype) if t.shape else t), name=f"{case.name}-extent"))
        for key in ("axis", "axes"):
            value = case.attrs.get(key)
            if isinstance(value, int) or (isinstance(value, list | tuple) and value):
                out.append(replace(case, attrs={**case.attrs, key: 9 if isinstance(value, int) else [9]}, name=f"{case.name}-{key}9"))
    return out


MALFORMED = _malformed()


@pytest.mark.parametrize("case", MALFORMED, ids=lambda c: c.id)
def test_what_tvm_rejects_is_rejected_with_a_located_error(case):
    try:
        case.build()
        ours = None
    except DiagnosticError as err:
        ours = err
    # Any other exception propagates and fails the test: never a raw traceback.
    try:
        tvm_infer(case)
    except pytest.skip.Exception:
        raise
    except Exception:  # noqa: BLE001  (TVM's errors have many types)
        assert ours is not None, f"{case.id}: TVM rejects this call, retrograd accepts it"
        return
    if ours is not None:
        # Stricter than TVM is allowed (TVM's inference is lax where its build then fails); the error is located.
        assert ours.span is not None or "R." in str(ours), str(ours)


# -- attribute defaults: a call giving only the case's own attributes gets TVM's values for the rest ----


def _tvm_attr_value(v):
    name = type(v).__name__
    if name == "IntImm":
        return int(v)
    if name == "FloatImm":
        return float(v.value)
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if hasattr(v, "__len__"):
        return tuple(_tvm_attr_value(x) for x in v)
    return str(v)


def _first_cases():
    seen, out = set(), []
    for case in CASES:
        if case.tvm and case.is_static and case.op not in seen:
            seen.add(case.op)
            out.append(case)
    return out


# TVM keeps these as arguments (strided_slice's axes/begin/end, triu/tril's k), and its Python wrapper
# resolves arange's dtype=None from the bounds where retrograd infers it from them (same struct info).
_NOT_ATTRS = {"relax.strided_slice": {"axes", "begin", "end", "strides"}, "relax.triu": {"k"}, "relax.tril": {"k"}, "relax.arange": {"dtype"},
              "relax.assert_op": {"format"}}  # TVM's assert_op holds its format string as an argument


@pytest.mark.parametrize("case", _first_cases(), ids=lambda c: c.id)
def test_attribute_defaults_and_order_match_tvm(case):
    tvm_script_mod = need("tvm.script")
    op = case.opdef
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in case.attrs.items()}
    call = tvm_script_mod.from_source(tvm_script(case, given)).body.blocks[-1].bindings[-1].value
    skip = _NOT_ATTRS.get(case.op, set())
    theirs = {}
    if call.attrs is not None:
        for f in type(call.attrs).__tvm_ffi_type_info__.fields:
            if f.name not in skip:
                theirs[f.name] = _tvm_attr_value(getattr(call.attrs, f.name))
    ours = {k: tuple(v) if isinstance(v, list) else v for k, v in op.normalize_attrs(case.attrs).items() if k not in skip}
    ours = {k: v for k, v in ours.items() if k in theirs or op.print_omit.get(k, object()) != v}
    assert list(ours) == list(theirs), f"{case.op}: attribute order {list(ours)}, TVM's {list(theirs)}"
    for k, v in theirs.items():
        if isinstance(v, float):
            assert ours[k] == pytest.approx(v, rel=1e-6), f"{case.op}.{k}"
        else:
            assert ours[k] == v, f"{case.op}.{k}: default {ours[k]!r}, TVM's {v!r}"


def test_remembered_attributes_keep_nested_types_and_signed_zeros():
    """normalize_attrs remembers results by the given values: a list that equals an accepted one by value
    but holds a float where an integer is expected must still be refused, and a nested -0.0 must not be
    answered with 0.0's entry."""
    from retrograd.ops.registry import attrs_key, get

    op = get("relax.nn.pad")
    assert op.normalize_attrs({"pad_width": [0, 0, 1, 1]})["pad_width"] == (0, 0, 1, 1)
    with pytest.raises(DiagnosticError, match="pad_width"):
        op.normalize_attrs({"pad_width": [0.0, 0, 1, 1]})
    assert attrs_key({"v": [0.0]}) != attrs_key({"v": [-0.0]})
    assert attrs_key({"v": (1,)}) != attrs_key({"v": (True,)}) != attrs_key({"v": [1]})
