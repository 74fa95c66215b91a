"""Memory-aware gradient rules: a store-all adjoint keeps about one activation per layer, as measured by the executor."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.passes import Gradient

B, D = 256, 32  # activations (B, D) are 8x the weights (D, D): the peak is made of activations
ACT = B * D * 4
WEIGHT = D * D * 4


# Activation -> (its NumPy definition, its derivative from the input): the rules read the output instead.
ACTIVATIONS = {
    "nn.relu": (lambda m: np.maximum(m, 0), lambda m: (m > 0).astype(m.dtype)),
    "tanh": (np.tanh, lambda m: 1 - np.tanh(m) ** 2),
    "sigmoid": (lambda m: 1 / (1 + np.exp(-m)), lambda m: np.exp(-m) / (1 + np.exp(-m)) ** 2),
}


def _chain(layers: int, act: str = "nn.relu") -> str:
    params = ", ".join(f'w{i}: R.Tensor(({D}, {D}), "float32")' for i in range(layers))
    body, prev = [], "x"
    for i in range(layers):
        body += [f"            m{i} = R.matmul({prev}, w{i})", f"            h{i} = R.{act}(m{i})"]
        prev = f"h{i}"
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({B}, {D}), "float32"), {params}) -> R.Tensor((), "float32"):
        with R.dataflow():
{chr(10).join(body)}
            gv = R.sum({prev})
            R.output(gv)
        return gv
'''


def _inputs(layers: int):
    rng = np.random.default_rng(layers)
    x = rng.standard_normal((B, D)).astype("float32")
    ws = [(rng.standard_normal((D, D)) / np.sqrt(D)).astype("float32") for _ in range(layers)]
    return x, ws


def _reference(x, ws, act: str):
    """Backpropagation written out in float64: (loss, dx, [dw...])."""
    fn, dfn = ACTIVATIONS[act]
    hs, ms, h = [x.astype(np.float64)], [], x.astype(np.float64)
    for w in ws:
        ms.append(h @ w.astype(np.float64))
        h = fn(ms[-1])
        hs.append(h)
    g = np.ones_like(h)
    dws = []
    for i in reversed(range(len(ws))):
        g = g * dfn(ms[i])
        dws.append(hs[i].T @ g)
        g = g @ ws[i].astype(np.float64).T
    return hs[-1].sum(), g, dws[::-1]


def _run_adjoint(layers: int, act: str = "nn.relu"):
    ex = retrograd.build(Gradient("main")(retrograd.parse(_chain(layers, act))))
    x, ws = _inputs(layers)
    loss, (dx, *dws) = ex["main_adjoint"](x, *ws)
    return ex.stats, (x, ws), (loss, dx, dws)


@pytest.mark.parametrize("act", list(ACTIVATIONS))
@pytest.mark.parametrize("layers", [8, 16])
def test_store_all_adjoint_of_an_activation_chain_keeps_one_activation_per_layer(layers, act):
    stats, (x, ws), (loss, dx, dws) = _run_adjoint(layers, act)
    ref_loss, ref_dx, ref_dws = _reference(x, ws, act)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-4)
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-3, atol=1e-3 * np.abs(ref_dx).max())
    for got, want in zip(dws, ref_dws):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    # The backward needs each layer's activation output (for the weight gradient and the activation's
    # derivative); the matmul result dies at the activation (relu and tanh overwrite it; two per layer
    # if the rule read the input). The weight gradients, results too, are allowed for on top.
    kept = stats.peak_intermediate_bytes / ACT
    assert kept <= layers + 2 + layers * WEIGHT / ACT, f"{kept:.2f} activations kept for {layers} layers"


def test_each_extra_layer_costs_one_activation():
    peaks = {n: _run_adjoint(n)[0].peak_intermediate_bytes for n in (8, 16)}
    per_layer = (peaks[16] - peaks[8]) / 8 / ACT
    # One activation, plus at most the layer's weight gradient should the peak come where they live.
    assert 0.95 <= per_layer <= 1.05 + WEIGHT / ACT, per_layer
