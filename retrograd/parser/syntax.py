"""Text -> syntax nodes: the lark LALR parser over grammar.lark (tokens from lexer.py), plain-word errors.

fast_syntax.py reads a text first; what it does not read (errors included) comes here."""

from __future__ import annotations

from pathlib import Path

from lark import Lark, Transformer
from lark.lexer import PatternStr

from retrograd.errors import ParseError, Span, UnsupportedError
from retrograd.ir.strings import EscapeError, unescape
from retrograd.parser.fast_syntax import MAX_INT_DIGITS, Fallback, parse_fast
from retrograd.parser.grammar_cache import load_or_build
from retrograd.parser.lexer import LexError, ScriptLexer, Tok
from retrograd.parser.syntax_nodes import (  # noqa: F401  (re-exported: the parser's modules import them from here)
    K_ARITH, K_ASSIGN, K_CALL, K_CLASS, K_COMPARE, K_DICT, K_EXPR, K_FUNC, K_GETITEM, K_IF, K_IMPORT, K_KWARG,
    K_LAMBDA, K_LIST, K_LIT, K_NAME, K_NEG, K_NUM, K_PASS, K_POW, K_RETURN, K_STR, K_TOP_ASSIGN, K_TUPLE, K_WITH,
    Node, callee_name,
)
from retrograd.parser.tir import find_tir_decorator

GRAMMAR = Path(__file__).with_name("grammar.lark")


def _node(kind, value, items, first, last) -> Node:
    """A node spanning from `first` to `last` (tokens or nodes)."""
    if type(first) is Tok:
        line, col = first.line, first.column
    else:
        line, col = first.line, first.col
    if type(last) is Tok:
        end_line, end_col = last.end_line, last.end_column
    else:
        end_line, end_col = last.end_line, last.end_col
    return Node(kind, value, items, line, col, end_line, end_col)


def _seq(children) -> list:
    return [c for c in children if c is not None and type(c) is not Tok]


class _Build(Transformer):
    """Callbacks run inline by the LALR parser: each reduction makes a compact Node."""

    # -- top level ----------------------------------------------------------
    def start(self, ch):
        return [c for c in ch if c is not None]

    def import_stmt(self, ch):
        return None

    def import_name(self, ch):
        return None

    def top_assign(self, ch):
        name, value = ch
        return _node(K_TOP_ASSIGN, name.value, [value], name, value)

    def decorators(self, ch):
        return ch

    def decorator(self, ch):
        return ch[1]

    def classdef(self, ch):
        decorators, name = ch[0], ch[1]
        body = _seq(ch[2:])
        return _node(K_CLASS, name.value, [decorators, body], name, body[-1] if body else name)

    def funcdef(self, ch):
        decorators, def_tok, name, _lpar, params, _rpar, ret, body = ch
        return _node(K_FUNC, name.value, [decorators or [], params or [], ret, body], def_tok, name)

    def params(self, ch):
        return _seq(ch)

    def param(self, ch):
        name, ann = ch
        return _node(K_NAME, name.value, ann, name, name)

    def suite(self, ch):
        return _seq(ch)

    # -- statements ---------------------------------------------------------
    def simple_stmt(self, ch):
        return ch[0]

    def assign(self, ch):
        name, ann, value = ch
        target = _node(K_NAME, name.value, None, name, name)
        return _node(K_ASSIGN, target, [ann, value], name, value)

    def return_stmt(self, ch):
        tok, value = ch
        return _node(K_RETURN, None, value, tok, value if value is not None else tok)

    def expr_stmt(self, ch):
        value = ch[0]
        return _node(K_EXPR, None, value, value, value)

    def pass_stmt(self, ch):
        return None

    def with_stmt(self, ch):
        tok, ctx, body = ch
        return _node(K_WITH, ctx, body, tok, ctx)

    def if_stmt(self, ch):
        tok, cond, then = ch[0], ch[1], ch[2]
        orelse = ch[4] if len(ch) > 4 else None
        return _node(K_IF, cond, [then, orelse], tok, cond)

    def bare_tuple(self, ch):
        items = _seq(ch)
        return _node(K_TUPLE, None, items, items[0], items[-1])

    # -- expressions --------------------------------------------------------
    def arith(self, ch):
        items = [c.value if type(c) is Tok else c for c in ch]
        return _node(K_ARITH, None, items, ch[0], ch[-1])

    def compare(self, ch):
        items = [c.value if type(c) is Tok else c for c in ch]
        return _node(K_COMPARE, None, items, ch[0], ch[-1])

    def power(self, ch):
        base, _op, exponent = ch
        return _node(K_POW, None, [base, exponent], base, exponent)

    def lambda_(self, ch):
        tok, params, body = ch
        return _node(K_LAMBDA, params or [], body, tok, body)

    def lambda_params(self, ch):
        return [c.value for c in ch if type(c) is Tok and c.type == "NAME"]

    def neg(self, ch):
        tok, operand = ch
        return _node(K_NEG, None, operand, tok, operand)

    def name(self, ch):
        tok = ch[0]
        return Node(K_NAME, tok.value, None, tok.line, tok.column, tok.end_line, tok.end_column)

    def number(self, ch):
        tok = ch[0]
        text = tok.value
        if "." in text or "e" in text or "E" in text:
            value = float(text)
        elif len(text) > MAX_INT_DIGITS:
            raise LexError(f"integer literal of {len(text)} digits is too large", tok.line, tok.column, len(text))
        else:
            value = int(text)
        return Node(K_NUM, value, text, tok.line, tok.column, tok.end_line, tok.end_column)

    def string(self, ch):
        tok = ch[0]
        return Node(K_STR, _unquote(tok), None, tok.line, tok.column, tok.end_line, tok.end_column)

    def literal(self, ch):
        tok = ch[0]
        value = {"True": True, "False": False, "None": None}[tok.value]
        return Node(K_LIT, value, None, tok.line, tok.column, tok.end_line, tok.end_column)

    def paren(self, ch):
        return ch[1]

    def tuple(self, ch):
        items = [] if len(ch) == 2 else [ch[1]] + (ch[2] or [])
        return _node(K_TUPLE, None, items, ch[0], ch[-1])

    def list(self, ch):
        return _node(K_LIST, None, ch[1] or [], ch[0], ch[-1])

    def exprs(self, ch):
        return _seq(ch)

    def dict(self, ch):
        return _node(K_DICT, None, _seq(ch), ch[0], ch[-1])

    def dict_item(self, ch):
        return (ch[0], ch[1])

    def call(self, ch):
        func, _lpar, args, rpar = ch
        return _node(K_CALL, func, args or [], func, rpar)

    def getitem(self, ch):
        base, _l, index, rsqb = ch
        return _node(K_GETITEM, base, index, base, rsqb)

    def arguments(self, ch):
        return _seq(ch)

    def kwarg(self, ch):
        name, value = ch
        return _node(K_KWARG, name.value, value, name, value)


def _unquote(tok: Tok) -> str:
    text = tok.value
    quote_len = 3 if text[:3] in ('"""', "'''") else 1
    try:
        return unescape(text[quote_len:-quote_len])
    except EscapeError as err:
        raise LexError(str(err), *_position(tok, quote_len + err.offset)) from None


def _position(tok: Tok, offset: int) -> tuple[int, int]:
    """(line, column) of the character `offset` characters into a token."""
    before = tok.value[:offset]
    nl = before.rfind("\n")
    if nl == -1:
        return tok.line, tok.column + offset
    return tok.line + before.count("\n"), offset - nl


class _Unexpected(Exception):
    def __init__(self, token: Tok, expected: set):
        self.token, self.expected = token, expected


class _Driver:
    """The LALR loop over lark's parse table for grammar.lark, with actions flattened to ints.

    lark's own loop hashes Rule objects in Python on every reduction (~8 us a token here); this
    one indexes plain dicts and lists, running lark's tree-building callbacks unchanged. The table
    is private to lark (`LALR_Parser._parse_table`, `_Parser.callbacks`, `ParseTable.states` /
    `start_states` / `end_states`, `lalr_analysis.Shift`; pinned in pyproject.toml): `_driver()`
    falls back to `_LarkLoop` when they are not found.
    """

    def __init__(self, lark: Lark):
        from lark.parsers.lalr_analysis import Shift

        inner = lark.parser.parser
        table = inner._parse_table
        callbacks = inner.parser.callbacks
        rule_ids: dict = {}
        self.rules: list = []
        self.states: dict[int, dict[str, int]] = {}
        for state, actions in table.states.items():
            row = {}
            for term, (action, arg) in actions.items():
                if action is Shift:
                    row[str(term)] = arg  # next state (>= 0)
                else:
                    rid = rule_ids.get(arg)
                    if rid is None:
                        rid = rule_ids[arg] = len(self.rules)
                        # `?rule: other_rule` passes its one child through: no callback, just a goto.
                        identity = (
                            arg.options.expand1 and arg.alias is None and len(arg.expansion) == 1
                            and not arg.expansion[0].is_term
                        )
                        callback = None if identity else callbacks[arg]
                        self.rules.append((len(arg.expansion), str(arg.origin.name), callback))
                    row[str(term)] = -1 - rid  # reduce by rule rid (< 0)
            self.states[state] = row
        self.start = table.start_states["start"]
        self.end = table.end_states["start"]
        self.lexer = ScriptLexer(lark.lexer_conf)

    def parse(self, text: str, depth: list | None = None):
        states, rules = self.states, self.rules
        end = self.end
        state_stack = [self.start]
        value_stack: list = []
        push_state, push_value = state_stack.append, value_stack.append
        token = None
        for token in self.lexer.lex(text, depth):
            ttype = token.type
            while True:
                act = states[state_stack[-1]].get(ttype)
                if act is None:
                    raise _Unexpected(token, {t for t in states[state_stack[-1]] if t.isupper() or t == "$END"})
                if act >= 0:
                    push_state(act)
                    push_value(token)
                    break
                size, origin, callback = rules[-1 - act]
                if callback is None:
                    state_stack[-1] = states[state_stack[-2]][origin]
                    continue
                if size:
                    args = value_stack[-size:]
                    del state_stack[-size:]
                    del value_stack[-size:]
                else:
                    args = []
                push_value(callback(args))
                push_state(states[state_stack[-1]][origin])
        eof = Tok("$END", "", len(text), 0, 0, 0, 0, len(text))
        while True:
            act = states[state_stack[-1]].get("$END")
            if act is None:
                raise _Unexpected(eof, {t for t in states[state_stack[-1]] if t.isupper()})
            if act >= 0:  # pragma: no cover - $END is never shifted
                raise _Unexpected(eof, set())
            size, origin, callback = rules[-1 - act]
            if callback is None:
                value = value_stack.pop()
                state_stack.pop()
            elif size:
                args = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
                value = callback(args)
            else:
                value = callback([])
            nxt = states[state_stack[-1]][origin]
            if nxt == end:
                return value
            push_value(value)
            push_state(nxt)


class _LarkLoop:
    """lark's own LALR loop through its public interactive parser: slower, for lark versions whose
    private tables `_Driver` cannot find. Same lexer, callbacks and errors."""

    def __init__(self, lark: Lark):
        from lark.exceptions import UnexpectedToken

        self.lark = lark
        self.lexer = ScriptLexer(lark.lexer_conf)
        self.unexpected = UnexpectedToken

    def parse(self, text: str, depth: list | None = None):
        ip = self.lark.parse_interactive()
        token = None
        try:
            for token in self.lexer.lex(text, depth):
                ip.feed_token(token)
            return ip.feed_eof(token)
        except self.unexpected as err:
            tok = err.token
            if tok.type == "$END":
                tok = Tok("$END", "", len(text), 0, 0, 0, 0, len(text))
            expected = {t for t in err.expected if t.isupper()}
            raise _Unexpected(tok, expected) from None


_LARK: Lark | None = None
_DRIVER: _Driver | _LarkLoop | None = None


def _lark() -> Lark:
    global _LARK
    if _LARK is None:
        # Not lark's cache=True: it unpickles a predictably named file from the shared temp dir.
        _LARK = load_or_build(
            GRAMMAR.read_text(), ScriptLexer, _Build(), parser="lalr", maybe_placeholders=True, start="start"
        )
    return _LARK


def _driver() -> _Driver | _LarkLoop:
    global _DRIVER
    if _DRIVER is None:
        try:
            _DRIVER = _Driver(_lark())
        except (AttributeError, KeyError, TypeError, ImportError):  # another lark: its private tables moved
            _DRIVER = _LarkLoop(_lark())
    return _DRIVER




def parse_syntax(text: str, source_name: str, depth: list | None = None) -> list[Node]:
    """The script's top-level syntax nodes; syntax errors become ParseError with a caret. The deepest
    indentation (levels open at once) is appended to `depth`."""
    # TIR functions are cut out before (parser/tir.py); one left here stands where no function may.
    m = find_tir_decorator(text)
    if m is not None:
        line = text.count("\n", 0, m.start(2)) + 1
        col = m.start(2) - (text.rfind("\n", 0, m.start(2)) + 1)
        span = Span(source_name, line, col, line, col + 1 + len(m.group(2)), text)
        raise UnsupportedError(f"@{m.group(2)} defines a TIR function, which cannot stand here", span)
    try:
        return parse_fast(text, depth)
    except Fallback:  # not read by the fast path (or an error): the LALR parser reads it, or says why not
        pass
    try:
        return _driver().parse(text, depth)
    except LexError as err:
        span = Span(source_name, err.line, err.col, err.line, err.col + err.width, text)
        raise ParseError(err.message, span) from None
    except _Unexpected as err:
        raise _syntax_error(err.token, err.expected, text, source_name) from None


_WORDS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "LONG_STRING": "a string",
    "_NL": "end of line",
    "_INDENT": "an indented block",
    "_DEDENT": "end of the indented block",
    "$END": "end of input",
    "ARITH_OP": "an operator",
    "CMP": "a comparison",
}


def _describe_terminal(name: str) -> str:
    if name in _WORDS:
        return _WORDS[name]
    for t in _lark().terminals:
        if t.name == name and isinstance(t.pattern, PatternStr):
            return f'"{t.pattern.value}"'
    return name.lower()


def _describe_token(tok: Tok) -> str:
    if tok.type == "$END":
        return "end of input"
    if tok.type == "_NL":
        return "end of line"
    if tok.type == "_INDENT":
        return "indentation"
    if tok.type == "_DEDENT":
        return "end of the indented block"
    return f'"{tok.value}"'


def _syntax_error(tok: Tok, expected: set, text: str, source_name: str) -> ParseError:
    words = sorted({_describe_terminal(t) for t in expected})
    want = f"; expected one of: {', '.join(words)}" if words else ""
    if tok.type == "$END":
        line, col = _end_position(text)
        return ParseError(f"unexpected end of input{want}", Span(source_name, line, col, line, col + 1, text))
    line, col = tok.line, tok.column
    width = max(1, tok.end_column - col) if tok.end_line == line else 1
    if tok.type == "_NL":
        # Point just past the end of the line that stopped early, not at the next line.
        start = tok.start_pos
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        width = 1
    elif tok.type in ("_INDENT", "_DEDENT"):
        col = len(tok.value) + 1
        width = 1
    return ParseError(f"unexpected {_describe_token(tok)}{want}", Span(source_name, line, col, line, col + width, text))


def _end_position(text: str):
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    col = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, col
