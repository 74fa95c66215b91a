"""simulate() against a brute-force simulator written here, and its validity messages."""

from __future__ import annotations

import random

import pytest
from passes.checkpoint.helpers import chain_problem, naive_peak, random_problem, random_schedule

from retrograd.passes.checkpoint import InfeasibleBudget, Problem, Schedule, simulate
from retrograd.passes.checkpoint.simulate import events


@pytest.mark.parametrize("seed", range(120))
def test_simulate_matches_naive(seed):
    rng = random.Random(seed)
    p = random_problem(rng, rng.randint(2, 16), extras=seed % 2 == 0)
    for _ in range(3):
        s = random_schedule(rng, p, density=rng.choice([0.0, 0.2, 0.5]))
        sim = simulate(p, s)
        assert sim.valid, sim.error
        peak, extra = naive_peak(p, s)
        assert sim.peak_bytes == peak
        assert sim.extra_cost == pytest.approx(extra)
        assert sim.recomputed_count == s.count


def test_store_all_by_hand():
    # a(4) -> b(8) -> c(4); d reads a and c. Stage 1: a, b live; stage 2: a, b, c; stage 3: a, c, d.
    p = Problem(sizes=[4, 8, 4, 2], costs=[1] * 4, deps=[(), (0,), (1,), (0, 2)], recomputable=[True] * 4,
                outputs=(3,), pinned_bytes=100)
    assert simulate(p).peak_bytes == 100 + 16
    # recomputing a before stage 3 frees it after stage 1: stage 2 holds b, c; stage 3 holds a', c, d
    sim = simulate(p, Schedule(((), (), (), (0,))))
    assert (sim.peak_bytes, sim.extra_cost, sim.recomputed_count) == (100 + 12, 1.0, 1)


def test_alias_counts_root_once_and_inplace_reuses():
    # v is a view of a: a's buffer stays while v lives; w overwrites its dying input in place.
    p = Problem(sizes=[8, 0, 8, 8], costs=[1] * 4, deps=[(), (0,), (1,), (2,)], recomputable=[True] * 4,
                alias_of=[None, 0, None, None], inplace=[(), (), (0,), (0,)], outputs=(3,))
    # stage 2 writes over the dying view, whose buffer nothing else holds (the memory model's rule): 8
    assert simulate(p).peak_bytes == 8
    # ... unless a still holds it (a output): 8 (a) + 8 (new)
    p2 = Problem(sizes=[8, 0, 8, 8], costs=[1] * 4, deps=[(), (0,), (1,), (2,)], recomputable=[True] * 4,
                 alias_of=[None, 0, None, None], inplace=[(), (), (0,), (0,)], outputs=(0, 3))
    assert simulate(p2).peak_bytes == 16
    q = Problem(sizes=[8, 8, 8], costs=[1] * 3, deps=[(), (0,), (1,)], recomputable=[True] * 3,
                inplace=[(), (0,), (0,)], outputs=(2,))
    assert simulate(q).peak_bytes == 8


def test_chain_store_all_peak():
    p = chain_problem(10, size=8, pinned=16)
    # store-all keeps y1..y9 and needs one gradient while g10 is allocated: 9 + 1 values
    assert simulate(p).peak_bytes == 16 + 8 * 10


@pytest.mark.parametrize(
    "rec, message",
    [
        (((), (2,)), "not computed yet"),
        (((), (), (), (1, 0)), "out of order"),
        (((), (), (0, 0)), "twice"),
        (((), (), (), (), ()), "stages"),
    ],
)
def test_invalid_schedules(rec, message):
    p = Problem(sizes=[4] * 4, costs=[1] * 4, deps=[(), (0,), (1,), (2,)], recomputable=[True] * 4)
    sim = simulate(p, Schedule(rec))
    assert not sim.valid and message in sim.error
    with pytest.raises(ValueError, match=message):
        sim.check()


def test_not_recomputable_and_bad_problem():
    p = Problem(sizes=[4, 4, 4], costs=[1] * 3, deps=[(), (0,), (1,)], recomputable=[False, True, True])
    assert "not recomputable" in simulate(p, Schedule(((), (), (0,)))).error
    with pytest.raises(ValueError, match="not an earlier node"):
        Problem(sizes=[4, 4], costs=[1, 1], deps=[(1,), ()], recomputable=[True, True])
    with pytest.raises(ValueError, match="alias"):
        Problem(sizes=[4, 0], costs=[1, 1], deps=[(), ()], recomputable=[True, True], alias_of=[None, 0])


def test_infeasible_budget_message():
    err = InfeasibleBudget(100, 240)
    assert err.least_feasible == 240 and "240 bytes" in str(err) and "100 bytes" in str(err)


def test_a_tuple_field_outlives_the_tuple_alone():
    """batch_norm's (y, mean, var): once the tuple dies, a view of y keeps y's bytes only (the executor
    holds each field on its own), and the field is written over in place when nothing else holds it."""
    p = Problem(sizes=[32, 0, 8, 16], costs=[1] * 4, deps=[(), (0,), (1,), (2,)], recomputable=[True] * 4,
                alias_of=[None, 0, None, None], fields=[(16, 8, 8), (), (), ()], field=[None, 0, None, None],
                inplace=[(), (), (), ()], outputs=(3,))
    # the tuple: 32; it dies at the item, which keeps field 0 (16): node 2 peaks at 16 + 8 (not 32 + 8)
    sim = simulate(p, stage_peaks=True)
    assert sim.peak_bytes == 32 == naive_peak(p, Schedule())[0] and sim.stage_peaks[2] == 24
    q = Problem(sizes=[32, 0, 16, 16], costs=[1] * 4, deps=[(), (0,), (1,), (2,)], recomputable=[True] * 4,
                alias_of=[None, 0, None, None], fields=[(16, 8, 8), (), (), ()], field=[None, 0, None, None],
                inplace=[(), (), (0,), (0,)], outputs=(3,))
    # node 2 writes over field 0 (16 live, not 32), node 3 over node 2
    sim = simulate(q, stage_peaks=True)
    assert sim.peak_bytes == 32 == naive_peak(q, Schedule())[0] and sim.stage_peaks[2:] == (16, 16)
    with pytest.raises(ValueError, match="fields"):
        Problem(sizes=[30], costs=[1], deps=[()], recomputable=[True], fields=[(16, 8, 8)])


@pytest.mark.parametrize("seed", range(60))
def test_resumed_runs_match_fresh_ones(seed, monkeypatch):
    """events(base=, marks=) and simulate(marks=) resume from the last schedule's saved states (a mark every
    stage here): on a sequence of schedules each changed from a random stage on, and on unrelated ones, the
    events and the simulation are the naive simulator's and a fresh run's."""
    import sys

    monkeypatch.setattr(sys.modules["retrograd.passes.checkpoint.simulate"], "MARK", 1)
    rng = random.Random(seed)
    p = random_problem(rng, rng.randint(2, 24), extras=seed % 2 == 0)
    last, rec = None, list(random_schedule(rng, p).recompute)
    for _ in range(8):
        if rng.random() < 0.2:
            rec = list(random_schedule(rng, p, density=rng.choice([0.0, 0.3])).recompute)
        else:  # keep a prefix: change the stages from t on
            t = rng.randrange(p.n)
            rec[t:] = random_schedule(rng, p, density=rng.choice([0.1, 0.4])).recompute[t:]
        s, marks = Schedule(tuple(rec)), []
        ev = events(p, s, False, last, marks)
        assert ev == events(p, s, False)
        last = (s, ev, marks)
        sim = simulate(p, s, check=False, ev=ev, marks=marks)
        fresh = simulate(p, s)
        assert (sim.peak_bytes, sim.extra_cost, sim.peak_stage) == (fresh.peak_bytes, fresh.extra_cost, fresh.peak_stage)
        assert sim.peak_bytes == naive_peak(p, s)[0]
