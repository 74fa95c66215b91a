"""from_onnx: inputs that TVM's frontend needs as constants (axes, starts, pads, k, repeats, depth,
sizes, scales, roi) given as runtime graph inputs. The module is imported once, without specializing
(no static_inputs), and run with different values of those inputs; each result is compared with
onnxruntime, and gradients through the runtime-shaped ops with float64 finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.passes import Gradient

OPSET = 18
F = np.float32
I = np.int64


def _model(op, inputs, attrs=None, n_out=1, opset=OPSET, outs=None):
    """A one-node model whose every input is a graph input (shapes fixed, values runtime); its
    outputs have the first input's dtype (TopK's indices int64, OneHot's the values' dtype)."""
    onnx = need("onnx")
    helper = onnx.helper
    code = lambda arr: helper.np_dtype_to_tensor_dtype(arr.dtype)  # noqa: E731
    vis = [helper.make_tensor_value_info(name, code(arr), arr.shape) for name, arr in inputs if name]
    outs = outs or [f"y{i}" for i in range(n_out)]
    first = code(inputs[-1][1] if op == "OneHot" else inputs[0][1])
    types = [first, onnx.TensorProto.INT64 if op == "TopK" else first] + [first] * len(outs)
    node = helper.make_node(op, [name for name, _ in inputs], outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(o, types[i], None) for i, o in enumerate(outs) if o])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(op, runs, attrs=None, n_out=1, rtol=1e-5, atol=1e-6, oracle="onnxruntime", opset=OPSET, outs=None):
    """Import once (no specialization), then every run's inputs give the oracle's outputs
    (onnxruntime, or ONNX's reference evaluator where the two disagree)."""
    from retrograd.frontend.onnx_import import from_onnx

    model = _model(op, runs[0], attrs, n_out, opset, outs)
    mod, params = from_onnx(model)  # raises NeedsConstant if an input had to be a constant
    assert not params
    fn = retrograd.build(mod)["main"]
    if oracle == "onnxruntime":
        sess = need("onnxruntime").InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    else:
        sess = need("onnx.reference").ReferenceEvaluator(model)
    for run in runs:
        got = fn(*[arr for name, arr in run if name])
        got = list(got) if isinstance(got, tuple | list) else [got]
        want = sess.run(None, {name: arr for name, arr in run if name})
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.asarray(g).shape == w.shape, (op, run, np.asarray(g).shape, w.shape)
            np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=atol, err_msg=f"{op} {run}")
    return mod


RNG = np.random.default_rng(0)
X3 = RNG.standard_normal((3, 5, 4)).astype(F)
X2 = RNG.standard_normal((4, 5)).astype(F)


def test_slice_runtime_starts_ends_axes_steps_has_known_rank_only():
    runs = [
        [("x", X3), ("starts", np.array([1, -1], I)), ("ends", np.array([3, -6], I)), ("axes", np.array([0, 2], I)), ("steps", np.array([1, -2], I))],
        [("x", X3), ("starts", np.array([-2, 0], I)), ("ends", np.array([100, 4], I)), ("axes", np.array([2, -2], I)), ("steps", np.array([1, 2], I))],
        [("x", X3), ("starts", np.array([4, 2], I)), ("ends", np.array([-100, 1], I)), ("axes", np.array([1, 0], I)), ("steps", np.array([-1, 1], I))],
    ]
    mod = _check("Slice", runs)
    out = mod["main"].ret_struct_info
    assert out.ndim == 3 and out.shape is None  # extents depend on the values: R.Tensor(ndim=3)


@pytest.mark.parametrize("op,keep", [("ReduceSum", 0), ("ReduceSum", 1), ("ReduceMean", 0), ("ReduceMax", 1), ("ReduceMin", 0),
                                     ("ReduceProd", 1), ("ReduceL2", 0), ("ReduceLogSumExp", 0), ("ReduceSumSquare", 1)])
def test_reduction_runtime_axes(op, keep):
    runs = [[("x", X3), ("axes", np.array(a, I))] for a in ([0, 2], [-1, 1], [1, 0])]
    _check(op, runs, {"keepdims": keep}, rtol=1e-4)


def test_reduce_max_runtime_axes_over_an_empty_axis_is_the_identity():
    x = np.zeros((2, 0, 3), F)
    _check("ReduceMax", [[("x", x), ("axes", np.array([1], I))], [("x", x), ("axes", np.array([0], I))]], {"keepdims": 1})


def test_squeeze_unsqueeze_runtime_axes():
    x = RNG.standard_normal((1, 3, 1, 2)).astype(F)
    _check("Squeeze", [[("x", x), ("axes", np.array(a, I))] for a in ([0, 2], [2, -4])])
    _check("Unsqueeze", [[("x", X2), ("axes", np.array(a, I))] for a in ([0, 3], [-1, 1], [2, 0])])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_runtime_pads_and_value(mode):
    pads = ([1, 0, 2, 1], [0, 2, 1, 3], [2, 1, 0, 0])
    runs = [[("x", X2), ("pads", np.array(p, I)), ("value", np.array(v, F))] for p, v in zip(pads, (1.5, -2.0, 0.0))]
    _check("Pad", runs, {"mode": mode})


def test_pad_runtime_negative_pads_and_axes_crop():
    runs = [[("x", X3), ("pads", np.array(p, I)), ("value", np.array(3.0, F)), ("axes", np.array(a, I))]
            for p, a in (([-1, 2, 1, -2], [0, 2]), ([1, 0, 0, -1], [-2, 0]))]
    _check("Pad", runs, {"mode": "constant"})


@pytest.mark.parametrize("largest", [0, 1])
def test_topk_runtime_k(largest):
    x = np.array([[3, 1, 3, 2, 5], [0, 0, 1, 1, 0], [4, 2, 2, 9, 1], [1, 1, 1, 1, 1]], F)  # ties keep index order
    _check("TopK", [[("x", x), ("k", np.array([k], I))] for k in (2, 4, 1)], {"axis": 1, "largest": largest}, n_out=2)


def test_tile_range_onehot_trilu_runtime():
    _check("Tile", [[("x", X2), ("r", np.array(r, I))] for r in ([2, 1], [1, 3])])
    _check("Range", [[("s", np.array(a, F)), ("l", np.array(b, F)), ("d", np.array(c, F))] for a, b, c in ((0.5, 4.0, 0.75), (3.0, -2.0, -1.5))])
    _check("Range", [[("s", np.array(a, I)), ("l", np.array(b, I)), ("d", np.array(c, I))] for a, b, c in ((2, 11, 3), (5, 5, 1))])
    idx = np.array([[0, 2, -1], [4, 1, 7]], I)
    _check("OneHot", [[("i", idx), ("depth", np.array([d], I)), ("v", np.array([0.5, 2.0], F))] for d in (5, 3)], {"axis": 1})
    for upper in (0, 1):
        _check("Trilu", [[("x", X3), ("k", np.array(k, I))] for k in (0, -1, 2)], {"upper": upper})


def test_cumsum_split_compress_runtime():
    for attrs in ({}, {"exclusive": 1, "reverse": 1}):
        _check("CumSum", [[("x", X3), ("axis", np.array(a, I))] for a in (0, -1, 1)], attrs)
    _check("Split", [[("x", X2), ("s", np.array(s, I))] for s in ([1, 4], [3, 2])], {"axis": 1}, n_out=2)
    _check("Compress", [[("x", X3), ("c", np.array(c, bool))] for c in ([1, 0, 1, 1, 0], [0, 0, 0, 0, 0], [0, 1, 0, 0, 1])], {"axis": 1})


RESIZE_X = RNG.standard_normal((1, 2, 4, 5)).astype(F)


@pytest.mark.parametrize("attrs", [
    {"mode": "linear"}, {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, {"mode": "nearest", "nearest_mode": "ceil"},
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "round_prefer_ceil"},
    {"mode": "linear", "antialias": 1}, {"mode": "cubic", "antialias": 1},
    {"mode": "linear", "coordinate_transformation_mode": "half_pixel_symmetric"},
])
def test_resize_runtime_scales(attrs):
    # scales whose product with the extent is not an integer: ONNX maps with the scale, not out / in.
    # align_corners then divides by scale * extent - 1 in ONNX's reference (the spec's own code), by the
    # rounded output length - 1 in onnxruntime: the reference is the oracle there.
    runs = [[("x", RESIZE_X), ("roi", np.zeros(0, F)), ("scales", np.array(s, F))] for s in ([1, 1, 0.6, 1.7], [1, 1, 2.0, 0.5])]
    oracle = "reference" if attrs.get("coordinate_transformation_mode") == "align_corners" else "onnxruntime"
    _check("Resize", runs, attrs, rtol=1e-4, atol=1e-5, oracle=oracle)


def test_resize_runtime_sizes_and_roi():
    runs = [[("x", RESIZE_X), ("roi", np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], F)), ("", None), ("sizes", np.array(s, I))]
            for s in ([1, 2, 3, 7], [1, 2, 6, 2])]
    _check("Resize", runs, {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -1.0},
           rtol=1e-4, atol=1e-5)
    runs = [[("x", RESIZE_X), ("", None), ("", None), ("sizes", np.array(s, I))] for s in ([5, 9], [2, 3])]
    _check("Resize", runs, {"mode": "cubic", "axes": [3, 2], "keep_aspect_ratio_policy": "not_larger"}, rtol=1e-4, atol=1e-5)


def test_static_resize_with_a_non_integral_scale_keeps_a_static_shape():
    ReferenceEvaluator = need("onnx.reference").ReferenceEvaluator
    from retrograd.frontend.onnx_import import from_onnx

    model = _model("Resize", [("x", RESIZE_X), ("roi", np.zeros(0, F)), ("scales", np.array([1, 1, 0.6, 1.7], F))], {"mode": "linear"})
    mod, _ = from_onnx(model, static_inputs={"roi": np.zeros(0, F), "scales": np.array([1, 1, 0.6, 1.7], F)})
    assert tuple(mod["main"].ret_struct_info.shape) == (1, 2, 2, 8)
    ref = ReferenceEvaluator(model).run(None, {"x": RESIZE_X, "roi": np.zeros(0, F), "scales": np.array([1, 1, 0.6, 1.7], F)})[0]
    np.testing.assert_allclose(retrograd.build(mod)["main"](RESIZE_X), ref, rtol=1e-5, atol=1e-6)


def test_gradient_through_runtime_slice_pad_resize_reduce_matches_finite_differences():
    """d/dx of sum(w * ReduceSum(Resize(Pad(Slice(x, runtime starts), runtime pads), runtime scales), runtime axes))."""
    onnx = need("onnx")
    helper = onnx.helper
    from retrograd.frontend.onnx_import import from_onnx

    D = np.float64
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"]),
        helper.make_node("Pad", ["s", "pads"], ["p"], mode="reflect"),
        helper.make_node("Resize", ["p", "", "scales"], ["r"], mode="cubic"),
        helper.make_node("ReduceSum", ["r", "raxes"], ["y"], keepdims=0),
    ]
    ins = [vi("x", onnx.TensorProto.DOUBLE, [1, 2, 5, 6]), vi("starts", 7, [1]), vi("ends", 7, [1]), vi("axes", 7, [1]),
           vi("pads", 7, [8]), vi("scales", onnx.TensorProto.FLOAT, [4]), vi("raxes", 7, [1])]
    model = helper.make_model(helper.make_graph(nodes, "g", ins, [vi("y", onnx.TensorProto.DOUBLE, None)]),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    mod, _ = from_onnx(model)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 5, 6))
    values = [np.array([1], I), np.array([5], I), np.array([3], I), np.array([0, 0, 1, 2, 0, 0, 2, 1], I),
              np.array([1, 1, 1.5, 0.7], F), np.array([1], I)]
    f = retrograd.build(mod)["main"]
    y = np.asarray(f(x, *values))
    w = rng.standard_normal(y.shape)
    adj = Gradient("main", ["x"], seeds="param")(mod)
    _, (gx,) = retrograd.build(adj)["main_adjoint"](x, *values, w)
    eps = 1e-6
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        fd[i] = (np.sum(w * np.asarray(f(x + e, *values))) - np.sum(w * np.asarray(f(x - e, *values)))) / (2 * eps)
    np.testing.assert_allclose(gx, fd, rtol=1e-6, atol=1e-8)
    assert np.abs(fd).max() > 0


# -- GridSample and Attention: ONNX's semantics (the cases TVM's ops do not cover) -----------------
@pytest.mark.parametrize("mode,padding,align", [("nearest", "zeros", 0), ("nearest", "reflection", 1), ("bicubic", "border", 0),
                                                ("bilinear", "reflection", 0), ("bicubic", "reflection", 1), ("bilinear", "zeros", 1)])
def test_grid_sample_matches_onnxruntime(mode, padding, align):
    x = RNG.standard_normal((2, 3, 5, 6)).astype(F)
    grid = RNG.uniform(-1.6, 1.6, (2, 4, 7, 2)).astype(F)
    grid[0, 0, :3] = [[0.2, -0.5], [1.0, -1.0], [-0.6, 0.75]]  # exact pixel centres and borders
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    if (mode, padding) != ("bicubic", "border"):  # there onnxruntime clamps every coordinate, ONNX's reference
        _check("GridSample", [[("x", x), ("grid", grid)]], attrs, rtol=1e-4, atol=1e-5)  # only those outside the border
    attrs["mode"] = mode.removeprefix("bi")  # opset 20's names, against ONNX's reference
    _check("GridSample", [[("x", x), ("grid", grid)]], attrs, rtol=1e-4, atol=1e-5, oracle="reference", opset=20)


def test_grid_sample_volume_and_gradient():
    """A 5-D input (D, H, W) against ONNX's reference, and d/dx of the composed bicubic sampler."""
    x = RNG.standard_normal((1, 2, 3, 4, 5)).astype(F)
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(F)
    _check("GridSample", [[("x", x), ("grid", grid)]], {"mode": "linear", "padding_mode": "reflection"}, rtol=1e-4, atol=1e-5,
           oracle="reference", opset=20)
    from retrograd.frontend.onnx_import import from_onnx

    xd, gd = RNG.standard_normal((1, 1, 4, 5)), RNG.uniform(-1.1, 1.1, (1, 3, 2, 2))
    mod, _ = from_onnx(_model("GridSample", [("x", xd), ("grid", gd)], {"mode": "cubic", "padding_mode": "border"}, opset=20))
    f = retrograd.build(mod)["main"]
    w = RNG.standard_normal((1, 1, 3, 2))
    _, (gx,) = retrograd.build(Gradient("main", ["x"], seeds="param")(mod))["main_adjoint"](xd, gd, w)
    fd = np.zeros_like(xd)
    for i in np.ndindex(xd.shape):  # linear in x: central differences are exact up to rounding
        e = np.zeros_like(xd)
        e[i] = 1e-3
        fd[i] = (np.sum(w * f(xd + e, gd)) - np.sum(w * f(xd - e, gd))) / 2e-3
    np.testing.assert_allclose(gx, fd, rtol=1e-7, atol=1e-9)


def _attention_runs(q_shape, kv_shape, **extra):
    q = RNG.standard_normal(q_shape).astype(F)
    k = RNG.standard_normal(kv_shape).astype(F)
    v = RNG.standard_normal(kv_shape).astype(F)
    return [("q", q), ("k", k), ("v", v)] + list(extra.items())


@pytest.mark.parametrize("attrs,extra", [
    ({"is_causal": 1}, {}),  # queries shorter than keys, no cache: the causal frontier starts top-left
    ({"is_causal": 1, "softcap": 2.0, "qk_matmul_output_mode": 1}, {}),
    ({"softcap": 1.5, "qk_matmul_output_mode": 2}, {"mask": np.tril(np.ones((3, 5), bool), 1)}),
    ({"qk_matmul_output_mode": 3}, {"mask": np.array([[True] * 5, [False] * 5, [False, True, False, True, True]])}),
])
def test_attention_matches_onnx_reference(attrs, extra):
    """Attention-23 (mask, causal, softcap, a fully masked row, qk outputs) against ONNX's reference."""
    runs = [_attention_runs((2, 2, 3, 4), (2, 2, 5, 4), **extra)]
    outs = ["y", "", "", "qk"] if "qk_matmul_output_mode" in attrs else ["y"]
    _check("Attention", runs, attrs, rtol=1e-5, atol=1e-6, oracle="reference", opset=23, outs=outs)


def test_attention_sliding_window_and_nonpad_lengths_match_onnx_reference():
    from retrograd.frontend.onnx_import import from_onnx

    onnx = need("onnx")
    helper = onnx.helper
    q, k, v = (RNG.standard_normal(s).astype(F) for s in ((2, 2, 3, 4), (2, 2, 6, 4), (2, 2, 6, 4)))
    vi = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape) for n, a in (("q", q), ("k", k), ("v", v))]
    vi.append(helper.make_tensor_value_info("lens", onnx.TensorProto.INT64, [2]))
    node = helper.make_node("Attention", ["q", "k", "v", "", "", "", "lens"], ["y"], is_causal=1, left_window_size=1)
    graph = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    mod, _ = from_onnx(model)
    ref = need("onnx.reference").ReferenceEvaluator(model)
    fn = retrograd.build(mod)["main"]
    for lens in (np.array([6, 4], I), np.array([3, 5], I)):  # runtime lengths: one module
        np.testing.assert_allclose(fn(q, k, v, lens), ref.run(None, {"q": q, "k": k, "v": v, "lens": lens})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_propagate_nan_from_any_input(op):
    """onnxruntime gives NaN where any input is NaN; a single select would drop a NaN in the first."""
    nan = np.nan
    a, b, c = F([nan, 1, 2, 3, -1]), F([0, nan, 2, 4, -1]), F([0, 1, nan, 5, -2])
    _check(op, [[("a", a), ("b", b), ("c", c)], [("a", c), ("b", a), ("c", b)]])


def test_clip_keeps_nan_with_runtime_bounds():
    x = F([np.nan, 1.0, -1.0, 0.25, 0.5, 0.0])
    bounds = lambda lo, hi: [("lo", np.array(lo, F)), ("hi", np.array(hi, F))]  # noqa: E731
    _check("Clip", [[("x", x), *bounds(0.0, 0.5)], [("x", x[::-1].copy()), *bounds(-2.0, 0.0)]])
