"""from_onnx: ONNX's own node test cases, and models exported by torch.onnx.export checked against
onnxruntime (forward) and torch.autograd (gradients of every parameter and input)."""

from __future__ import annotations

import io
import os
import warnings

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.passes import Gradient

# A fast, fixed sample of ONNX node cases across the op families (each must pass exactly as ONNX's runner
# compares); the full sweep is benchmarks/bench_onnx_coverage.py and the slow-marked test below.
FAST_CASES = [
    "test_batchnorm_epsilon_training_mode", "test_nonzero_example", "test_gru_seq_length", "test_lstm_with_peepholes",
    "test_add_bcast", "test_relu", "test_softmax_axis_1", "test_logsoftmax_default_axis", "test_matmul_4d",
    "test_gemm_all_attributes", "test_conv_with_strides_padding", "test_convtranspose_pads", "test_maxpool_2d_pads",
    "test_averagepool_2d_same_upper", "test_globalaveragepool", "test_batchnorm_epsilon", "test_layer_normalization_4d_axis1",
    "test_instancenorm_example", "test_group_normalization_example", "test_reshape_negative_dim", "test_transpose_all_permutations_3",
    "test_slice_neg_steps", "test_gather_negative_indices", "test_gather_elements_negative_indices", "test_gathernd_example_int32_batch_dim1",
    "test_scatter_elements_with_reduction_max", "test_scatternd_multiply", "test_concat_3d_axis_negative_2", "test_split_variable_parts_2d_opset18",
    "test_unsqueeze_negative_axes", "test_squeeze_negative_axes", "test_expand_dim_changed", "test_tile", "test_edge_pad",
    "test_reduce_log_sum_exp_keepdims_random", "test_reduce_l2_negative_axes_keep_dims_example", "test_argmax_negative_axis_keepdims_random_select_last_index",
    "test_cumsum_1d_reverse_exclusive", "test_top_k_smallest", "test_einsum_batch_matmul", "test_clip_default_inbounds", "test_where_long_example",
    "test_hardmax_axis_0", "test_selu", "test_mish", "test_gelu_tanh_2", "test_onehot_negative_indices", "test_depthtospace_crd_mode_example",
    "test_tril_neg", "test_mod_mixed_sign_float32", "test_div_uint8", "test_nllloss_NCd1d2_with_weight_reduction_mean",
    "test_sce_mean_weight_ii_3d_log_prob", "test_attention_4d_gqa_with_past_and_present", "test_rms_normalization_3d_axis_negative_1_epsilon",
    "test_shape_start_negative_1", "test_range_float_type_positive_delta", "test_lrn", "test_cast_FLOAT_to_DOUBLE",
    # inputs TVM needs as constants, given at run time; ONNX's Resize / GridSample / Attention semantics
    "test_reduce_sum_keepdims_random", "test_reduce_log_sum_exp_do_not_keepdims_random", "test_slice_negative_axes",
    "test_unsqueeze_three_axes", "test_top_k", "test_constant_pad_axes", "test_onehot_with_axis", "test_range_int32_type_negative_delta",
    "test_tril", "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside", "test_resize_tf_crop_and_resize_extrapolation_value",
    "test_resize_downsample_sizes_linear_antialias", "test_gridsample_bicubic", "test_gridsample_reflection_padding",
    "test_gridsample_volumetric_bilinear_align_corners_1", "test_attention_4d_causal", "test_attention_4d_with_qk_matmul_softcap",
    # float8: Cast's saturation (infinities and out-of-range values to the largest finite value, NaN kept), and
    # a float8 input widened to float32 for the rest of the function
    "test_cast_FLOAT_to_FLOAT8E4M3FN", "test_castlike_FLOAT16_to_FLOAT8E5M2", "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN",
    "test_dequantizelinear_e4m3fn_zero_point",
    "test_maxpool_2d_uint8",  # integer max pooling
]
FULL_FLOOR = 1580  # node cases passing without specializing any input, of the full run (benchmarks/RESULTS.md)


def _cases(names=None):
    collect_testcases = need("onnx.backend.test.case.node").collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = collect_testcases(None)
    return [c for c in cases if names is None or c.name in names]


def _bench():
    import bench_onnx_coverage  # benchmarks/ is on pytest's pythonpath

    return bench_onnx_coverage


def test_fast_node_cases_pass():
    cases = _cases(set(FAST_CASES))
    assert len(cases) == len(FAST_CASES)
    bench = _bench()
    failed = {c.name: r for c in cases if (r := bench.run_case(c, 30.0))[0] != "pass"}  # none specialized
    assert not failed, failed


@pytest.mark.skipif(not os.environ.get("RETROGRAD_SLOW"), reason="slow: the full ONNX node sweep (set RETROGRAD_SLOW=1)")
def test_full_node_sweep_meets_floor():
    bench = _bench()
    results = [bench.run_case(c, 20.0)[0] for c in _cases()]
    assert sum(r == "pass" for r in results) >= FULL_FLOOR


def test_unsupported_operator_names_the_node():
    onnx = need("onnx")
    TensorProto, helper = onnx.TensorProto, onnx.helper

    node = helper.make_node("StringNormalizer", ["x"], ["y"], name="norm0")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(retrograd.errors.UnsupportedError, match=r"node 0 'norm0' \(StringNormalizer\)"):
        retrograd.frontend.onnx_import.from_onnx(model)
    del onnx


def test_initializers_are_params_after_inputs_and_reshape_reads_a_constant():
    onnx = need("onnx")
    TensorProto, helper, numpy_helper = onnx.TensorProto, onnx.helper, onnx.numpy_helper

    from retrograd.frontend.onnx_import import from_onnx

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Reshape", ["h", "shape"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([3, -1], np.int64), "shape")],
    )
    mod, params = from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert list(params) == ["w"]  # the shape is read at import time, not a parameter
    assert [p.name_hint for p in mod["main"].params] == ["x", "w"]
    x = rng.standard_normal((2, 4)).astype(np.float32)
    (out,) = [retrograd.build(mod)["main"](x, params["w"])]
    np.testing.assert_allclose(out, (x @ w).reshape(3, 2), rtol=1e-6)


# -- models exported by torch.onnx.export --------------------------------------------------------
def _models(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(16)
            self.qkv = nn.Linear(16, 48)
            self.proj = nn.Linear(16, 16)
            self.ln2 = nn.LayerNorm(16)
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(16, dim=-1)
            q, k, v = (z.reshape(b, t, 2, 8).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    return {
        "mlp": (lambda: nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Tanh()), (3, 8)),
        "cnn_bn": (lambda: nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU(), nn.MaxPool2d(2),
                                         nn.Conv2d(6, 4, 3, stride=2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5)), (2, 3, 12, 12)),
        "transformer_block": (Block, (2, 5, 16)),
    }


def _export(name):
    torch = need("torch")
    need("onnx")
    factory, shape = _models(torch)[name]
    torch.manual_seed(0)
    model = factory().eval()
    with torch.no_grad():  # distinct values: the exporter merges initializers of equal content
        for p in model.parameters():
            p.add_(torch.rand(p.shape) * 0.1)
    for m in model.modules():  # non-trivial running statistics
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(*shape)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=17, input_names=["x"], do_constant_folding=False)
    return torch, model, x, buf.getvalue()


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "transformer_block"])
def test_exported_model_forward_equals_onnxruntime(name):
    ort = need("onnxruntime")
    _, _, x, data = _export(name)
    from retrograd.frontend.onnx_import import from_onnx

    mod, params = from_onnx(data)
    out = retrograd.build(mod)["main"](x.numpy(), *params.values())
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (expected,) = sess.run(None, {"x": x.numpy()})
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "transformer_block"])
def test_exported_model_gradients_equal_torch(name):
    torch, model, x, data = _export(name)
    from retrograd.frontend.onnx_import import from_onnx

    mod, params = from_onnx(data)
    func = mod["main"]
    names = [p.name_hint for p in func.params]
    shape = func.ret_struct_info.shape
    cot = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    adj = Gradient("main", names, seeds="param")(mod)
    _, grads = retrograd.build(adj)["main_adjoint"](x.numpy(), *params.values(), cot)

    leaf = x.clone().requires_grad_()
    model.zero_grad()
    model(leaf).backward(torch.from_numpy(cot))
    np.testing.assert_allclose(grads[0], leaf.grad.numpy(), rtol=1e-4, atol=1e-5)
    # torch.onnx.export keeps a parameter's state-dict name, or stores it transposed (a MatMul weight)
    # under a generated name; buffers (running statistics) have no torch gradient to compare.
    covered = set()
    for (onnx_name, value), g in zip(params.items(), grads[1:]):
        for pname, p in model.named_parameters():
            if pname == onnx_name or (p.ndim == 2 and p.T.shape == value.shape and np.array_equal(p.detach().numpy().T, value)):
                want = p.grad.numpy() if pname == onnx_name else p.grad.numpy().T
                np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5, err_msg=onnx_name)
                covered.add(pname)
                break
    assert covered == {n for n, _ in model.named_parameters()}
