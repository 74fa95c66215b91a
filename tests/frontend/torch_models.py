"""Standard PyTorch model pieces the real-model tests export through TVM's frontend (torch imported by the caller)."""

from __future__ import annotations

import math

from optional import need

torch = need("torch")  # skips the importing test module when PyTorch is absent
nn = torch.nn
F = torch.nn.functional


class GPTBlock(nn.Module):
    """Pre-norm transformer block: LayerNorm, causal multi-head attention, GELU MLP, residuals."""

    def __init__(self, dim=16, heads=2, manual_mask=False):
        super().__init__()
        self.heads = heads
        self.manual_mask = manual_mask
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.manual_mask:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = att @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class BasicBlock(nn.Module):
    """ResNet basic block: conv3x3-BN-ReLU-conv3x3-BN plus a strided 1x1 projection shortcut."""

    def __init__(self, cin=4, cout=8, stride=2):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.down(x))


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, depthwise 3x3, ReLU6, 1x1 project, residual; then a pooled head."""

    def __init__(self, c=4, expand=4, classes=5):
        super().__init__()
        h = c * expand
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
        self.dw = nn.Sequential(nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        y = x + self.project(self.dw(self.expand(x)))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1))


class PatchEmbed(nn.Module):
    """ViT patch embedding: strided conv to patches, flatten, class token, position embedding, LayerNorm."""

    def __init__(self, img=8, patch=4, cin=3, dim=12):
        super().__init__()
        n = (img // patch) ** 2
        self.proj = nn.Conv2d(cin, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.1)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        p = self.proj(x).flatten(2).transpose(1, 2)
        p = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], dim=1)
        return self.norm(p + self.pos)


class RMSNormSwiGLU(nn.Module):
    """LLaMA-style MLP: RMSNorm, then SiLU(x W1) * (x W3) projected by W2, with a residual."""

    def __init__(self, dim=16, hidden=24):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class GroupNormNet(nn.Module):
    """conv-GroupNorm-LeakyReLU-conv-GroupNorm-Softplus."""

    def __init__(self, cin=3, c=8, groups=4):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, padding=1)
        self.gn1 = nn.GroupNorm(groups, c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.gn2 = nn.GroupNorm(groups, c)

    def forward(self, x):
        y = F.leaky_relu(self.gn1(self.conv1(x)), 0.1)
        return F.softplus(self.gn2(self.conv2(y)), beta=1.5)


class EmbeddingBagClassifier(nn.Module):
    """Mean of token embeddings per bag, a hidden layer, class log-probabilities.

    The bag is an nn.EmbeddingBag(mode="mean"), computed as embedding + mean: TVM 0.27's frontend
    rejects `_embedding_bag` (the tests check both forms agree in PyTorch)."""

    def __init__(self, vocab=20, dim=8, classes=4):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.fc = nn.Linear(dim, 16)
        self.out = nn.Linear(16, classes)

    def forward(self, tokens):
        bags = F.embedding(tokens, self.bag.weight).mean(dim=1)
        return F.log_softmax(self.out(torch.tanh(self.fc(bags))), dim=-1)


class UnrolledLSTM(nn.Module):
    """An LSTMCell applied over a fixed number of steps (unrolled by export), then a linear read-out."""

    def __init__(self, inp=6, hidden=8, steps=3):
        super().__init__()
        self.cell = nn.LSTMCell(inp, hidden)
        self.read = nn.Linear(hidden, 2)
        self.steps = steps

    def forward(self, x):
        h = torch.zeros(x.shape[1], self.cell.hidden_size)
        c = torch.zeros(x.shape[1], self.cell.hidden_size)
        for t in range(self.steps):
            h, c = self.cell(x[t], (h, c))
        return self.read(h)


class Conv1dNet(nn.Module):
    """Conv1d-ReLU-MaxPool1d-Conv1d-AdaptiveAvgPool1d-Linear."""

    def __init__(self, cin=3, c=6, classes=4):
        super().__init__()
        self.conv1 = nn.Conv1d(cin, c, 5, padding=2)
        self.conv2 = nn.Conv1d(c, c, 3, stride=2, dilation=1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        y = F.max_pool1d(F.relu(self.conv1(x)), 2)
        y = F.adaptive_avg_pool1d(F.relu(self.conv2(y)), 1).squeeze(-1)
        return self.fc(y)


class LeNetDropout(nn.Module):
    """LeNet-style: conv-ReLU-maxpool twice, dropout, two linear layers, log-softmax."""

    def __init__(self, classes=5):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 6, 3)
        self.drop = nn.Dropout(0.3)
        self.fc1 = nn.Linear(6 * 2 * 2, 12)
        self.fc2 = nn.Linear(12, classes)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.conv1(x)), 2)
        y = F.max_pool2d(F.relu(self.conv2(y)), 2)
        y = self.drop(torch.flatten(y, 1))
        return F.log_softmax(self.fc2(F.relu(self.fc1(y))), dim=1)


def cases():
    """(name, module factory, example inputs, train mode) for every model the tests check."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    return [
        ("gpt_sdpa", lambda: GPTBlock(), (randn(2, 5, 16),), False),
        ("gpt_masked_fill", lambda: GPTBlock(manual_mask=True), (randn(2, 5, 16),), False),
        ("resnet_eval", BasicBlock, (randn(2, 4, 8, 8),), False),
        ("resnet_train", BasicBlock, (randn(2, 4, 8, 8),), True),
        ("mobilenet_v2", InvertedResidual, (randn(2, 4, 6, 6),), False),
        ("vit_patch", PatchEmbed, (randn(2, 3, 8, 8),), False),
        ("rmsnorm_swiglu", RMSNormSwiGLU, (randn(2, 3, 16),), False),
        ("groupnorm", GroupNormNet, (randn(2, 3, 5, 5),), False),
        ("embedding_bag", EmbeddingBagClassifier, (torch.randint(0, 20, (3, 5), generator=g),), False),
        ("lstm", UnrolledLSTM, (randn(3, 2, 6),), False),
        ("conv1d", Conv1dNet, (randn(2, 3, 16),), False),
        ("lenet_dropout", LeNetDropout, (randn(2, 1, 14, 14),), False),
    ]


class _Seq(nn.Sequential):
    """nn.Sequential under a name of its own (the cases below are built from library layers)."""


class SelfAttention(nn.Module):
    """nn.MultiheadAttention on one sequence (query = key = value)."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Upsample(nn.Module):
    """conv, then bilinear 2x upsampling (resize2d)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return F.interpolate(self.conv(x), scale_factor=2, mode="bilinear", align_corners=False)


class LSTMLayer(nn.Module):
    """nn.LSTM over a sequence, last step read out."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 6, batch_first=True)
        self.out = nn.Linear(6, 2)

    def forward(self, x):
        return self.out(self.lstm(x)[0][:, -1])


class GRUSteps(nn.Module):
    """nn.GRUCell over three steps."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(4, 6)

    def forward(self, x):
        h = torch.zeros(x.shape[1], 6)
        for t in range(3):
            h = self.cell(x[t], h)
        return h


class CrossEntropyLoss(nn.Module):
    """A linear classifier's cross-entropy loss against fixed labels (a scalar output)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.register_buffer("labels", torch.tensor([0, 3, 1]))

    def forward(self, x):
        return F.cross_entropy(self.fc(x), self.labels)


class RelativePositionBias(nn.Module):
    """Attention scores plus a learned bias per clamped relative distance (T5/ALiBi-style buckets):
    `clamp(min=0)` of int64 positions exports as R.clip with an infinite upper bound."""

    def __init__(self, dim=8, max_distance=3):
        super().__init__()
        self.qk = nn.Linear(dim, 2 * dim)
        self.bias = nn.Embedding(max_distance + 1, 1)
        self.max_distance = max_distance

    def forward(self, x):
        q, k = self.qk(x).chunk(2, -1)
        pos = torch.arange(x.shape[1])
        distance = (pos[:, None] - pos[None, :]).clamp(min=0).clamp(max=self.max_distance)
        scores = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]) + self.bias(distance)[..., 0]
        return scores.softmax(-1) @ x


class SoftTargetLoss(nn.Module):
    """Cross-entropy against label-smoothed one-hot targets built with F.one_hot (TVM's frontend guards
    the class values with two R.assert_op checks, so the function is impure)."""

    def __init__(self, classes=4, smoothing=0.1):
        super().__init__()
        self.fc = nn.Linear(6, classes)
        self.classes = classes
        self.smoothing = smoothing
        self.register_buffer("labels", torch.tensor([0, 3, 1]))

    def forward(self, x):
        target = F.one_hot(self.labels, self.classes).float() * (1 - self.smoothing) + self.smoothing / self.classes
        return -(target * F.log_softmax(self.fc(x), -1)).sum(-1).mean()


class ScoreHead(nn.Module):
    """A one-logit head read out with x.squeeze() (exported listing every axis, the batch's too)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        return torch.sigmoid(self.fc(x)).squeeze() * x.mean(-1)


class PairScores(nn.Module):
    """Matching scores of paired embeddings read off the similarity matrix's diagonal (and its trace):
    torch.diagonal and torch.trace export as einsum "ii->i" and "ii"."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(5, 4)
        self.b = nn.Linear(5, 4)

    def forward(self, x):
        sim = self.a(x) @ self.b(x).T
        return torch.diagonal(sim) - 0.1 * torch.trace(sim)


class ChunkedHead(nn.Module):
    """Features processed in chunks of a fixed size: a split size at least the width gives one chunk,
    which TVM types as the tensor itself (R.split with no split points)."""

    def __init__(self, chunk=8):
        super().__init__()
        self.fc = nn.Linear(5, 6)
        self.chunk = chunk

    def forward(self, x):
        return torch.cat([torch.tanh(part) for part in self.fc(x).split(self.chunk, -1)], -1)


def more_cases():
    """Further library layers: (name, module factory, example inputs), all in eval mode."""
    g = torch.Generator().manual_seed(5)

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    return [
        ("instance_norm", lambda: _Seq(nn.Conv2d(3, 4, 3), nn.InstanceNorm2d(4, affine=True), nn.Tanh()), (randn(2, 3, 6, 6),)),
        ("conv_transpose_pixel_shuffle", lambda: _Seq(
            nn.ConvTranspose2d(3, 8, 3, stride=2, padding=1, output_padding=1), nn.PixelShuffle(2), nn.AvgPool2d(2)),
            (randn(2, 3, 4, 4),)),
        ("conv3d", lambda: _Seq(nn.Conv3d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2), nn.Flatten(), nn.Linear(24, 4)),
         (randn(2, 2, 4, 4, 4),)),
        ("multihead_attention", SelfAttention, (randn(2, 5, 8),)),
        ("transformer_encoder_layer", lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
         (randn(2, 5, 8),)),
        ("upsample_bilinear", Upsample, (randn(2, 3, 4, 4),)),
        ("lstm_layer", LSTMLayer, (randn(2, 3, 4),)),
        ("gru_cell", GRUSteps, (randn(3, 2, 4),)),
        ("cross_entropy", CrossEntropyLoss, (randn(3, 6),)),
        ("batch_norm1d_prelu", lambda: _Seq(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.PReLU(), nn.Linear(8, 2), nn.LogSigmoid()),
         (randn(4, 6),)),
        ("conv_transpose1d", lambda: _Seq(nn.ConvTranspose1d(3, 4, 3, stride=2), nn.AvgPool1d(2), nn.SiLU()), (randn(2, 3, 8),)),
        ("relative_position_bias", RelativePositionBias, (randn(2, 5, 8),)),
        ("one_hot_soft_targets", SoftTargetLoss, (randn(3, 6),)),
        ("squeeze_all_head", ScoreHead, (randn(3, 6),)),
        ("diagonal_trace", PairScores, (randn(3, 5),)),
        ("split_one_chunk", ChunkedHead, (randn(3, 5),)),
    ]
