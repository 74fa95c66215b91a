"""Shared by the checkpoint pass tests: the benchmark's model scripts, adjoints, inputs, measurement."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

import retrograd
from retrograd.passes import Gradient

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import models  # noqa: E402

from retrograd.passes.checkpoint.problem import Schedule  # noqa: E402

SMALL_MODELS = {
    "sin_chain": lambda: models.chain_text(6, width=8, batch=4),
    "matmul_relu_chain": lambda: models.matmul_relu_chain_text(5, width=8, batch=4),
    "mlp": lambda: models.mlp_text(3, width=8, batch=4, scalar_loss=True),
    "transformer": lambda: models.transformer_text(2, seq=8, d=8),
    "resnet": lambda: models.resnet_text(stages=2, blocks=1, channels=4, size=8, batch=1),
}


# Planned by the tests: adjoints of more than 48 bindings, where the planner uses its chain and greedy
# solvers (its exact MILP, for smaller problems, can take minutes on a chain; see the planner's tests).
PLAN_MODELS = {
    "sin_chain": lambda: models.chain_text(16, width=8, batch=4),
    "matmul_relu_chain": lambda: models.matmul_relu_chain_text(8, width=8, batch=4),
    "mlp": lambda: models.mlp_text(6, width=8, batch=4, scalar_loss=True),
    "transformer": lambda: models.transformer_text(2, seq=8, d=8),
    "resnet": lambda: models.resnet_text(stages=2, blocks=2, channels=4, size=8, batch=1),
}


def adjoint_module(text: str):
    """The module with main and main_adjoint (Gradient with its default clean-up)."""
    return Gradient("main")(retrograd.parse(text))


def inputs_for(func, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal([int(d) for d in p.struct_info.shape]) * 0.5).astype(p.struct_info.dtype)
        for p in func.params
    ]


def run(mod, name: str, args):
    """(result, measured peak live bytes) of one call."""
    ex = retrograd.build(mod)
    out = ex[name](*args)
    return out, ex.stats.peak_live_bytes


def flat(value) -> list:
    if isinstance(value, tuple):
        return [x for v in value for x in flat(v)]
    return [np.asarray(value)]


def bitwise_equal(a, b) -> bool:
    fa, fb = flat(a), flat(b)
    return len(fa) == len(fb) and all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(fa, fb))


def random_schedule(ex, rng: random.Random, p_stage: float = 0.3, p_node: float = 0.15) -> Schedule:
    """Any sorted subset of earlier recomputable nodes is a valid recomputation group."""
    problem = ex.problem
    rec = []
    for t in range(problem.n):
        if rng.random() >= p_stage:
            rec.append(())
            continue
        cand = [v for v in range(t) if problem.recomputable[v] and v not in ex.transparent]
        rec.append(tuple(v for v in cand if rng.random() < p_node))
    return Schedule(tuple(rec))


def corpus_functions(path) -> list:
    """(module, name) of each function of the corpus file at `path` and of its adjoint where Gradient
    applies; the test is skipped when the file is not a module the executor runs."""
    import pytest

    from retrograd.errors import DiagnosticError
    from retrograd.ir.expr import Function
    from retrograd.parser.parse import parse_path

    try:
        mod = parse_path(path)
    except DiagnosticError:
        pytest.skip("not a module the executor runs")
    out = [(mod, name) for name, f in mod.items() if isinstance(f, Function)]
    for name, f in list(mod.items()):
        if isinstance(f, Function) and f.params:
            try:
                adj = Gradient(name)(mod)
            except DiagnosticError:
                continue
            out.append((adj, f"{name}_adjoint"))
    return out
