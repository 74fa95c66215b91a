"""Every registered op has OpCases (so the generated inference, kernel and gradient tests reach it), and
every TVM 0.27 Relax tensor op is registered, except the ones still pending (named here explicitly)."""

from __future__ import annotations

from ops.all_cases import ALL_CASES
from ops.helpers import OWN_OPS

from retrograd.ops.registry import all_ops, lookup
from optional import need  # noqa: E402

# TVM 0.27's Relax tensor ops that issue 10 asks for (VM plumbing, inspection, closures, devices,
# quantization, vision and data-dependent output shapes excluded).
TVM_TENSOR_OPS = """
abs acos acosh add arange argmax argmin argsort asin asinh astype atan atan2 atanh bitwise_and bitwise_not
bitwise_or bitwise_xor broadcast_to bucketize ceil clip collapse_sum_like collapse_sum_to concat cos cosh
cumprod cumsum divide dynamic_strided_slice einsum equal ewise_fma exp expand_dims eye eye_like flatten flip
floor floor_divide floor_mod full full_like gather_elements gather_nd greater greater_equal hamming_window
index_put index_tensor isfinite isinf isnan left_shift less less_equal log log_add_exp logical_and
logical_not logical_or logical_xor matmul max maximum mean median meshgrid min minimum mod multiply negative
not_equal one_hot ones ones_like outer permute_dims power prod repeat reshape reverse_sequence right_shift
round rsqrt scatter_elements scatter_nd sigmoid sign sin sinh slice_scatter sort split sqrt square squeeze
stack std strided_slice subtract sum take tan tanh tile topk tril triu trunc variance where zeros zeros_like
image.affine_grid image.grid_sample image.resize2d image.resize3d
nn.adaptive_avg_pool1d nn.adaptive_avg_pool2d nn.adaptive_avg_pool3d nn.attention nn.attention_bias
nn.avg_pool1d nn.avg_pool2d nn.avg_pool3d nn.batch_flatten nn.batch_norm nn.conv1d nn.conv1d_transpose
nn.conv2d nn.conv2d_transpose nn.conv3d nn.conv3d_transpose nn.cross_entropy_with_logits nn.dropout nn.gelu
nn.gelu_tanh nn.group_norm nn.instance_norm nn.layer_norm nn.leakyrelu nn.log_softmax nn.max_pool1d
nn.max_pool2d nn.max_pool3d nn.nll_loss nn.pad nn.pixel_shuffle nn.prelu nn.relu nn.rms_norm nn.selu
nn.silu nn.softmax nn.softplus
shape_of size shape_to_tensor tensor_to_shape nonzero unique quantize dequantize multinomial_from_uniform layout_transform
""".split()

# None left: every op issue 10 lists is registered. A name here would mark an op still to land (the
# test fails for a pending op that is registered).
PENDING: set[str] = set()

# Ops of retrograd's own (not TVM's, so not printed for TVM), checked by their own tests.


def test_every_registered_op_has_a_case():
    covered = {c.op for c in ALL_CASES} | OWN_OPS
    missing = sorted(op.name for op in all_ops() if op.name not in covered)
    assert not missing, f"registered ops without an OpCase (add cases to a cases_*.py list in all_cases.py): {missing}"


def test_every_tvm_tensor_op_is_registered_or_pending():
    missing = [n for n in TVM_TENSOR_OPS if n not in PENDING and lookup(f"relax.{n}") is None]
    assert not missing, f"TVM ops not registered: {missing}"
    landed = sorted(n for n in PENDING if lookup(f"relax.{n}") is not None)
    assert not landed, f"registered now: remove from PENDING {landed}"
    assert PENDING <= set(TVM_TENSOR_OPS)


def test_the_op_list_names_real_tvm_ops():
    tvm = need("tvm")
    unknown = []
    for n in TVM_TENSOR_OPS:
        try:
            tvm.ir.Op.get(f"relax.{n}")
        except Exception:  # noqa: BLE001 - TVM raises its own error type for unknown ops
            unknown.append(n)
    assert not unknown, f"not TVM 0.27 ops: {unknown}"
