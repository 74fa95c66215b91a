"""TIR functions (`@T.prim_func`) in a script: cut out as opaque text before parsing, never read."""

from __future__ import annotations

import re

from retrograd.errors import ParseError, Span
from retrograd.parser.lexer import indent_width

# A TIR decorator at the start of a line: what TVMScript reads as a TIR function or macro.
TIR_DECORATOR = re.compile(r"^([ \t]*)@((?:T|tir|tvm\.script\.tir|tvm\.script\.tirx|tirx)\.(?:prim_func|macro))\b", re.M)


def find_tir_decorator(text: str):
    """TIR_DECORATOR.search(text); None at once when the text has no ".prim_func" or ".macro" (the
    regex tries every line start and runs through its indentation: 0.2 s on a printed 1000-deep If nest)."""
    if ".prim_func" not in text and ".macro" not in text:
        return None
    return TIR_DECORATOR.search(text)


_DEF = re.compile(r"[ \t]*def[ \t]+([A-Za-z_][A-Za-z0-9_]*)")


class TirFunction:
    """One TIR function of a script: its name, its source text (dedented) and where it stood."""

    __slots__ = ("name", "text", "span")

    def __init__(self, name: str, text: str, span: Span):
        self.name, self.text, self.span = name, text, span


def split_tir(text: str, source_name: str) -> tuple[str, list[TirFunction]]:
    """(the script with each TIR function's lines blanked, the TIR functions). Line numbers are kept,
    so the Relax part's locations stay right; inside a class the decorator line becomes `pass`, so a
    class holding only TIR functions still has a body. The TIR text is kept, not parsed: the body's
    lines are those indented deeper than its decorator (and the lines of a bracketed signature)."""
    if find_tir_decorator(text) is None:
        return text, []
    lines = text.split("\n")
    found: list[TirFunction] = []
    i = 0
    while i < len(lines):
        m = TIR_DECORATOR.match(lines[i])
        if m is None:
            i += 1
            continue
        indent = indent_width(m.group(1))
        j = i + 1
        while j < len(lines) and lines[j].strip().startswith("@"):
            j += 1
        d = _DEF.match(lines[j]) if j < len(lines) else None
        span = Span(source_name, i + 1, len(m.group(1)) + 1, i + 1, len(m.group(1)) + 2 + len(m.group(2)), text)
        if d is None or indent_width(lines[j][: len(lines[j]) - len(lines[j].lstrip())]) != indent:
            raise ParseError(f"@{m.group(2)} must decorate a def", span)
        last = _signature_end(lines, j)
        k = last + 1
        while k < len(lines):
            line = lines[k]
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                if indent_width(line[: len(line) - len(line.lstrip())]) <= indent:
                    break
                last = k
            k += 1
        prefix = m.group(1)
        block = lines[i : last + 1]
        body = "\n".join(x[len(prefix) :] if x.startswith(prefix) else x.lstrip() for x in block).rstrip() + "\n"
        found.append(TirFunction(d.group(1), body, span))
        lines[i] = (prefix + "pass") if indent > 0 else ""
        for n in range(i + 1, last + 1):
            lines[n] = ""
        i = last + 1
    return "\n".join(lines), found


def _signature_end(lines: list[str], j: int) -> int:
    """The last line of a def whose parameter list may span lines (by bracket depth)."""
    depth = 0
    for k in range(j, len(lines)):
        code = lines[k].split("#", 1)[0]
        depth += sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}")
        if depth <= 0:
            return k
    return len(lines) - 1
