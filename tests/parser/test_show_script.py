"""`mod.show()`, `mod["main"].script()` and `func.show()` (TVM's spelling) print text that parses back."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path


import retrograd
from retrograd.passes import Gradient
from optional import need  # noqa: E402

MLP = Path(__file__).resolve().parents[2] / "examples" / "mlp.py"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_function_script_is_named_after_the_module_entry_and_parses_back():
    adj = Gradient("main")(retrograd.parse_file(MLP))
    for name in ("main", "main_adjoint"):
        text = adj[name].script()
        assert f"\ndef {name}(" in text and "@I.ir_module" not in text
        again = retrograd.parse(text)
        assert list(again.keys()) == [name]
        retrograd.assert_structural_equal(again[name], adj[name])
    assert "\ndef other(" in adj["main"].script(name="other")


def test_show_writes_the_script_plain_when_not_a_terminal(capsys):
    mod = retrograd.parse_file(MLP)
    buf = io.StringIO()
    mod.show(file=buf)
    assert buf.getvalue() == mod.script()
    mod["main"].show()
    assert capsys.readouterr().out == mod["main"].script()


def test_show_highlights_on_a_terminal_when_pygments_is_installed():
    need("pygments")
    mod = retrograd.parse_file(MLP)
    term = FakeTerminal()
    mod.show(file=term)
    out = term.getvalue()
    assert _ANSI.search(out) is not None
    assert _ANSI.sub("", out) == mod.script()


def test_show_on_a_terminal_without_pygments_is_plain(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygments", None)
    mod = retrograd.parse_file(MLP)
    term = FakeTerminal()
    mod.show(file=term)
    assert term.getvalue() == mod.script()
