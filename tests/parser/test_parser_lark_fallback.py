"""Without lark's private LALR tables the parser falls back to lark's own loop: same modules, same errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from parser.error_cases import CASES

from retrograd.errors import DiagnosticError
from retrograd.ir.structural import assert_structural_equal
from retrograd.parser import parse, syntax

CORPUS = sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))


def _outcome(text: str, name: str):
    """The module, or the error's kind, message, rendering and span."""
    try:
        return parse(text, source_name=name)
    except DiagnosticError as err:
        s = err.span
        return (type(err).__name__, err.message, str(err), s and (s.line, s.col, s.end_line, s.end_col))


def _broken_variants(text: str):
    """Syntax errors at spread-out places: truncations, a stray token, an unclosed bracket."""
    n = len(text)
    for k in range(1, 9):
        cut = n * k // 9
        yield text[:cut]
        yield text[:cut] + " ) " + text[cut:]
        yield text[:cut] + "(" + text[cut:]
        yield text[:cut] + "\n    x = \n" + text[cut:]


def _texts():
    for path in CORPUS:
        text = path.read_text()
        yield path.stem, text
        for i, variant in enumerate(_broken_variants(text)):
            yield f"{path.stem}#{i}", variant
    for case in CASES:
        yield case[0], case[1]
    for i, edge in enumerate(["", "   \n", "# only a comment\n", "@R.function\n", "x = (\n"]):
        yield f"edge{i}", edge


def _lalr_only(text, depth=None):
    raise syntax.Fallback


def _without_private_tables(monkeypatch):
    # The fast path off too: lark's own loop then reads every text, valid ones included.
    monkeypatch.setattr(syntax, "parse_fast", _lalr_only)
    monkeypatch.delattr(syntax._lark().parser.parser, "_parse_table")
    monkeypatch.setattr(syntax, "_DRIVER", None)
    driver = syntax._driver()
    assert isinstance(driver, syntax._LarkLoop)
    return driver


def test_fast_driver_is_used_with_the_pinned_lark():
    assert isinstance(syntax._driver(), syntax._Driver)


def test_fallback_gives_equal_modules_and_identical_errors(monkeypatch):
    texts = list(_texts())
    expected = [_outcome(text, name) for name, text in texts]
    n_errors = sum(isinstance(e, tuple) for e in expected)
    assert n_errors > len(CORPUS) * 20  # the variants do exercise the error path
    _without_private_tables(monkeypatch)
    for (name, text), want in zip(texts, expected):
        got = _outcome(text, name)
        if isinstance(want, tuple):
            assert got == want, name
        else:
            assert not isinstance(got, tuple), (name, got)
            assert_structural_equal(want, got)


@pytest.mark.parametrize("attr", ["callbacks", "parser"])
def test_fallback_when_other_private_parts_are_missing(monkeypatch, attr):
    target = syntax._lark().parser.parser
    if attr == "callbacks":
        target = target.parser
    monkeypatch.delattr(target, attr)
    monkeypatch.setattr(syntax, "_DRIVER", None)
    assert isinstance(syntax._driver(), syntax._LarkLoop)


def test_fallback_reports_token_errors_raised_while_building_nodes(monkeypatch):
    # Errors found while a token becomes a node (a huge integer, a malformed escape) are the same too.
    texts = [
        '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = ' + "9" * 200 + "\n    return y\n",
        '@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    y = R.str("ab\\x4")\n    return y\n',
    ]
    expected = [_outcome(text, "t.py") for text in texts]
    assert all(isinstance(e, tuple) for e in expected)
    _without_private_tables(monkeypatch)
    assert [_outcome(text, "t.py") for text in texts] == expected
