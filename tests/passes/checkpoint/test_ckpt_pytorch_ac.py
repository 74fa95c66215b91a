"""PyTorch's test/functorch/test_ac.py::MemoryBudgetTest figures, on the same graphs written as Problems.

Mapping. PyTorch measures the activation memory: the bytes saved by the forward for the backward
(1 unit = a 512x512 float32 = 1 MiB), and costs are FlopCounterMode FLOPs normalised so that a
512-cube matmul is 1 (pointwise ops, sums and reshapes count 0). Here each graph is its adjoint:
forward nodes (sizes in units, costs in those FLOPs), then a boundary node W (the start of the
backward, the size of every forward value together, so that the peak is always reached there, where
exactly the values kept for the backward are live), then the backward nodes, of size 0 because
PyTorch's figure leaves gradients out. So activation memory = peak - pinned - W, and PyTorch's
budget fraction f gives the byte budget pinned + W + f * eager activation memory. Reshapes are folded
into their readers (views cost nothing either way).
"""

from __future__ import annotations

import random

import pytest

from retrograd.passes.checkpoint import Problem, simulate, solve

UNIT = 1 << 20


class Graph:
    def __init__(self):
        self.sizes, self.costs, self.deps, self.rec, self.kinds = [], [], [], [], []
        self.outputs = []

    def add(self, size, cost, deps=(), kind="elementwise", recomputable=True, output=False):
        self.sizes.append(int(size * UNIT))
        self.costs.append(float(cost))
        self.deps.append(tuple(deps))
        self.rec.append(recomputable)
        self.kinds.append(kind)
        if output:
            self.outputs.append(len(self.sizes) - 1)
        return len(self.sizes) - 1

    def boundary(self):
        """W: as big as all forward values together, so the peak is where the saved values are all live."""
        self.w = self.add(sum(self.sizes) / UNIT, 0, kind="other", recomputable=False)
        return self.w

    def grad(self, cost, deps, output=False):
        return self.add(0, cost, deps, kind="other", recomputable=False, output=output)

    def problem(self, pinned_units):
        return Problem(
            sizes=self.sizes, costs=self.costs, deps=self.deps, recomputable=self.rec, outputs=self.outputs,
            pinned_bytes=int(pinned_units * UNIT), kinds=self.kinds,
        )


def activation_memory(g: Graph, p: Problem, schedule) -> tuple[float, float]:
    sim = simulate(p, schedule).check()
    return (sim.peak_bytes - p.pinned_bytes - p.sizes[g.w]) / UNIT, sim.extra_cost


def plan(g: Graph, p: Problem, act_budget_units: float):
    budget = p.pinned_bytes + p.sizes[g.w] + int(act_budget_units * UNIT)
    return activation_memory(g, p, solve(p, budget))


def branches(pairs):
    """sum_i sum(cos(x_i @ w_i)), branch i's matmul output of `mem` units costing `flops`; backward reads it."""
    g = Graph()
    ms = [g.add(mem, flops, (), kind="matmul") for mem, flops in pairs]
    sums = [g.add(0, 0, (m,), kind="reduce") for m in ms]  # cos then sum, the cos output dies at once
    g.add(0, 0, sums, kind="elementwise", output=True)
    g.boundary()
    for m, (mem, flops) in reversed(list(zip(ms, pairs))):
        g.grad(2 * flops, (m,), output=True)  # cos' and the two matmuls of the backward
    return g


def test_matmul_even_chain():
    """x = cos(x); 5 times x = cos(x @ w): eager saves 10 (each mm output for cos', each cos output for mm')."""
    g = Graph()
    c = g.add(1, 0, ())  # cos(x), x a parameter
    mms, coss = [], [c]
    for _ in range(5):
        m = g.add(1, 1, (coss[-1],), kind="matmul")
        coss.append(g.add(1, 0, (m,)))
        mms.append(m)
    g.add(0, 0, (coss[-1],), kind="reduce", output=True)
    g.boundary()
    gc = g.grad(0, ())
    for i in range(4, -1, -1):
        gm = g.grad(0, (mms[i], gc))
        g.grad(1, (coss[i], gm), output=True)  # grad of w_i
        gc = g.grad(1, (gm,))  # grad of the matmul's input
    g.grad(0, (gc,), output=True)
    p = g.problem(pinned_units=6)
    eager_mem, _ = activation_memory(g, p, None)
    assert eager_mem == 10
    for budget in range(11):
        mem, extra = plan(g, p, budget)
        if budget <= 5:
            assert (mem, extra) == (budget, 5 - budget)
        else:
            # PyTorch: 5 for 6..9 (only cos recomputed), and 10 at 1.0, where it does not plan at all;
            # here ties go to the lower peak, so 1.0 also gets 5 (the same FLOPs).
            assert (mem, extra) == (5, 0)


UNEVEN = [
    ([11, 3, 4, 2], [18, 17, 16, 15, 14, 13, 11, 7, 6, 5]),
    ([3, 5, 11, 17, 14], [42, 30, 19, 8, 3]),
]


def _random_config():
    random.seed(0)
    arr = [random.randint(0, 50) for _ in range(10)]
    sums = []
    for i in range(10):
        random.shuffle(arr)
        sums.append(sum(arr[:i]))
    return arr, sums


@pytest.mark.parametrize("shapes, achievable", UNEVEN + [_random_config()])
def test_matmul_uneven_chain(shapes, achievable):
    """cos(x @ w_i) for w_i of [512, d_i*512]: saving branch i costs d_i units and saves d_i FLOPs: a knapsack."""
    g = branches([(d, d) for d in shapes])
    p = g.problem(pinned_units=1 + sum(shapes))
    assert activation_memory(g, p, None)[0] == sum(shapes)
    for target in achievable:
        mem, extra = plan(g, p, target)
        assert mem == target
        assert extra == sum(shapes) - target


def _pair(b_i, o):
    # x [b_i*512]^2, w [b_i*512, o*512]: the product is b_i*o units and costs b_i*b_i*o
    return (b_i * o, b_i * b_i * o)


def test_prioritize_cheaper_matmul():
    pairs = [_pair(1, 4), _pair(2, 2)]
    g = branches(pairs)
    p = g.problem(pinned_units=20)
    assert activation_memory(g, p, None)[0] == 8
    assert sum(p.costs[i] for i in range(p.n) if p.kinds[i] == "other") == 24  # eager backward FLOPs
    assert plan(g, p, 0.5 * 8) == (4, 4)  # x1 @ w1 recomputed


def test_prioritize_cheaper_matmul2():
    pairs = [_pair(4, 4), _pair(6, 2), _pair(2, 6)]
    g = branches(pairs)
    p = g.problem(pinned_units=100)
    assert activation_memory(g, p, None)[0] == 40
    assert sum(p.costs[i] for i in range(p.n) if p.kinds[i] == "other") == 320
    assert plan(g, p, 28) == (28, 2 * 2 * 6)  # the cheap third pair recomputed
    # saving pair 2 (12 units) beats pair 1 (16): pair 1's FLOPs are fewer than pair 2's
    assert plan(g, p, 16) == (12, 2 * 2 * 6 + 4 * 4 * 4)


@pytest.mark.parametrize(
    "S, D, expected",
    [(1, 1, "mm"), (1, 3, "attn"), (2, 2, "mm"), (2, 1, "mm"), (2, 5, "attn"), (4, 7, "mm"), (4, 9, "attn")],
)
def test_attention_vs_linear(S, D, expected):
    """x [S*512, D*512], sdpa(x, x, x) (2 S^2 D FLOPs), @ w [D*512]^2 (S D^2), cos, sum; eager saves 2 S D."""
    g = Graph()
    attn_flops, mm_flops = 2 * S * S * D, S * D * D
    a = g.add(S * D, attn_flops, (), kind="matmul")
    m = g.add(S * D, mm_flops, (a,), kind="matmul")
    g.add(0, 0, (m,), kind="reduce", output=True)
    g.boundary()
    gm = g.grad(0, (m,))
    g.grad(mm_flops, (a, gm), output=True)  # grad of w reads the attention output
    ga = g.grad(mm_flops, (gm,))
    g.grad(2 * attn_flops, (a, ga), output=True)  # sdpa's backward reads its output
    p = g.problem(pinned_units=S * D + D * D)
    assert activation_memory(g, p, None)[0] == 2 * S * D
    mem, extra = plan(g, p, 0.6 * 2 * S * D)
    assert mem == S * D
    assert extra == (attn_flops if expected == "attn" else mm_flops)
