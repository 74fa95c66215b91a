"""Text -> tokens for grammar.lark: one compiled regular expression plus Python's indentation rules."""

from __future__ import annotations

import re

from lark.lexer import Lexer, PatternStr


class Tok:
    """A token: what lark's Token carries, without its str subclassing cost."""

    __slots__ = ("type", "value", "start_pos", "line", "column", "end_line", "end_column", "end_pos")

    def __init__(self, type, value, start_pos, line, column, end_line, end_column, end_pos):
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        self.end_pos = end_pos

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Tok({self.type}, {self.value!r} @{self.line}:{self.column})"


class LexError(Exception):
    def __init__(self, message: str, line: int, col: int, width: int = 1):
        super().__init__(message)
        self.message, self.line, self.col, self.width = message, line, col, width


def indent_width(prefix: str) -> int:
    """Python's indentation width: a tab advances to the next multiple of 8."""
    if "\t" not in prefix:
        return len(prefix)  # spaces (and form feeds, which Python counts as 1): no per-character loop
    width = 0
    for c in prefix:
        width = (width // 8 + 1) * 8 if c == "\t" else width + 1
    return width


# Brackets (and unary minus signs in a row) nest at most this deep; the parser recurses on expressions.
# Python's own limit is 200 brackets.
MAX_NESTING = 200
# Indentation levels open at once. Python's tokenizer stops at 100 (and TVM, which reads scripts
# with it); this parser's statement nesting costs no C stack (ir/functor.stack_room), and printed
# If nests of 1000 and more must read back. At 2000 levels a printed nest (4 spaces a level) is
# ~30 MB of mostly leading spaces: deeper is no longer a program anyone writes or generates.
MAX_INDENTS = 2000


def _possessive(t) -> str:
    """A terminal's regex; `_NL`'s repetition made possessive: its alternatives never overlap, and
    the backtracking states a plain `+` keeps made 10,000 blank lines superlinear."""
    regex = t.pattern.to_regexp()
    if t.name == "_NL" and regex.endswith(")+") and regex.startswith("(?:"):
        regex += "+"
    return regex


class ScriptLexer(Lexer):
    """One compiled regex built from the grammar's terminals, plus Python's indentation rules.

    Measured on the benchmark's scripts, lark's contextual lexer + Indenter took ~5 us a token, this
    one ~2 us. It can stay context-free: the only terminal collisions are keywords (resolved by a
    lookup after NAME) and "-" (one MINUS terminal, unary or binary by the grammar).
    """

    OPEN = frozenset(("LPAR", "LSQB", "LBRACE"))
    CLOSE = frozenset(("RPAR", "RSQB", "RBRACE"))

    def __init__(self, lexer_conf):
        terminals = list(lexer_conf.terminals)
        name_re = re.compile(next(t.pattern.to_regexp() for t in terminals if t.name == "NAME"))
        self.keywords = {}
        patterns = []
        for t in terminals:
            if isinstance(t.pattern, PatternStr) and name_re.fullmatch(t.pattern.value):
                self.keywords[t.pattern.value] = t.name
                continue
            if t.name.startswith("__IGNORE"):
                continue
            is_str = isinstance(t.pattern, PatternStr)
            # Priority first, then longer literals before their prefixes ("->" before "-").
            patterns.append((-t.priority, 0 if is_str else 1, -len(t.pattern.value) if is_str else 0, t))
        patterns.sort(key=lambda p: p[:3])
        groups = [f"(?P<{t.name}>{_possessive(t)})" for *_, t in patterns]
        ignore = "|".join(
            t.pattern.to_regexp() for t in terminals if t.name in lexer_conf.ignore or t.name.startswith("__IGNORE")
        )
        # Possessive: whitespace runs are never re-split on a failed match (that backtracking was
        # exponential in the run's length).
        # ASCII: \\d would read "٣" as the digit 3.
        self.regex = re.compile(f"(?:{ignore})*+(?:" + "|".join(groups) + ")", re.M | re.ASCII)
        self.skip = re.compile(f"(?:{ignore})*+")

    def lex(self, text: str, depth: list | None = None):
        """The tokens of `text`; at the end, appends the deepest indentation (levels open at once) to `depth`."""
        match = self.regex.match
        skip = self.skip.match
        keywords = self.keywords
        open_, close = self.OPEN, self.CLOSE
        find = text.find
        pos, n = 0, len(text)
        line, line_start = 1, 0
        paren = 0
        minus_run = 1
        indents: list[int] | None = None  # set by the first token: a uniformly indented script is fine
        deepest = 0
        last_type = "_NL"
        new_token = Tok
        while True:
            m = match(text, pos)
            if m is None:
                end = skip(text, pos).end()
                nl = find("\n", pos, end)
                while nl != -1:  # a backslash continuation before the end
                    line, line_start = line + 1, nl + 1
                    nl = find("\n", nl + 1, end)
                pos = end
                if pos >= n:
                    break
                raise LexError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1)
            kind = m.lastgroup
            start = m.start(kind)
            end = m.end()
            if start > pos:
                nl = find("\n", pos, start)
                while nl != -1:  # backslash continuations inside the skipped whitespace
                    line, line_start = line + 1, nl + 1
                    nl = find("\n", nl + 1, start)
            value = m.group(kind)
            pos = end
            if kind == "_NL":
                nl = value.count("\n")
                tok_line, tok_col = line, start - line_start + 1
                if nl:
                    line += nl
                    line_start = start + value.rindex("\n") + 1
                if paren > 0 or last_type == "_NL":
                    continue
                yield new_token("_NL", value, start, tok_line, tok_col, line, 1, end)
                last_type = "_NL"
                if not nl or end >= n:
                    continue
                indent_str = value[value.rindex("\n") + 1 :]
                indent = indent_width(indent_str)
                if indent > indents[-1]:
                    indents.append(indent)
                    if len(indents) > deepest:
                        deepest = len(indents)
                        if deepest > MAX_INDENTS:
                            # At the line's first token: a caret under thousands of spaces shows nothing.
                            message = f"too many levels of indentation (at most {MAX_INDENTS})"
                            raise LexError(message, line, len(indent_str) + 1)
                    yield new_token("_INDENT", indent_str, end, line, 1, line, indent + 1, end)
                else:
                    while indent < indents[-1]:
                        indents.pop()
                        yield new_token("_DEDENT", indent_str, end, line, 1, line, indent + 1, end)
                    if indent != indents[-1]:
                        raise LexError("unindent does not match any outer indentation level", line, 1, indent or 1)
                continue
            tok_line, tok_col = line, start - line_start + 1
            if indents is None:
                indents = [indent_width(text[line_start:start])]
            if kind == "NAME":
                kind = keywords.get(value, "NAME")
            elif kind in open_:
                paren += 1
                if paren > MAX_NESTING:
                    raise LexError(f"brackets are nested too deeply (more than {MAX_NESTING} levels)", line, tok_col)
            elif kind == "MINUS" and last_type == "MINUS":
                minus_run += 1
                if minus_run > MAX_NESTING:
                    raise LexError(f"unary minus signs are nested too deeply (more than {MAX_NESTING} in a row)", line, tok_col)
            elif kind in close:
                paren -= 1
                if paren < 0:
                    raise LexError(f"unmatched {value!r}", line, tok_col)
            if kind == "LONG_STRING" and "\n" in value:
                line += value.count("\n")
                line_start = start + value.rindex("\n") + 1
                end_col = end - line_start + 1
            else:
                end_col = tok_col + (end - start)
            yield new_token(kind, value, start, tok_line, tok_col, line, end_col, end)
            if kind != last_type:
                minus_run = 1
            last_type = kind
        if paren > 0:
            raise LexError("unexpected end of input: a bracket is never closed", line, max(1, n - line_start + 1))
        if last_type != "_NL":
            yield new_token("_NL", "\n", n, line, n - line_start + 1, line + 1, 1, n)
        while indents is not None and len(indents) > 1:
            indents.pop()
            yield new_token("_DEDENT", "", n, line + 1, 1, line + 1, 1, n)
        if depth is not None:
            depth.append(deepest)
