"""Properties over mangled scripts: whatever the parser accepts verifies and round-trips through print
and parse; whatever it refuses gets a located error."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from parser.helpers import mangled

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.ir import well_formed
from retrograd.parser import parse


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_accepted_modules_verify_and_roundtrip(text):
    try:
        mod = parse(text, source_name="p.py")
    except DiagnosticError as err:
        assert err.span is not None and err.span.source_name == "p.py"
        return
    assert well_formed(mod) == []
    again = parse(mod.script(), source_name="printed.py")
    assert retrograd.structural_equal(again, mod)
    assert again.script() == mod.script()
