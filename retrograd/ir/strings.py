"""Python string-literal escapes: read as Python and TVM read them, written so they read back the same."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["unescape", "quote", "EscapeError"]

_ESCAPE = re.compile(r"\\(\n|[0-7]{1,3}|x[0-9a-fA-F]{0,2}|u[0-9a-fA-F]{0,4}|U[0-9a-fA-F]{0,8}|N(?:\{[^}\n]*\})?|.?)", re.S)
_SIMPLE = {"\n": "", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
           "t": "\t", "v": "\v"}
_WIDTH = {"x": 2, "u": 4, "U": 8}


class EscapeError(ValueError):
    """A malformed escape; `offset` is its position in the unquoted body."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def _replace(m: re.Match) -> str:
    s = m.group(1)
    if s in _SIMPLE:
        return _SIMPLE[s]
    if s == "":
        raise EscapeError("a string ends with a lone backslash", m.start())
    head = s[0]
    if head in "01234567":  # octal; str.isdigit() would also take "¹", an unknown escape
        return chr(int(s, 8))
    if head in _WIDTH:
        if len(s) != 1 + _WIDTH[head]:
            raise EscapeError(f"truncated \\{head} escape (\\{head} takes {_WIDTH[head]} hex digits)", m.start())
        code = int(s[1:], 16)
        if code > 0x10FFFF:
            raise EscapeError(f"\\{s} is beyond the last Unicode code point", m.start())
        return chr(code)
    if head == "N":
        if len(s) <= 2:
            raise EscapeError("malformed \\N escape (it is written \\N{NAME})", m.start())
        try:
            return unicodedata.lookup(s[2:-1])
        except KeyError:
            raise EscapeError(f"unknown Unicode character name in \\{s}", m.start()) from None
    return "\\" + s  # an unknown escape stays as written, as in Python


def unescape(body: str) -> str:
    """The value of a string literal's body (between the quotes), with Python's escapes."""
    return _ESCAPE.sub(_replace, body) if "\\" in body else body


def quote(s: str) -> str:
    """A double-quoted literal that `unescape` (and Python) reads back as `s`; non-printables escaped."""
    out = []
    for c in s:
        if c == "\\" or c == '"':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        elif c in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[c])
        else:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'
