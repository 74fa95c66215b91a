"""`retrograd import model.onnx -o model.py --params params.npz`: the script re-parses, runs with the npz
weights and equals onnxruntime."""

from __future__ import annotations

import numpy as np
from optional import need

import retrograd


def test_import_onnx_writes_a_script_and_params_that_run(tmp_path):
    onnx = need("onnx")
    ort = need("onnxruntime")
    TensorProto, helper, numpy_helper = onnx.TensorProto, onnx.helper, onnx.numpy_helper

    from retrograd.cli.app import main

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[numpy_helper.from_array(w, "fc.weight"), numpy_helper.from_array(b, "fc.bias")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["import", str(path), "-o", str(tmp_path / "m.py"), "--params", str(tmp_path / "p.npz")]) == 0
    mod = retrograd.parse((tmp_path / "m.py").read_text())
    weights = retrograd.load_params(str(tmp_path / "p.npz"))
    assert list(weights) == ["fc.weight", "fc.bias"]  # the ONNX names, in the parameters' order
    np.testing.assert_array_equal(weights["fc.weight"], w)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    out = retrograd.build(mod)["main"](x, *weights.values())
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)
