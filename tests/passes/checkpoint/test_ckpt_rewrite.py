"""The rewrite of a schedule into a function: the executor measures what the schedule's simulation says,
results stay bitwise identical, markers fence the recomputations, clean-up and printing keep them."""

from __future__ import annotations

import random

import pytest
from passes.checkpoint.helpers import (
    SMALL_MODELS,
    adjoint_module,
    bitwise_equal,
    inputs_for,
    models,
    random_extracted_schedule,
    run,
)

import retrograd
from retrograd.analysis import peak_memory
from retrograd.ir import well_formed
from retrograd.ir.expr import Call
from retrograd.passes import parse_pipeline
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.problem import Schedule
from retrograd.passes.checkpoint.rewrite import rewrite
from retrograd.passes.checkpoint.simulate import simulate


def _bindings(func):
    return [b for blk in func.body.blocks for b in blk.bindings]


@pytest.mark.parametrize("model", sorted(SMALL_MODELS))
def test_random_schedules_measure_as_simulated_and_stay_bitwise_equal(model):
    mod = adjoint_module(SMALL_MODELS[model]())
    before = mod.script()
    func = mod["main_adjoint"]
    ex = extract(func)
    args = inputs_for(func)
    ref, ref_peak = run(mod, "main_adjoint", args)
    assert simulate(ex.problem).peak_bytes == ref_peak
    rng = random.Random(model)
    for _ in range(6):
        schedule = random_extracted_schedule(ex, rng)
        new = mod.with_function("main_adjoint", rewrite(ex, schedule.recompute))
        assert well_formed(new) == []
        out, peak = run(new, "main_adjoint", args)
        assert peak <= simulate(ex.problem, schedule).peak_bytes  # never under
        assert peak == peak_memory(new, "main_adjoint")  # the exact model the pass verifies plans with
        assert bitwise_equal(out, ref)
    assert mod.script() == before  # the input module is not mutated


def test_store_all_returns_the_function_itself():
    mod = adjoint_module(models.chain_text(4, width=4, batch=2))
    ex = extract(mod["main_adjoint"])
    assert rewrite(ex, Schedule().recompute) is mod["main_adjoint"]
    assert rewrite(ex, ((),) * ex.problem.n) is mod["main_adjoint"]


def _chain_schedule(ex, every: int) -> Schedule:
    """Checkpoint h0, h_every, h_2every, ...: before each backward use of another h_j, recompute it from
    the nearest checkpoint below (a hand-written plan, independent of the planner)."""
    names = ex.problem.names
    node = {names[i]: i for i in range(ex.problem.n)}
    rec = [()] * ex.problem.n
    for t in range(ex.problem.n):
        for d in ex.problem.deps[t]:
            name = names[d]
            if name.startswith("h") and name[1:].isdigit() and t > node["gv"]:
                j = int(name[1:])
                c = (j // every) * every
                if j != c:
                    rec[t] = tuple(node[f"h{k}"] for k in range(c + 1, j + 1))
    return Schedule(tuple(rec))


def test_chain_plan_names_markers_and_peak():
    layers, every = 12, 4
    mod = adjoint_module(models.chain_text(layers, width=16, batch=8))
    ex = extract(mod["main_adjoint"])
    schedule = _chain_schedule(ex, every)
    new_func = rewrite(ex, schedule.recompute)
    names = [b.var.name_hint for b in _bindings(new_func)]
    recomputed = [n for n in names if n.endswith("_cp")]
    # h_{c+1}..h_j recomputed before each backward use of h_j that is not a checkpoint (the backward
    # part reads h_0..h_{layers-2}: sin' = cos of the input).
    assert len(recomputed) == sum(j % every for j in range(layers - 1))
    assert all(n[:-3] in {f"h{k}" for k in range(layers)} for n in recomputed)
    ops = [b.value.op.name for b in _bindings(new_func) if isinstance(b.value, Call) and hasattr(b.value.op, "name")]
    assert "relax.grad.start_checkpoint" in ops and "relax.grad.end_checkpoint" in ops
    args = inputs_for(mod["main_adjoint"])
    ref, full = run(mod, "main_adjoint", args)
    out, peak = run(mod.with_function("main_adjoint", new_func), "main_adjoint", args)
    act = 16 * 8 * 4
    assert bitwise_equal(out, ref)
    assert peak <= simulate(ex.problem, schedule).peak_bytes  # never under
    assert peak <= full - 4 * act  # at least 4 activations fewer live at once


@pytest.mark.parametrize("pipeline", ["cse", "simplify", "dce", "fold-constant", "cse, simplify, dce, fold-constant"])
def test_cleanup_and_round_trip_keep_the_recomputation(pipeline):
    mod = adjoint_module(models.chain_text(12, width=16, batch=8))
    ex = extract(mod["main_adjoint"])
    planned = mod.with_function("main_adjoint", rewrite(ex, _chain_schedule(ex, 4).recompute))
    args = inputs_for(mod["main_adjoint"])
    ref, peak = run(planned, "main_adjoint", args)
    cleaned = parse_pipeline(pipeline)(planned)
    out, peak2 = run(cleaned, "main_adjoint", args)
    assert peak2 == peak
    assert bitwise_equal(out, ref)
    count = sum(b.var.name_hint.endswith("_cp") for b in _bindings(planned["main_adjoint"]))
    assert sum(b.var.name_hint.endswith("_cp") for b in _bindings(cleaned["main_adjoint"])) == count
    reparsed = retrograd.parse(cleaned.script())
    assert retrograd.structural_equal(reparsed, cleaned)
    out3, peak3 = run(reparsed, "main_adjoint", args)
    assert peak3 == peak and bitwise_equal(out3, ref)


def test_several_blocks_and_dataflow_vars_read_by_later_blocks():
    text = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 4), dtype="float32")) -> R.Tensor((), dtype="float32"):
        with R.dataflow():
            a: R.Tensor((4, 4), dtype="float32") = R.sin(x)
            b: R.Tensor((4, 4), dtype="float32") = R.exp(a)
            c: R.Tensor((4, 4), dtype="float32") = R.tanh(b)
            R.output(c)
        d: R.Tensor((4, 4), dtype="float32") = R.multiply(c, c)
        with R.dataflow():
            e: R.Tensor((4, 4), dtype="float32") = R.sin(d)
            f: R.Tensor((4, 4), dtype="float32") = R.add(e, c)
            gv: R.Tensor((), dtype="float32") = R.sum(f, axis=None, keepdims=False)
            R.output(gv)
        return gv
'''
    mod = adjoint_module(text)
    func = mod["main_adjoint"]
    ex = extract(func)
    args = inputs_for(func)
    ref, _ = run(mod, "main_adjoint", args)
    rng = random.Random(3)
    for _ in range(10):
        schedule = random_extracted_schedule(ex, rng, p_stage=0.5, p_node=0.4)
        new = mod.with_function("main_adjoint", rewrite(ex, schedule.recompute))
        assert well_formed(new) == []
        out, peak = run(new, "main_adjoint", args)
        assert peak <= simulate(ex.problem, schedule).peak_bytes  # never under
        assert bitwise_equal(out, ref)
        assert well_formed(retrograd.parse(new.script())) == []
