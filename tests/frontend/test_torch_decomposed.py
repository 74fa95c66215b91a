"""Programs after `ep.run_decompositions()` (the core-ATen form TVM's frontend and many users import):
the ops that decomposition leaves (`_adaptive_avg_pool3d`, `empty_strided`, ...) import, and forward
and input gradients equal PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.passes import Gradient
from optional import need


def _decomposed_vs_torch(model, inputs, expect_ops=()):
    """Export, run_decompositions(), import: the forward and each float input's gradient (a vjp with a
    random cotangent) equal torch.autograd's. `expect_ops` must be in the decomposed graph."""
    torch = need("torch")
    from retrograd.frontend import from_exported_program

    ep = torch.export.export(model, inputs).run_decompositions()
    targets = {str(n.target).split(".")[1] for n in ep.graph.nodes if n.op == "call_function" and "." in str(n.target)}
    assert set(expect_ops) <= targets, targets
    mod, params = from_exported_program(ep)
    values = [x.numpy() for x in inputs] + list(params.values())
    (out,) = retrograd.build(mod)["main"](*values)
    leaves = [x.clone().requires_grad_(x.dtype.is_floating_point) for x in inputs]
    want = model(*leaves)
    np.testing.assert_allclose(out, want.detach().numpy(), rtol=1e-12, atol=1e-12)
    diff = [k for k, x in enumerate(inputs) if x.dtype.is_floating_point]
    adj = Gradient("main", diff, 0, seeds="param")(mod)
    cot = np.random.default_rng(0).standard_normal(out.shape)
    _, grads = retrograd.build(adj)["main_adjoint"](*values, cot)
    want.backward(torch.from_numpy(cot))
    for k, g in zip(diff, grads):
        np.testing.assert_allclose(g, leaves[k].grad.numpy(), rtol=1e-12, atol=1e-12, err_msg=f"input {k}")


def test_adaptive_avg_pool3d_and_empty_strided_after_decomposition():
    torch = need("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.nn.functional.adaptive_avg_pool3d(x, (2, 1, 3))  # uneven windows along two dims
            buf = torch.empty_strided((2, 1, 3), (3, 3, 1), dtype=x.dtype).fill_(1.5)
            return y * buf

    x = torch.randn(1, 2, 4, 5, 7, dtype=torch.float64)
    _decomposed_vs_torch(M(), (x,), expect_ops=("_adaptive_avg_pool3d", "empty_strided"))


def test_max_pool_after_decomposition_is_max_pool_with_indices():
    """run_decompositions() writes max_pool2d as max_pool2d_with_indices (every ResNet's stem): its values
    import; ties between window elements are avoided (PyTorch sends the gradient to the first maximum)."""
    torch = need("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1)
            return torch.nn.functional.max_pool3d(y.unsqueeze(1), (1, 2, 2), ceil_mode=True).squeeze(1) * 2.0

    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    _decomposed_vs_torch(M(), (x,), expect_ops=("max_pool2d_with_indices", "max_pool3d_with_indices"))


def test_reading_max_pool_indices_is_a_clear_error():
    torch = need("torch")
    from retrograd.errors import UnsupportedError
    from retrograd.frontend import from_torch

    class M(torch.nn.Module):
        def forward(self, x):
            y, idx = torch.nn.functional.max_pool2d(x, 2, return_indices=True)
            return y + idx.to(x.dtype)

    with pytest.raises(UnsupportedError) as info:
        from_torch(M(), (torch.randn(1, 2, 4, 4),))
    msg = str(info.value)
    assert "max pooling's indices" in msg and "fx node 'max_pool2d_with_indices_1'" not in msg and "read by fx node" in msg


def test_rrelu_in_eval_mode_is_leaky_relu_with_the_mean_slope():
    """Eval-mode RReLU (`rrelu_with_noise_functional` after decomposition; `rrelu` before): forward and input
    gradient equal PyTorch's; in training mode (random slopes) the import says what to do."""
    torch = need("torch")
    from retrograd.errors import UnsupportedError
    from retrograd.frontend import from_torch

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = torch.nn.RReLU(0.1, 0.3)

        def forward(self, x):
            return self.act(x) * 3.0

    x = torch.randn(4, 5, dtype=torch.float64)
    _decomposed_vs_torch(M().eval(), (x,), expect_ops=("rrelu_with_noise_functional",))
    mod, params = from_torch(M().eval(), (x,))  # the raw export's aten.rrelu
    out = retrograd.build(mod)["main"](x.numpy(), *params.values())
    np.testing.assert_allclose(out[0] if isinstance(out, tuple) else out, M().eval()(x).numpy(), rtol=1e-12)
    with pytest.raises(UnsupportedError, match="model.eval"):
        from_torch(M().train(), (x,))
