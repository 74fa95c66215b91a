"""Mangled scripts never escape as raw exceptions: parse succeeds or raises a located DiagnosticError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrograd.errors import DiagnosticError
from retrograd.parser import parse

TEXTS = [p.read_text() for p in sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))]
PIECES = list("()[]{},:=.+-*/%\"'#\\\n \t0123456789xyzRT_@") + [
    "R.", "def ", "if c:", "else:", "with ", "return ", "None", "True", "R.const(", "R.Tensor(", "\n    ",
    "metadata", "cls.", "R.output(", "T.int64()", "R.add(x, ", '"float32"', "@R.function\n",
]


@st.composite
def mangled(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["delete", "insert", "replace"]))
        if kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 6)) :]
        else:
            piece = draw(st.sampled_from(PIECES))
            cut = draw(st.integers(1, 4)) if kind == "replace" else 0
            text = text[:i] + piece + text[i + cut :]
    return text


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
