"""Bad scripts: each raises the right DiagnosticError kind, located at line:col, with a caret and a clear message."""

from __future__ import annotations

import pytest
from parser.error_cases import CASES, body

from retrograd.errors import DiagnosticError
from retrograd.parser import parse


@pytest.mark.parametrize(("source", "kind", "line", "col", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error(source, kind, line, col, fragment):
    with pytest.raises(DiagnosticError) as info:
        parse(source, source_name="bad.py")
    err = info.value
    assert type(err) is kind, f"{type(err).__name__}: {err}"
    assert err.span is not None
    assert (err.span.line, err.span.col) == (line, col), str(err)
    assert fragment in err.message, str(err)
    text = str(err)
    head, quoted, caret = text.splitlines()[:3]
    assert head.startswith(f"bad.py:{line}:{col}: {kind.kind}: ")
    # The message quotes the offending line and puts a caret under the offending token.
    assert quoted.strip() == source.splitlines()[line - 1].strip()
    assert caret.index("^") - 2 == col - 1
    assert "Traceback" not in text and "lark" not in text


def test_enough_cases():
    assert len(CASES) >= 30


def test_errors_are_not_chained():
    """`raise ... from None`: no library exception hides behind a diagnostic."""
    for source in (body("a = R.add(x,", "return a"), body("a = R.add(x, y)", "return a"), body("$")):
        with pytest.raises(DiagnosticError) as info:
            parse(source)
        assert info.value.__cause__ is None
        assert info.value.__suppress_context__ or info.value.__context__ is None


def test_parse_rejects_non_text():
    with pytest.raises(TypeError):
        parse(b"@R.function")
