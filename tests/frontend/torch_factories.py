"""Factories `retrograd import --torch tests.frontend.torch_factories:NAME` calls (torch imported inside)."""

from __future__ import annotations

from optional import need


def small_cnn():
    torch = need("torch")

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 5),
    )


def tiny_lm():
    torch = need("torch")

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8, padding_idx=0)
            self.head = torch.nn.Linear(8, 20, bias=False)
            self.head.weight = self.emb.weight  # tied

        def forward(self, tokens):
            return torch.log_softmax(self.head(torch.tanh(self.emb(tokens))), dim=-1)

    torch.manual_seed(0)
    return LM()


def not_a_module():
    return 3


def mlp():
    torch = need("torch")

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
