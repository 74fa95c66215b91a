"""aten.nonzero, aten._unique2 / unique_dim and PT2E's quantized_decomposed ops through from_torch: results
equal PyTorch's, data-dependent sizes typed by rank (TVM's typing), runtime size assertions skipped."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from optional import need


def _import_and_run(model, *inputs):
    from retrograd.frontend import from_torch

    mod, params = from_torch(model, inputs)
    text = mod.script()
    assert retrograd.structural_equal(retrograd.parse(text), mod)
    got = retrograd.build(mod)["main"](*[x.numpy() for x in inputs], *params.values())
    want = model(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.numpy().dtype
        np.testing.assert_array_equal(g, w.numpy())
    return mod


def test_nonzero_of_a_mask():
    torch = need("torch")

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x > 0)

    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0))
    mod = _import_and_run(M(), x)
    ret = mod["main"].ret_struct_info.fields[0]
    assert ret.shape is None and ret.ndim == 2 and ret.dtype == "int64"
    assert "R.nonzero" in mod.script()


@pytest.mark.parametrize("kind", ["all", "sorted-only", "dim0", "counts-only"])
def test_unique(kind):
    torch = need("torch")

    class U(torch.nn.Module):
        def forward(self, x):
            if kind == "all":
                return torch.unique(x, return_inverse=True, return_counts=True)
            if kind == "sorted-only":
                return torch.unique(x)
            if kind == "counts-only":
                return torch.unique(x, return_counts=True)
            return torch.unique(x, dim=0, return_inverse=True, return_counts=True)

    x = torch.randint(0, 4, (6, 3), generator=torch.Generator().manual_seed(1))
    if kind == "dim0":
        x[3] = x[0]
    _import_and_run(U(), x)


def test_pt2e_quantize_dequantize_per_tensor_and_per_channel():
    torch = need("torch")
    need("torch.ao.quantization.fx._decomposed")  # registers torch.ops.quantized_decomposed

    qd = torch.ops.quantized_decomposed

    class Q(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", torch.tensor([0.1, 0.2, 0.05]))
            self.register_buffer("z", torch.tensor([0, 2, -1]))

        def forward(self, x):
            q = qd.quantize_per_tensor(x, 0.05, 3, -128, 127, torch.int8)
            qc = qd.quantize_per_channel(x, self.s, self.z, 1, -128, 127, torch.int8)
            return (q, qd.dequantize_per_tensor(q, 0.05, 3, -128, 127, torch.int8), qc,
                    qd.dequantize_per_channel(qc, self.s, self.z, 1, -128, 127, torch.int8))

    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(2)) * 4
    mod = _import_and_run(Q(), x)
    assert "R.quantize" in mod.script() and "R.dequantize" in mod.script()


def test_pt2e_quantization_to_a_narrower_range_is_a_clear_error():
    torch = need("torch")
    need("torch.ao.quantization.fx._decomposed")

    from retrograd.errors import UnsupportedError
    from retrograd.frontend import from_torch

    class Q(torch.nn.Module):
        def forward(self, x):
            return torch.ops.quantized_decomposed.quantize_per_tensor(x, 0.05, 0, -127, 127, torch.int8)

    with pytest.raises(UnsupportedError, match=r"over \[-127, 127\]"):
        from_torch(Q(), (torch.randn(2, 3),))
