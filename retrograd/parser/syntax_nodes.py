"""Syntax nodes: what both parsers of a script's text (the LALR one in syntax.py, the fast one in
fast_syntax.py) build, node for node."""

from __future__ import annotations


class Node:
    """A syntax node: `kind` (see the K_* names), a payload, children and a source region."""

    __slots__ = ("kind", "value", "items", "line", "col", "end_line", "end_col")

    def __init__(self, kind, value, items, line, col, end_line, end_col):
        self.kind = kind
        self.value = value
        self.items = items
        self.line = line
        self.col = col
        self.end_line = end_line
        self.end_col = end_col

    def __repr__(self) -> str:
        return f"Node({self.kind}, {self.value!r}, {self.items!r} @{self.line}:{self.col})"


# Expression kinds.
K_NAME, K_NUM, K_STR, K_LIT, K_TUPLE, K_LIST, K_DICT = "name", "num", "str", "lit", "tuple", "list", "dict"
K_CALL, K_GETITEM, K_NEG, K_ARITH, K_KWARG = "call", "getitem", "neg", "arith", "kwarg"
K_COMPARE, K_POW, K_LAMBDA = "compare", "pow", "lambda"
# Statement kinds.
K_ASSIGN, K_RETURN, K_EXPR, K_PASS, K_WITH, K_IF = "assign", "return", "expr", "pass", "with", "if"
K_FUNC, K_CLASS, K_IMPORT, K_TOP_ASSIGN = "func", "class", "import", "top_assign"


def callee_name(node: Node | None) -> str | None:
    """`R.add` for a call node `R.add(...)` whose callee is a plain (dotted) name, else None."""
    if node is not None and node.kind == K_CALL and node.value.kind == K_NAME:
        return node.value.value
    return None
