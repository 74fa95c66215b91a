"""Mangled scripts never escape as raw exceptions: parse succeeds or raises a located DiagnosticError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from parser.helpers import mangled

from retrograd.errors import DiagnosticError
from retrograd.parser import parse


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_mangled_scripts_fail_cleanly(text):
    try:
        parse(text, source_name="mangled.py")
    except DiagnosticError as err:
        assert err.span is not None, str(err)
        assert err.span.source_name == "mangled.py"
        rendered = str(err)
        assert rendered.startswith(f"mangled.py:{err.span.line}:{err.span.col}: ")
        assert "lark" not in rendered and "Traceback" not in rendered
