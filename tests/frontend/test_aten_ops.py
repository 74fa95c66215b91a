"""ATen ops one by one through from_torch: each small function's forward equals PyTorch's, and where the
output is float its input gradient (a vjp with a random cotangent) equals torch.autograd's."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.passes import Gradient
from optional import need

def _cases(torch):
    F = torch.nn.functional
    TIES = _ties(torch)
    r = lambda *s: torch.randn(*s)  # noqa: E731
    i = lambda hi, *s: torch.randint(0, hi, s)  # noqa: E731
    return {
        "arith": (lambda x, y: (x + 2 * y - 1.5) * y / (x.abs() + 1) - 3 - x, (r(3, 4), r(4))),
        "rsub_pow": (lambda x: 1 - x ** 3 + x ** 2 + 2 ** x + x.abs() ** 0.5, (r(5),)),
        "div_modes": (lambda a, b: (torch.div(a, b, rounding_mode="floor"), torch.div(a, b, rounding_mode="trunc"),
                                    a % b, torch.fmod(a, b)), (torch.tensor([7, -7, 5, -9]), torch.tensor([2, 2, -3, 4]))),
        "unary": (lambda x: torch.exp(x).log1p() + torch.sin(x) * torch.cos(x) + torch.tanh(x) + torch.sigmoid(x)
                  + torch.rsqrt(x.abs() + 1) + torch.erf(x) + torch.expm1(x) + torch.log2(x.abs() + 1), (r(2, 5),)),
        "activations": (lambda x: F.relu6(x * 4) + F.hardswish(x) + F.hardsigmoid(x) + F.leaky_relu(x, 0.2) + F.elu(x)
                        + F.selu(x) + F.softplus(x, 2.0) + F.mish(x) + F.silu(x) + F.gelu(x, approximate="tanh")
                        + F.celu(x, 0.5) + F.hardtanh(x, -0.5, 0.5), (r(3, 7),)),
        "compare_where": (lambda x, y: torch.where((x > y) & (x < 1.0) | ~(y >= 0.5), x, y * 2)
                          + x.masked_fill(x < 0, 0.25) + torch.maximum(x, y) - torch.minimum(x, y).clamp(-0.5, 0.7),
                          (r(4, 3), r(4, 3))),
        "reductions": (lambda x: (x.sum(1), x.mean((0, 2), keepdim=True), x.amax(-1), x.amin(0), x.var(1),
                                  x.std(2, correction=0), x.prod(2), torch.logsumexp(x, 1), x.norm(dim=1),
                                  x.max(1).values, x.min(2)[0], x.argmax(1), x.argmin(-1)), (r(3, 4, 5),)),
        "cumsum": (lambda x: x.cumsum(1) + x.cumprod(0), (r(3, 4) * 0.5,)),
        "views": (lambda x: (x.view(6, 4).t() @ x.reshape(6, 4)).unsqueeze(0).expand(2, 4, 4).permute(2, 0, 1)
                  .transpose(0, 1).flatten(1).unflatten(1, (2, 8)).squeeze(), (r(2, 3, 4),)),
        "cat_stack_split": (lambda x, y: torch.stack([*torch.split(torch.cat([x, y], 1), [2, 5], 1)[1].chunk(5, 1)], 0)
                            .sum(0) + torch.cat(x.unbind(1), 0).sum(), (r(3, 2), r(3, 5))),
        "slicing": (lambda x: x[1:, ::2] * 2 + x[:-1, 1::2] + x[1:, -1:] + x[0, ::2] + x.narrow(1, 1, 2)[1:]
                    + x.select(1, 2)[1:].unsqueeze(1) + x[-3:, -2:], (r(4, 4),)),
        "flip_roll_tri": (lambda x: x.flip(0) + x.roll(1, 1) + x.roll(-2) + x.tril(-1) + x.triu(1), (r(4, 5),)),
        "repeat_tile": (lambda x: x.repeat(2, 3) + x.repeat_interleave(2, 0).repeat_interleave(3, 1), (r(2, 2),)),
        "gather_index": (lambda x, idx: x.gather(1, idx) + x.index_select(1, idx[0]) + x[:, idx[1]] + x[idx[0]]
                         + x[idx[0], idx[1]].unsqueeze(1), (r(3, 3), torch.tensor([[0, 2, 1], [1, 1, 0], [2, 0, 0]]))),
        "scatter": (lambda x, idx: x.scatter(1, idx, 0.5) + x.scatter_add(1, idx, x * 2)
                    + x.index_put((idx[0],), x[:1].expand(3, 3) * 3, accumulate=True),
                    (r(3, 3), torch.tensor([[0, 2, 1], [1, 1, 0], [2, 0, 0]]))),
        "creation": (lambda x: x + torch.arange(5) + torch.ones(3, 5) * torch.full((5,), 2.0) + torch.zeros_like(x)
                     + x.new_ones(5) + torch.eye(5)[:3] * 0 + torch.arange(2, 12, 2).float() + torch.tensor(1.5), (r(3, 5),)),
        "topk_sort": (lambda x: (x.topk(2, 1)[0], x.sort(1, descending=True)[0], x.argsort(0), x.topk(1, 0, largest=False)[1]),
                      (r(4, 5),)),
        "linalg": (lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0) + torch.einsum("ij,jk->ik", a, b)
                   + torch.outer(a[:, 0], b[0]) + (a.unsqueeze(0) @ b.unsqueeze(0)).squeeze(0), (r(3, 4), r(4, 5), r(5))),
        "conv_pool": (lambda x, w, b, wt: F.avg_pool2d(F.max_pool2d(F.conv2d(x, w, b, stride=2, padding=1, groups=2),
                                                                     3, 1, 1, ceil_mode=True), 2, count_include_pad=False)
                      + F.adaptive_avg_pool2d(F.conv_transpose2d(x, wt, b, stride=2, padding=1, output_padding=1,
                                                                 groups=2), 2),
                      (r(2, 4, 8, 8), r(4, 2, 3, 3), r(4), r(4, 2, 3, 3))),
        "conv1d_3d": (lambda x, w, y, v: F.max_pool1d(F.conv1d(x, w, padding="same"), 2).sum((1, 2))
                      + F.avg_pool3d(F.conv3d(y, v, padding=1), 2).sum((1, 2, 3, 4)),
                      (r(2, 3, 9), r(4, 3, 3), r(2, 2, 4, 4, 4), r(3, 2, 3, 3, 3))),
        "norms": (lambda x, w, b, y: F.layer_norm(x, (6,), w, b) + F.group_norm(y, 2, w, b).mean(-1)
                  + F.instance_norm(y, weight=w, bias=b).amax(-1) + F.rms_norm(x, (6,), w, 1e-5)
                  + F.batch_norm(x, torch.zeros(6), torch.ones(6), w, b, training=False), (r(4, 6), r(6), r(6), r(4, 6, 5))),
        "softmax_losses": (lambda x, t: (F.softmax(x, 1), F.log_softmax(x, -1), F.cross_entropy(x, t),
                                         F.cross_entropy(x, t, label_smoothing=0.1, reduction="sum"),
                                         F.nll_loss(F.log_softmax(x, 1), t, ignore_index=2, reduction="mean"),
                                         F.mse_loss(x, x.flip(0)), F.l1_loss(x, x * 0.5, reduction="sum")),
                           (r(5, 4), torch.tensor([0, 3, 2, 1, 2]))),
        "pad_interp": (lambda x: F.pad(x, (1, 2, 0, 1)) .sum() + F.pad(x, (1, 1, 2, 2), mode="reflect").sum((2, 3))
                       + F.pad(x, (2, 1, 1, 1), mode="replicate").mean((2, 3))
                       + F.interpolate(x, scale_factor=2, mode="nearest").sum((2, 3))
                       + F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=False).sum((2, 3))
                       + F.interpolate(x, size=(6, 6), mode="bilinear", align_corners=True).mean((2, 3)),
                       (r(1, 4, 4, 4),)),
        "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), (r(1, 8, 3, 3),)),
        "sdpa": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True)
                 + F.scaled_dot_product_attention(q, k, v, attn_mask=m)
                 + F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0, scale=0.3), (r(2, 2, 5, 4), r(2, 2, 5, 4),
                                                                                         r(2, 2, 5, 3), r(5, 5))),
        "embedding": (lambda w, idx: F.embedding(idx, w, padding_idx=1) + F.one_hot(idx, 6).float() @ w[:, :6].t()[:6],
                      (r(6, 6), torch.tensor([[1, 2, 5], [0, 1, 1]]))),
        "dtype_casts": (lambda x, n: x.to(torch.float64).sum(1).float() + n.float().mean() + (n > 1).to(torch.int64)
                        + x.int().sum(1) + x.type_as(n).sum(1), (r(3, 4) * 3, torch.tensor([1, 2, 3]))),
        "logical": (lambda a, b: (a & b, a | b, a ^ b, ~a, torch.logical_and(a, b), a.all(), b.any(0)),
                    (torch.tensor([[True, False], [True, True]]), torch.tensor([[False, False], [True, False]]))),
        "glu_prelu": (lambda x, w: F.glu(x, -1) + F.prelu(x[..., :2], w), (r(3, 4), torch.tensor([0.25]))),
        # Ties everywhere: PyTorch halves a maximum's gradient at a tie, sends fmax's to self, max(dim)'s and
        # median(dim)'s to the returned index, clamp's to x; abs has gradient 0 at 0 (a zero row's norms too).
        "select_ties": (lambda x, y: torch.maximum(x, y) * 2 + torch.minimum(y, x) * 3 + torch.max(x, y)
                        + torch.fmax(x, y) * 5 - torch.fmin(y, x) * 7 + x.max(1).values.unsqueeze(1)
                        + x.min(0, keepdim=True)[0] * 11 + x.median(1).values.unsqueeze(1) * 13
                        + torch.clamp(x, y, y + 1) * 17 + torch.clamp(x, max=y) * 19 + x.cummax(1)[0] * 23
                        + y.t().cummin(0).values.t() * 29 + x.abs() * 31 + F.l1_loss(x, y) * 37
                        + torch.linalg.vector_norm(x, 1, dim=1, keepdim=True) * 41
                        + torch.linalg.vector_norm(x, float("inf"), dim=1, keepdim=True) * 43, TIES),
        "put_slices_fold": (lambda x: (_put_with_slices(torch, x), F.fold(x.reshape(1, 12, 5)[:, :, :4], (3, 3), 2),
                                       x.unfold(2, 2, 1), x.unfold(1, 3, 2), torch.dist(x, x.flip(0), 3)), (r(3, 4, 5),)),
        # Ties and zeros in the data: amax / amin share the gradient among equal values, prod skips a zero.
        "scatter_reduce": (lambda x, s: _scatter_reductions(torch, x, s), TIES),
        # cdist of at most 25 rows (more: torch.export writes its matmul form, whose sqrt has no gradient at 0).
        "distances": (lambda x, y: (torch.cdist(x, y) + torch.cdist(x, y, p=1) + torch.cdist(x, x, p=float("inf"))
                                    + torch.cdist(x, y * 2, p=3) + F.pdist(x, 1.5)[:5].sum() + torch.dist(x, y[:3], 3)
                                    + torch.kthvalue(x[:, :3].round(), 2, 1, keepdim=True).values),
                      (r(3, 4), r(3, 4))),
        # logcumsumexp of values ~100 apart (exp underflows): a prefix far below a later maximum must not underflow to -inf.
        "search_sign_scan": (lambda x, b: (torch.logcumsumexp(x * 40, 1) + torch.logcumsumexp(x, 0)
                                           + torch.copysign(x, x.flip(0)) + torch.copysign(x, -0.0) * 2
                                           + x.masked_scatter(x > 0, x.flip(0) * 3)
                                           + torch.searchsorted(b, x, right=True).float() * x
                                           + torch.bucketize(x, b, out_int32=True).float()
                                           + torch.searchsorted(x.sort(1).values, x[:, :1] * 0.5).float()),
                             (r(4, 5), torch.tensor([-1.0, 0.0, 0.5, 1.0]))),
        "gamma": (lambda x: torch.lgamma(x) + torch.digamma(x) * 2 + torch.special.gammaln(x * 7) * 3,
                  (torch.tensor([0.01, 0.3, 0.5, 0.9, 1.0, 1.5, 2.0, 3.7, 10.0, 24.5, -0.3, -1.7, -2.5],
                                dtype=torch.float64),)),
        "select_nan": (lambda x, y: (torch.maximum(x, y), torch.minimum(x, y), torch.fmax(x, y), torch.fmin(x, y),
                                     torch.clamp(x, y, y + 1), torch.clamp(x, min=y), *x.max(1), *y.min(0),
                                     *x.cummax(1), *y.cummin(0), *x.nan_to_num(2.0).int().cummax(0), *(x > 1).cummin(1)),
                       (TIES[0].masked_fill(TIES[0] == 3, float("nan")), TIES[1].masked_fill(TIES[1] == 0, float("nan")))),
    }


def _put_with_slices(torch, x):
    y = x.clone()
    y[:, torch.tensor([0, 2])] = x[:, :2] * 3
    y[torch.tensor([1, 0]), :, torch.tensor([2, 3])] += x[0, :, :2].t() * 5
    y[..., torch.tensor([[1], [3]])] = 2.0
    return y + x.index_fill(1, torch.tensor([0, 2]), 1.5) + x.index_add(1, torch.tensor([0, 0, 2]), x[:, :3] * 2)


def _scatter_reductions(torch, x, s):
    idx = torch.tensor([[0, 1, 0, 3], [2, 2, 2, 2], [3, 0, 1, 1]])
    out = x.scatter_reduce(1, idx, s, "sum", include_self=False)
    for k, how in enumerate(("prod", "mean")):
        out = out + x.scatter_reduce(1, idx, s * 1.5, how, include_self=bool(k % 2)) * (k + 2)
        out = out + x.scatter_reduce(1, idx, s - 0.5, how, include_self=not k % 2) * (k + 7)
    # amax / amin without include_self: PyTorch counts self among the ties and drops its share (docs/import.md).
    return out + x.scatter_reduce(1, idx, s * 1.5, "amax") * 11 + x.scatter_reduce(1, idx, s - 0.5, "amin") * 13


def _ties(torch):
    return (torch.tensor([[1.0, 2.0, 2.0, 0.0], [3.0, 3.0, -1.0, 0.5], [0.0, 0.0, 0.0, 0.0]]),
            torch.tensor([[1.0, 0.0, 2.0, 0.0], [3.0, 4.0, -1.0, 0.25], [0.0, 1.0, 0.0, -1.0]]))


def _run_case(name):
    torch = need("torch")
    from retrograd.frontend import from_torch

    fn, inputs = _cases(torch)[name]

    class M(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    torch.manual_seed(0)
    mod, params = from_torch(M(), inputs)
    values = [x.numpy() for x in inputs] + list(params.values())  # lifted constants (torch.tensor(1.5))
    outs = retrograd.build(mod)["main"](*values)
    with torch.no_grad():
        want = fn(*[x.clone() for x in inputs])
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(outs) == len(want)
    for got, w in zip(outs, want):
        assert got.dtype == w.numpy().dtype, (got.dtype, w.dtype)
        np.testing.assert_allclose(got, w.numpy(), rtol=1e-5, atol=1e-5)
    return mod, inputs, values, outs, fn


@pytest.mark.parametrize("name", [
    "arith", "rsub_pow", "div_modes", "unary", "activations", "compare_where", "reductions", "cumsum", "views",
    "cat_stack_split", "slicing", "flip_roll_tri", "repeat_tile", "gather_index", "scatter", "creation", "topk_sort",
    "linalg", "conv_pool", "conv1d_3d", "norms", "softmax_losses", "pad_interp", "pixel_shuffle", "sdpa", "embedding", "dtype_casts",
    "logical", "glu_prelu", "select_ties", "put_slices_fold", "scatter_reduce",
    "distances", "search_sign_scan", "gamma"])
def test_op_forward_and_input_gradients(name):
    torch = need("torch")
    mod, inputs, values, outs, fn = _run_case(name)
    diff = [k for k, x in enumerate(inputs) if x.dtype.is_floating_point]
    if not diff or outs[0].dtype.kind != "f":
        return
    adj = Gradient("main", diff, 0, seeds="param")(mod)
    cot = np.random.default_rng(1).standard_normal(outs[0].shape).astype(outs[0].dtype)
    _, grads = retrograd.build(adj)["main_adjoint"](*values, cot)
    leaves = [x.clone().requires_grad_(x.dtype.is_floating_point) for x in inputs]
    out = fn(*leaves)
    (out[0] if isinstance(out, tuple) else out).backward(torch.from_numpy(cot))
    for k, g in zip(diff, grads):
        want = leaves[k].grad
        want = np.zeros_like(g) if want is None else want.numpy()
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5, err_msg=f"input {k}")


def test_choices_propagate_nan_as_pytorch():
    """maximum / minimum / clamp with tensor bounds / max(dim) give NaN where PyTorch does, fmax / fmin
    where both sides are NaN; `_run_case` compares every output with NaN in place."""
    _run_case("select_nan")
