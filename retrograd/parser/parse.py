"""Syntax nodes -> typed IR through BlockBuilder (declarations, statements, expressions: one module each)."""

from __future__ import annotations

from pathlib import Path

from retrograd.errors import DiagnosticError, OpError, ParseError, Span, TypeInferenceError, UnsupportedError
from retrograd.gc_pause import collector_paused, promote_survivors
from retrograd.ir.functor import stack_room
from retrograd.ir.module import IRModule
from retrograd.parser import literals as lit
from retrograd.parser.declarations import DeclarationParser, FuncInfo, FuncState
from retrograd.parser.expressions import ExpressionParser
from retrograd.parser.literals import Ctx, NotLiteral
from retrograd.parser.statements import StatementParser
from retrograd.parser.syntax import Node, parse_syntax
from retrograd.parser.tir import split_tir

__all__ = ["parse", "parse_file"]


def parse(text: str, source_name: str = "<string>") -> IRModule:
    """Parse script text into an IRModule. Never evaluates Python; errors are DiagnosticErrors."""
    if not isinstance(text, str):
        raise TypeError(f"parse() takes the script text as a str, got {type(text).__name__}")
    if text.startswith("\ufeff"):  # a UTF-8 byte-order mark, as Python allows
        text = text[1:]
    try:
        with collector_paused():
            relax_text, tir = split_tir(text, source_name)
            depth: list[int] = []
            nodes = parse_syntax(relax_text, source_name, depth)
            sp = _ScriptParser(text, source_name)
            sp.tir = {f.name: f for f in tir}
            # Statements nest by indentation, and an if statement's conversion recurses into its
            # branches: room for the deepest (the lexer bounds it, MAX_INDENTS).
            with stack_room(depth[0] if depth else 0):
                module = sp.module(nodes, tir)
            del nodes, sp
            promote_survivors()
            return module
    except RecursionError:
        # Binding sequences are iterated, the lexer bounds bracket nesting, if statements get stack
        # room for their depth: not expected to happen.
        span = Span(source_name, 1, 1, source=text)
        raise UnsupportedError("the script is nested too deeply to parse", span)


def parse_file(path) -> IRModule:
    """Parse a script file; errors name the file."""
    data = Path(path).read_bytes()
    return parse(decode_source(data, str(path)), source_name=str(path))


def parse_path(path: str) -> IRModule:
    """The command line's convention: the module parsed from the file `path`, or from standard input when
    it is '-'."""
    if path == "-":
        import sys

        return parse(decode_source(sys.stdin.buffer.read(), "<stdin>"), source_name="<stdin>")
    return parse_file(path)


def decode_source(data: bytes, source_name: str) -> str:
    """Script bytes as text: UTF-8, with or without a byte-order mark; anything else is a located error."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        good = data[: err.start].decode("utf-8-sig")
        line = good.count("\n") + 1
        col = len(good) - (good.rfind("\n") + 1) + 1
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        span = Span(source_name, line, col, line, col + 1, good)
        raise ParseError(f"the file is not UTF-8 text{hint}: byte {data[err.start]:#04x} at offset {err.start}", span) from None


class _ScriptParser(DeclarationParser, StatementParser, ExpressionParser):
    """One script's parse: the shared state and helpers; each concern's methods come from its base."""

    def __init__(self, text: str, source_name: str):
        self.ctx = Ctx(text, source_name)
        self.text = text
        self.source_name = source_name
        self.class_name: str | None = None
        self.metadata: dict[str, list] = {}
        self.funcs: dict[str, FuncInfo] = {}
        self.mod_attrs: dict = {}
        self.global_symbols: set[str] = set()  # symbolic dims declared before the module
        self.tir: dict = {}  # name -> TirFunction: the module's TIR functions, kept as text
        self.cur: FuncState | None = None
        self.depth = 0  # nesting of the value being read (ExpressionParser._value)

    # -- helpers ------------------------------------------------------------------------------
    def span(self, node: Node) -> Span:
        return Span(self.source_name, node.line, node.col, node.end_line, node.end_col, self.text)

    def _parse_dim_text(self, text: str, node: Node) -> Node:
        """A symbolic dim written as a string ("n + 1"): read it with the same grammar."""
        try:
            nodes = parse_syntax(f"_d = {text}\n", self.source_name)
        except DiagnosticError:
            raise TypeInferenceError(f"cannot read dimension {text!r}", self.span(node)) from None
        inner = nodes[0].items[0]
        # Errors inside the string point at the string itself.
        _relocate(inner, node)
        return inner

    def sinfo(self, node: Node):
        return lit.struct_info(self.ctx, node, self._parse_dim_text)

    def dim(self, node: Node):
        return lit.dim(self.ctx, node, self._parse_dim_text)

    def literal(self, node: Node, what: str):
        try:
            return lit.literal(node)
        except NotLiteral as err:
            reason = err.reason or f"{what} must be a literal (number, string, True/False/None, list)"
            raise OpError(reason, self.span(err.node)) from None


def _relocate(node: Node, at: Node) -> None:
    """Give every node of `node`'s tree the position of `at` (text read from inside a string)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, Node):
            continue
        n.line, n.col, n.end_line, n.end_col = at.line, at.col, at.end_line, at.end_col
        items = n.items
        if isinstance(items, list):
            stack.extend(x for x in items if isinstance(x, Node))
        elif isinstance(items, Node):
            stack.append(items)
        if isinstance(n.value, Node):
            stack.append(n.value)
