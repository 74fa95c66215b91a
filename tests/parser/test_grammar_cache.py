"""The analysed grammar is cached as JSON in the user's cache dir: never unpickled, rebuilt when stale or bad."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from retrograd.parser import grammar_cache, syntax
from retrograd.parser.lexer import LexError

CORPUS = sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))


def _build():
    return grammar_cache.load_or_build(
        syntax.GRAMMAR.read_text(), syntax.ScriptLexer, syntax._Build(), parser="lalr", maybe_placeholders=True,
        start="start",
    )


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def no_pickle(*args, **kwargs):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "load", no_pickle)
    monkeypatch.setattr(pickle, "loads", no_pickle)
    return tmp_path / "retrograd"


def _syntax_of(lark_parser, text):
    try:
        return repr(syntax._Driver(lark_parser).parse(text))
    except syntax._Unexpected as err:
        return ("error", err.token.type, err.token.line, err.token.column, sorted(err.expected))
    except LexError as err:
        return ("error", err.message, err.line, err.col)


def _texts():
    for path in CORPUS:
        text = path.read_text()
        yield text
        yield text[: len(text) // 2]


def test_cached_parser_reads_like_a_fresh_one(cache, monkeypatch):
    fresh = _build()
    entries = list(cache.glob("grammar-*.json"))
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o077 == 0
    def no_build(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(grammar_cache.Lark, "__init__", no_build)  # it must load
    loaded = _build()
    assert loaded is not fresh
    for text in _texts():
        assert _syntax_of(loaded, text) == _syntax_of(fresh, text)
    assert [t.name for t in loaded.terminals] == [t.name for t in fresh.terminals]


@pytest.mark.parametrize("content", [b"", b"{not json", pickle.dumps({"key": 1}), b'{"key": "other"}', b"[1, 2]"])
def test_bad_or_stale_entries_are_rebuilt(cache, content):
    _build()
    (entry,) = cache.glob("grammar-*.json")
    entry.write_bytes(content)
    parser = _build()
    assert _syntax_of(parser, CORPUS[0].read_text())[0] != "error"
    assert entry.read_bytes() != content  # stored again


def test_unwritable_cache_dir_still_parses(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the directory should be
    parser = _build()
    assert _syntax_of(parser, CORPUS[0].read_text())[0] != "error"
