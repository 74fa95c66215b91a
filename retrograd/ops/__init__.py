"""The operator set: importing this package registers every op."""

from retrograd.ops import binary, logical, ternary, unary  # noqa: F401  (registers the elementwise ops)
from retrograd.ops import gather_scatter, stack_repeat  # noqa: F401  (registers ops)
from retrograd.ops import index_put, search, sorting  # noqa: F401  (registers ops)
from retrograd.ops import create, indexing, linear_algebra, manipulate, statistical  # noqa: F401  (registers the core families)
from retrograd.ops import nn_activation, nn_adaptive, nn_conv, nn_conv_nd, nn_loss, nn_pool, nn_pool_nd  # noqa: F401  (nn.*)
from retrograd.ops import nn_attention, nn_norm, nn_pad, nn_pointwise  # noqa: F401  (norms, attention, dropout, pad, activations)
from retrograd.ops import nn_image, nn_reshape, nn_sampling  # noqa: F401  (image.*, pixel_shuffle, batch_flatten)
from retrograd.ops import grad  # noqa: F401  (registers grad.* ops)
from retrograd.ops import grad_sparse  # noqa: F401  (registers grad.merge_sparse_rows)
from retrograd.ops import match_cast  # noqa: F401  (registers match_cast)
from retrograd.ops import assert_op  # noqa: F401  (registers assert_op)
from retrograd.ops import ccl  # noqa: F401  (registers ccl.*, the collectives)
from retrograd.ops.registry import Arg, Attr, InferCtx, OpDef, all_ops, get, lookup, register
from retrograd.ops import shape_values  # noqa: F401  (shape_of, size, shape_to_tensor, tensor_to_shape)
from retrograd.ops import data_dependent, quantize  # noqa: F401  (nonzero, unique; quantize, dequantize, multinomial_from_uniform)
from retrograd.ops import layout  # noqa: F401  (layout_transform)
