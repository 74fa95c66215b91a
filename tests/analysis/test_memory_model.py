"""peak_memory equals the executor's measured peak: corpus, adjoints, op cases, MLPs, random modules."""

from __future__ import annotations

from pathlib import Path

import models as MODELS  # benchmarks/models.py (benchmarks/ is on pytest's pythonpath)
import pytest
from analysis.helpers import adjoint, is_static, measured_peaks

import retrograd
from retrograd.analysis import memory_timeline, peak_memory
from retrograd.errors import UnsupportedError

TESTS = Path(__file__).resolve().parents[1]
CORPUS = sorted((TESTS / "corpus").glob("c*.py"))


def check(mod, name: str, given=()) -> int:
    """peak_memory(mod, name) is the largest measured peak over the data-dependent branches."""
    predicted = peak_memory(mod, name)
    measured = measured_peaks(mod, name, given=given)
    assert predicted == max(measured), f"{name}: predicted {predicted}, measured {measured}"
    return predicted


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_functions(path):
    mod = retrograd.parse_file(path)
    static = is_static(mod)
    for name, _ in mod.items():
        if static:
            check(mod, name)
        else:
            with pytest.raises(UnsupportedError, match="static shapes"):
                peak_memory(mod, name)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_adjoints(path):
    mod = retrograd.parse_file(path)
    if not is_static(mod):
        pytest.skip("symbolic shapes")
    for name, _ in list(mod.items()):
        adj = adjoint(mod, name)
        if adj is not None:
            check(adj, f"{name}_adjoint")


from ops.cases_core import CASES as CORE_CASES  # noqa: E402
from ops.cases_nn import CASES as NN_CASES  # noqa: E402

OP_CASES = [c for c in CORE_CASES + NN_CASES if c.is_static]


@pytest.mark.parametrize("case", OP_CASES, ids=[c.id for c in OP_CASES])
def test_op_cases_and_their_adjoints(case):
    mod = case.build()
    inputs = case.make_inputs()
    check(mod, "main", inputs)
    adj = adjoint(mod, "main")
    if adj is not None:
        check(adj, "main_adjoint", inputs)


def test_corpus_and_op_cases_exercise_adjoints():
    # The adjoint checks above must not be vacuous.
    assert sum(adjoint(c.build(), "main") is not None for c in OP_CASES) >= 100


@pytest.mark.parametrize("layers", [1, 3, 8])
@pytest.mark.parametrize("transposed", [False, True])
def test_mlps_and_their_adjoints(layers, transposed):
    text = MODELS.mlp_text(layers, width=64, batch=32, transposed_weights=transposed, scalar_loss=True)
    mod = retrograd.parse(text)
    check(mod, "main")
    adj = adjoint(mod, "main")
    assert adj is not None
    peak = check(adj, "main_adjoint")
    timeline = memory_timeline(adj, "main_adjoint")
    assert timeline.peak == peak == max(timeline.during)
    assert timeline.during[timeline.peak_index] == peak


@pytest.mark.parametrize("make", ["forward_module", "step_module", "adjoint_module"])
def test_bench_step_modules(make):
    # The step benchmark's forward, hand-written step and Gradient adjoint (64x256 MLP, int64 labels).
    import bench_step as bench

    mod = getattr(bench, make)()
    for name, _ in mod.items():
        check(mod, name)
