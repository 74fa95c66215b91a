"""tools/fuzz.py at a fixed seed: no raw exception, hang, round-trip mismatch or parser/verifier
disagreement, and no payload runs (the 100,000-input run is by hand: see the tool's docstring)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_fuzz():
    spec = importlib.util.spec_from_file_location("retrograd_fuzz", ROOT / "tools" / "fuzz.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fuzz():
    return load_fuzz()


def test_fuzzer_finds_nothing_at_a_fixed_seed(fuzz):
    result = fuzz.run(3000, seed=0, timeout=10.0, in_process=True)
    counts = result["counts"]
    bad = {k: counts[k] for k in ("other", "hang", "mismatch", "disagree", "unlocated")}
    assert bad == dict.fromkeys(bad, 0), result["findings"][:3]
    assert not counts["payload_executed"]
    # The mutations keep a share of inputs valid, so printing and the passes are exercised too.
    assert counts["accepted"] > 150 and counts["located"] > 1500


def test_every_mutation_kind_runs_and_changes_text(fuzz):
    corpus = fuzz.load_corpus()
    m = fuzz.Mutator(corpus, seed=1)
    for kind in m.kinds:
        changed = sum(kind(text) != text for text in corpus[:20])
        assert changed >= 10, kind.__name__


def test_the_checker_classifies_known_outcomes(fuzz):
    ok = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n'
    assert fuzz.check(ok)[0] == "accepted"
    assert fuzz.check(ok.replace("return x", "return y"))[0] == "located"
    assert fuzz.check_in_process("x = (" + "\n" * 10, 5.0)[0] == "located"


def _spin(seconds):
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return "accepted", ""


def test_a_slow_input_is_reported_as_a_hang(fuzz, monkeypatch):
    import time

    monkeypatch.setattr(fuzz, "check", lambda text: _spin(5))
    t0 = time.perf_counter()
    assert fuzz.check_in_process("x", 0.2)[0] == "hang"
    assert time.perf_counter() - t0 < 3


def test_waiting_is_not_a_hang(fuzz, monkeypatch):
    # A hang is CPU time spent: an input that only waits (as on a loaded machine) is not one.
    import time

    monkeypatch.setattr(fuzz, "check", lambda text: time.sleep(0.6) or ("accepted", ""))
    assert fuzz.check_in_process("x", 0.2) == ("accepted", "")


def test_deep_if_nests_parse_or_fail_located(fuzz):
    """300 nested Ifs on a bool constant are accepted (printed, parsed back, run); past the lexer's 2000
    indentation levels the nest is a located error."""
    m = fuzz.Mutator(fuzz.load_corpus(), seed=2)
    ok = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n'
    for forced_random, depth, want in ((0.5, 300, "accepted"), (0.01, 2001, "located")):
        m.rng.random = lambda v=forced_random: v
        m.rng.choice = lambda seq, d=depth: d if isinstance(seq, list) and 300 in seq else seq[0]
        text = m.deep_if(ok)
        assert text.count(" if zz_c:") + text.count("\n    if zz_c:") >= depth
        assert fuzz.check_in_process(text, 30.0)[0] == want


def test_a_located_error_must_name_its_binding_and_not_move_with_a_byte_order_mark(fuzz):
    from retrograd.errors import Span, TypeInferenceError

    text = '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.add(x, x)\n    return y\n'
    bare = TypeInferenceError("bad", Span("fuzz.py", 3, 9, 3, 10, text))
    assert "binding of 'y' does not name it" in fuzz._location_problem(text, bare, str(bare))
    named = TypeInferenceError("bad", Span("fuzz.py", 3, 9, 3, 10, text), notes=["in the binding of 'y'"])
    assert fuzz._location_problem(text, named, str(named)) == ""
    # The same text without its mark fails at 1:2; an error reported at 1:1 with the mark moved.
    marked = '\ufeff@R.functio\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n'
    moved = TypeInferenceError("bad", Span("fuzz.py", 1, 1, 1, 2, marked))
    assert "byte-order mark moved the error from 1:2 to 1:1" in fuzz._location_problem(marked, moved, str(moved))
    assert fuzz.check(marked)[0] == "located"

    # A continuation line of a signature is no binding, however its `=` signs fall.
    sig = '@R.function\ndef main(x: R.Tensor((2,), "float32"),\n         o: R.Object) -> R.Tensor((), dtype="float32"):\n    return x\n'
    cont = TypeInferenceError("bad", Span("fuzz.py", 3, 21, 3, 30, sig))
    assert fuzz._location_problem(sig, cont, str(cont)) == ""
    # A long name is shortened in the rendering: the note holds it whole.
    long = "a" * 5000
    text = f'@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    {long} = R.add(x, x)\n    return x\n'
    err = TypeInferenceError("bad", Span("fuzz.py", 3, 9, 3, 10, text), notes=[f"in the binding of '{long}'"])
    assert f"'{long}'" not in str(err) and fuzz._location_problem(text, err, str(err)) == ""


def test_the_new_mutations_reach_their_classes(fuzz):
    """Empty shapes through every pass, TVM's scalar spellings and huge window attributes come out
    accepted or located, never as findings, and reach the run (some accepted)."""
    m = fuzz.Mutator(fuzz.load_corpus(), seed=4)
    outcomes = {}
    for kind in (m.zero_dim, m.window_op, m.tvm_scalar, m.return_annotation):
        seen = [fuzz.check_in_process(kind(m.rng.choice(m.corpus[:12])), 20.0)[0] for _ in range(12)]
        outcomes[kind.__name__] = seen
        assert set(seen) <= {"accepted", "located"}, (kind.__name__, seen)
    assert sum(o.count("accepted") for o in outcomes.values()) >= 12, outcomes
