"""Malformed ONNX models get an error naming what is wrong (never a raw exception, never output that differs
from what the operator means): unreadable bytes, inputs the schema requires, flag and enumeration attributes
outside what ONNX allows, and ONNX's own node tests mutated at random. Also two operators whose meaning
depends on an attribute or the opset, against naive NumPy."""

from __future__ import annotations

import random

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.errors import DiagnosticError, UnsupportedError


def _model(node, inputs, outputs, opset=17, inits=()):
    onnx = need("onnx")
    helper = onnx.helper
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _tensor(name, shape, elem=1):
    return need("onnx").helper.make_tensor_value_info(name, elem, shape)


def _import(data):
    from retrograd.frontend import from_onnx

    return from_onnx(data)


def _run(data, *args):
    mod, params = _import(data)
    return retrograd.build(mod)["main"](*args, *params.values())


def test_unreadable_bytes_and_missing_files_are_named(tmp_path):
    helper = need("onnx").helper
    good = _model(helper.make_node("Relu", ["x"], ["y"]), [_tensor("x", [2])], [_tensor("y", [2])])
    with pytest.raises(UnsupportedError, match="not a readable ONNX model"):
        _import(good[: len(good) // 2] + b"\xff\xff\xff")
    missing = tmp_path / "nowhere.onnx"
    with pytest.raises(UnsupportedError, match="nowhere.onnx"):
        _import(missing)


def test_a_required_input_left_empty_names_the_node_and_the_input():
    helper = need("onnx").helper
    node = helper.make_node("Gemm", ["", "b"], ["y"], name="dense")
    data = _model(node, [_tensor("b", [3, 2])], [_tensor("y", [2, 2])])
    with pytest.raises(UnsupportedError, match=r"'dense' \(Gemm\): input 0 \('A'\) is required but empty"):
        _import(data)
    too_many = helper.make_node("Relu", ["b", "b"], ["y"], name="act")
    with pytest.raises(UnsupportedError, match=r"'act' \(Relu\): expected 1 inputs, got 2"):
        _import(_model(too_many, [_tensor("b", [3, 2])], [_tensor("y", [3, 2])]))


@pytest.mark.parametrize("op,attrs,pattern", [
    ("ReduceSum", {"keepdims": 7}, "'keepdims' is 7; ONNX allows 0 or 1"),
    ("ReduceMax", {"keepdims": -1}, "'keepdims' is -1"),
    ("ArgMax", {"select_last_index": 2}, "'select_last_index' is 2"),
    ("CumSum", {"reverse": 3}, "'reverse' is 3"),
])
def test_flags_outside_zero_and_one_are_refused(op, attrs, pattern):
    helper = need("onnx").helper
    ins = ["x", "axis"] if op == "CumSum" else ["x"]
    node = helper.make_node(op, ins, ["y"], name="n", **attrs)
    inits = [helper.make_tensor("axis", 7, [], [0])] if op == "CumSum" else []
    data = _model(node, [_tensor("x", [2, 3])], [_tensor("y", None)], inits=inits)
    with pytest.raises(UnsupportedError, match=pattern):
        _import(data)


def test_enumerations_outside_what_onnx_allows_are_refused():
    helper = need("onnx").helper
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="average")
    data = _model(node, [_tensor("x", [2, 3]), _tensor("t", [2], 7)], [_tensor("y", [])])
    with pytest.raises(UnsupportedError, match="'reduction' is 'average'; ONNX NegativeLogLikelihoodLoss allows 'none', 'sum', 'mean'"):
        _import(data)
    pad = helper.make_node("Pad", ["x", "p"], ["y"], mode="mirror")
    data = _model(pad, [_tensor("x", [2, 3])], [_tensor("y", None)], inits=[helper.make_tensor("p", 7, [4], [0, 1, 0, 1])])
    with pytest.raises(UnsupportedError, match="'mode' is 'mirror'"):
        _import(data)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_hardmax_follows_its_opset(opset, axis):
    """Before opset 13 Hardmax works on the input coerced to 2-D at `axis` (one winner over all the trailing
    dims); from 13 on, along `axis` alone."""
    helper = need("onnx").helper
    x = np.random.default_rng(axis).standard_normal((2, 3, 4)).astype(np.float32)
    data = _model(helper.make_node("Hardmax", ["x"], ["y"], axis=axis), [_tensor("x", [2, 3, 4])], [_tensor("y", [2, 3, 4])], opset)
    if opset < 13:
        flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
        want = np.eye(flat.shape[1], dtype=np.float32)[flat.argmax(axis=1)].reshape(x.shape)
    else:
        want = np.moveaxis(np.eye(x.shape[axis], dtype=np.float32)[x.argmax(axis=axis)], -1, axis)
    np.testing.assert_array_equal(_run(data, x), want)


def test_quantize_linear_takes_output_dtype_when_there_is_no_zero_point():
    helper = need("onnx").helper
    x = np.array([[6, -8, -10, 5], [1, 8, 4, 5], [0, -70000, 10, 4]], dtype=np.float32)
    scale = np.array([1.5, 2.5, 3.0, 4.9], dtype=np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s"], ["y"], axis=1, output_dtype=5)  # INT16
    data = _model(node, [_tensor("x", [3, 4])], [_tensor("y", [3, 4], 5)], 21,
                  inits=[helper.make_tensor("s", 1, [4], scale)])
    got = _run(data, x)
    want = np.clip(np.round(x / scale), -32768, 32767).astype(np.int16)
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, want)


def test_mutated_node_tests_import_or_fail_with_a_diagnostic():
    """ONNX's node tests, each mutated once (an attribute's value, an input dropped or reordered, a declared
    shape or dtype, the opset, a few bytes): from_onnx returns a module or raises a DiagnosticError."""
    onnx = need("onnx")
    collect_testcases = need("onnx.backend.test.case.node").collect_testcases

    models = [c.model for c in collect_testcases(None) if c.model is not None]
    rng, outcomes = random.Random(20261129), {"ok": 0, "refused": 0}
    for _ in range(300):
        m = onnx.ModelProto()
        m.CopyFrom(rng.choice(models))
        g, kind = m.graph, rng.choice(["attr", "drop", "swap", "shape", "dtype", "opset", "bytes"])
        node = g.node[0]
        if kind == "attr" and node.attribute:
            a = rng.choice(node.attribute)
            if a.type == onnx.AttributeProto.INT:
                a.i = rng.choice([-5, -1, 0, 1, 7, 10**9])
            elif a.type == onnx.AttributeProto.INTS:
                a.ints[:] = [rng.choice([-3, -1, 0, 1, 2, 5]) for _ in range(rng.randint(0, 5))]
            elif a.type == onnx.AttributeProto.STRING:
                a.s = rng.choice([b"", b"bogus", b"\xff"])
        elif kind == "drop" and node.input:
            del node.input[rng.randrange(len(node.input))]
        elif kind == "swap" and len(node.input) > 1:
            ins = list(node.input)
            rng.shuffle(ins)
            node.input[:] = ins
        elif kind == "shape" and g.input and g.input[0].type.tensor_type.shape.dim:
            rng.choice(g.input[0].type.tensor_type.shape.dim).dim_value = rng.choice([0, 1, 3, 100])
        elif kind == "dtype" and g.input:
            g.input[0].type.tensor_type.elem_type = rng.choice([1, 2, 3, 6, 7, 9, 10, 11, 16])
        elif kind == "opset":
            m.opset_import[0].version = rng.choice([1, 6, 11, 25, 99])
        data = bytearray(m.SerializeToString())
        if kind == "bytes":
            for _ in range(rng.randint(1, 5)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            _import(bytes(data))
            outcomes["ok"] += 1
        except DiagnosticError:
            outcomes["refused"] += 1
    assert outcomes["ok"] > 50 and outcomes["refused"] > 50, outcomes
