"""Text -> syntax nodes without lark: a hand-written lexer and recursive-descent parser for grammar.lark.

It builds exactly the nodes syntax.py's LALR parser builds (tests/parser/test_fast_syntax.py compares
them), about 3x faster. It only accepts: on anything it does not read (a syntax or lexical error, a
triple-quoted string, tabs, backslash continuations, deep nesting) it raises `Fallback`, and
`parse_syntax` runs the LALR parser from the start, which gives the error message or the nodes. So
an error is always reported by one parser, and nesting depth never reaches Python's recursion limit
here (the depth is capped at `MAX_DEPTH`; deeper input goes to the LALR loop, which does not recurse).
"""

from __future__ import annotations

import re

from retrograd.ir.strings import EscapeError, unescape
from retrograd.parser.syntax_nodes import (
    K_ARITH, K_ASSIGN, K_CALL, K_CLASS, K_COMPARE, K_DICT, K_EXPR, K_FUNC, K_GETITEM, K_IF, K_KWARG, K_LAMBDA,
    K_LIST, K_LIT, K_NAME, K_NEG, K_NUM, K_POW, K_RETURN, K_STR, K_TOP_ASSIGN, K_TUPLE, K_WITH, Node,
)


class Fallback(Exception):
    """The fast path does not read this text: parse it with the LALR parser."""


# Brackets, indentation levels, or chains of `-`, `**` and lambda nested this deep go to the LALR
# parser: at most ~3 Python frames a level for each, under the default limit of 1000 together.
MAX_DEPTH = 60
# The grammar's keywords: NAME tokens with these exact values (test_fast_syntax checks them against
# the grammar's terminals).
KEYWORDS = frozenset(("def", "return", "with", "if", "else", "True", "False", "None", "lambda", "from", "import",
                      "as", "class", "pass"))
# Integer literals longer than this are refused (int() itself refuses above 4300 digits): an error
# from the LALR parser's callback; here, Fallback.
MAX_INT_DIGITS = 100

# One token with the spaces before it (no groups: findall then returns plain strings, the fastest).
# Only spaces: a tab, form feed, lone carriage return or backslash continuation stops the scan (the text
# then goes to the LALR parser). `"""`/`'''` starts a long string: Fallback. A newline token is
# grammar.lark's _NL: newlines with the next line's indentation, and comments. Operators of two
# characters come before their one-character prefixes.
_TOKEN = re.compile(
    r" *+(?:[(),:\[\]{}@+%]|->|\*\*?|//?|[=!<>]=|[-<>=]"
    r"|[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
    r"|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?"
    r"|\"\"\"|'''"
    r"|\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
    r"|(?:\r?\n *+|#[^\n]*)++)",
    re.ASCII,
)
_NAME, _NUMBER, _STRING, _NL, _INDENT, _DEDENT, _END = "NAME", "NUMBER", "STRING", "\n", "INDENT", "DEDENT", "$END"
_CLASS = {c: _NAME for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"}
_CLASS.update({c: _NUMBER for c in "0123456789."})
_CLASS.update({'"': _STRING, "'": _STRING, "\n": _NL, "\r": _NL, "#": _NL})
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
_SPECIAL = _OPEN | _CLOSE | {_NL, _STRING}
_CMP = frozenset(("==", "!=", "<=", ">=", "<", ">"))
_ARITH = frozenset(("+", "*", "//", "/", "%", "-"))
# What may follow a complete primary expression when no operator does: the common case, checked first.
_PLAIN_END = frozenset((",", ")", "=", _NL, ":", "]", "}"))
_LITERALS = {"True": True, "False": False, "None": None}
_ATOMS = frozenset((_NUMBER, _STRING, *_LITERALS))


def tokens(text: str):
    """(kinds, values, lines, columns, deepest indentation) of `text`, as ScriptLexer yields them.

    A kind is "NAME", "NUMBER", "STRING", "\\n", "INDENT", "DEDENT", a keyword, or an operator's text.
    """
    kinds: list = []
    values: list = []
    lines: list = []
    cols: list = []
    add_kind, add_value, add_line, add_col = kinds.append, values.append, lines.append, cols.append
    classes = _CLASS
    keywords = KEYWORDS
    special = _SPECIAL
    n = len(text)
    pos = 0
    line, line_start = 1, 0
    paren = 0
    indents = None
    deepest = 0
    last = _NL  # the last kind that was not INDENT or DEDENT
    for value in _TOKEN.findall(text):
        start = pos
        pos += len(value)
        first = value[0]
        if first == " ":
            value = value.lstrip(" ")
            start = pos - len(value)
            first = value[0]
        kind = classes.get(first, value)
        if kind is _NAME:
            if value in keywords:
                kind = value
        elif kind in special:
            if kind is _NL:
                nl = value.count("\n")
                if nl:
                    line += nl
                    line_start = start + value.rindex("\n") + 1
                if paren > 0 or last is _NL:
                    continue
                add_kind(_NL), add_value(value), add_line(line), add_col(0)
                last = _NL
                if not nl or pos >= n:
                    continue
                if indents is None:  # the first token's indentation is the base
                    indents = [cols[0] - 1]
                indent = pos - line_start
                if indent > indents[-1]:
                    indents.append(indent)
                    if len(indents) > deepest:
                        deepest = len(indents)
                        if deepest > MAX_DEPTH:
                            raise Fallback
                    add_kind(_INDENT), add_value(""), add_line(line), add_col(0)
                else:
                    while indent < indents[-1]:
                        indents.pop()
                        if not indents:  # below the first line's indentation: an error
                            raise Fallback
                        add_kind(_DEDENT), add_value(""), add_line(line), add_col(0)
                    if indent != indents[-1]:
                        raise Fallback
                continue
            if kind in _OPEN:
                paren += 1
            elif kind in _CLOSE:
                paren -= 1
            elif value == '"""' or value == "'''":
                raise Fallback
        add_kind(kind), add_value(value), add_line(line), add_col(start - line_start + 1)
        last = kind
    if (pos != n and text[pos:].strip(" ")) or paren > 0:  # a character no token starts with, or an unclosed bracket
        raise Fallback
    if last is not _NL:
        add_kind(_NL), add_value(""), add_line(line), add_col(0)
    while indents is not None and len(indents) > 1:
        indents.pop()
        add_kind(_DEDENT), add_value(""), add_line(line), add_col(0)
    for _ in range(3):  # lookahead past the end never runs off the lists
        add_kind(_END), add_value(""), add_line(line), add_col(0)
    return kinds, values, lines, cols, deepest


def parse_fast(text: str, depth: list | None = None) -> list[Node]:
    """The top-level syntax nodes of `text`, as syntax.py's LALR parser builds them, or Fallback.
    On success appends the deepest indentation (levels open at once) to `depth`."""
    K, V, L, C, deepest = tokens(text)
    try:
        nodes = _read(K, V, L, C)
    except RecursionError:  # called with little stack left: the LALR loop needs none
        raise Fallback from None
    if depth is not None:
        depth.append(deepest)
    return nodes


def _read(K, V, L, C) -> list[Node]:
    """Recursive descent over the token lists: every rule's node as syntax.py's callbacks make it.

    The rules are closures sharing the index `i`: no attribute lookups on the hot path. Recursion is
    bounded: indentation by `tokens`, brackets and operand chains (`-`, `**`, lambda) by `depth`.
    """
    i = 0
    depth = 0

    def expect(kind) -> int:
        nonlocal i
        j = i
        if K[j] != kind:
            raise Fallback
        i = j + 1
        return j

    # -- expressions -------------------------------------------------------------------------------
    def expr():
        # expr: sum (CMP sum)* | LAMBDA [lambda_params] ":" expr
        nonlocal i
        j = i
        k = K[j]
        if K[j + 1] in _PLAIN_END:  # a lone name, number, string or literal: the commonest expressions
            if k is _NAME:
                i = j + 1
                v = V[j]
                return Node(K_NAME, v, None, L[j], C[j], L[j], C[j] + len(v))
            if k in _ATOMS:
                i = j + 1
                return atom(k, j)
        if k == "lambda":
            return lambda_()
        if k == "-":
            first = unary()
        else:
            first = primary()
            if K[i] in _PLAIN_END:
                return first
            if K[i] == "**":
                first = power(first)
        if K[i] in _ARITH:
            first = operators(first, _ARITH, K_ARITH)
        if K[i] in _CMP:
            first = operators(first, _CMP, K_COMPARE)
        return first

    def operators(first, ops, kind):
        # The flat operand, operator, operand, ... lists of `arith` (operands: unary) and `compare` (sum).
        nonlocal i
        items = [first]
        while K[i] in ops:
            items.append(V[i])
            i += 1
            operand = unary()
            if kind is K_COMPARE and K[i] in _ARITH:
                operand = operators(operand, _ARITH, K_ARITH)
            items.append(operand)
        last = items[-1]
        return Node(kind, None, items, first.line, first.col, last.end_line, last.end_col)

    def unary():
        # unary: MINUS unary | primary [POW unary]
        nonlocal i, depth
        j = i
        depth += 1
        if depth > MAX_DEPTH:
            raise Fallback
        if K[j] == "-":
            i = j + 1
            operand = unary()
            node = Node(K_NEG, None, operand, L[j], C[j], operand.end_line, operand.end_col)
        else:
            node = primary()
            if K[i] == "**":
                node = power(node)
        depth -= 1
        return node

    def power(base):
        nonlocal i
        i += 1
        exponent = unary()
        return Node(K_POW, None, [base, exponent], base.line, base.col, exponent.end_line, exponent.end_col)

    def lambda_():
        nonlocal i, depth
        j = i
        depth += 1
        if depth > MAX_DEPTH:
            raise Fallback
        i += 1
        params = []
        if K[i] is _NAME:
            params.append(V[i])
            i += 1
            while K[i] == ",":
                i += 1
                params.append(V[expect(_NAME)])
        expect(":")
        body = expr()
        depth -= 1
        return Node(K_LAMBDA, params, body, L[j], C[j], body.end_line, body.end_col)

    def exprs(close):
        # exprs: expr ("," expr)* [","], ended by `close` (not consumed)
        nonlocal i
        items = [expr()]
        while K[i] == ",":
            i += 1
            if K[i] == close:
                break
            items.append(expr())
        return items

    def atom(k, j):
        # A number, string, True, False or None: the node of token j.
        v = V[j]
        if k is _NUMBER:
            if "." in v or "e" in v or "E" in v:
                value = float(v)
            elif len(v) > MAX_INT_DIGITS:
                raise Fallback
            else:
                value = int(v)
            return Node(K_NUM, value, v, L[j], C[j], L[j], C[j] + len(v))
        if k is _STRING:
            try:
                value = unescape(v[1:-1])
            except EscapeError:
                raise Fallback from None
            return Node(K_STR, value, None, L[j], C[j], L[j], C[j] + len(v))
        return Node(K_LIT, _LITERALS[k], None, L[j], C[j], L[j], C[j] + len(v))

    def primary():
        # Every bracket's contents are read through here: `depth` bounds their nesting.
        nonlocal i, depth
        j = i
        k = K[j]
        v = V[j]
        depth += 1
        if depth > MAX_DEPTH:
            raise Fallback
        if k is _NAME:
            i = j + 1
            node = Node(K_NAME, v, None, L[j], C[j], L[j], C[j] + len(v))
        elif k in _ATOMS:
            i = j + 1
            node = atom(k, j)
        elif k == "(":
            if K[j + 1] == ")":
                i = j + 2
                node = Node(K_TUPLE, None, [], L[j], C[j], L[j + 1], C[j + 1] + 1)
            else:
                i = j + 1
                first = expr()
                if K[i] == ")":  # (expr): the expression itself, with its own region
                    i += 1
                    node = first
                elif K[i] == ",":
                    i += 1
                    items = [first] if K[i] == ")" else [first] + exprs(")")
                    end = expect(")")
                    node = Node(K_TUPLE, None, items, L[j], C[j], L[end], C[end] + 1)
                else:
                    raise Fallback
        elif k == "[":
            i = j + 1
            items = [] if K[j + 1] == "]" else exprs("]")
            end = expect("]")
            node = Node(K_LIST, None, items, L[j], C[j], L[end], C[end] + 1)
        elif k == "{":
            i = j + 1
            items = []
            while K[i] != "}":
                key = expr()
                expect(":")
                items.append((key, expr()))
                if K[i] != ",":
                    break
                i += 1
            end = expect("}")
            node = Node(K_DICT, None, items, L[j], C[j], L[end], C[end] + 1)
        else:
            raise Fallback
        while True:  # calls and subscripts
            k = K[i]
            if k == "(":
                i += 1
                args = [] if K[i] == ")" else arguments()
                end = expect(")")
                node = Node(K_CALL, node, args, node.line, node.col, L[end], C[end] + 1)
            elif k == "[":
                i += 1
                index = expr()
                end = expect("]")
                node = Node(K_GETITEM, node, index, node.line, node.col, L[end], C[end] + 1)
            else:
                depth -= 1
                return node

    def arguments():
        # argument ("," argument)* [","]; argument: expr | NAME "=" expr
        nonlocal i
        args = []
        append = args.append
        while True:
            j = i
            if K[j] is _NAME and K[j + 1] == "=":
                i = j + 2
                value = expr()
                append(Node(K_KWARG, V[j], value, L[j], C[j], value.end_line, value.end_col))
            else:
                append(expr())
            if K[i] != ",":
                return args
            i += 1
            if K[i] == ")":
                return args

    def exprlist():
        # exprlist: expr | bare_tuple;  bare_tuple: expr ("," expr)+ [","] | expr ","
        nonlocal i
        first = expr()
        if K[i] != ",":
            return first
        items = [first]
        while K[i] == ",":
            i += 1
            if K[i] is _NL:
                break
            items.append(expr())
        last = items[-1]
        return Node(K_TUPLE, None, items, first.line, first.col, last.end_line, last.end_col)

    # -- statements --------------------------------------------------------------------------------
    def simple_stmt():
        nonlocal i
        j = i
        k = K[j]
        if k is _NAME and (K[j + 1] == "=" or K[j + 1] == ":"):
            ann = None
            i = j + 1
            if K[i] == ":":
                i += 1
                ann = expr()
            expect("=")
            value = exprlist()
            target = Node(K_NAME, V[j], None, L[j], C[j], L[j], C[j] + len(V[j]))
            node = Node(K_ASSIGN, target, [ann, value], L[j], C[j], value.end_line, value.end_col)
        elif k == "return":
            i = j + 1
            if K[i] is _NL:
                node = Node(K_RETURN, None, None, L[j], C[j], L[j], C[j] + 6)
            else:
                value = exprlist()
                node = Node(K_RETURN, None, value, L[j], C[j], value.end_line, value.end_col)
        elif k == "pass":
            i = j + 1
            node = None
        else:
            value = exprlist()
            node = Node(K_EXPR, None, value, value.line, value.col, value.end_line, value.end_col)
        if K[i] is not _NL:
            raise Fallback
        i += 1
        return node

    def suite():
        # suite: _NL _INDENT (simple_stmt | with_stmt | if_stmt)+ _DEDENT
        nonlocal i
        expect(_NL)
        expect(_INDENT)
        body = []
        append = body.append
        while True:
            k = K[i]
            if k == "with" or k == "if":
                append(compound())
            else:
                stmt = simple_stmt()
                if stmt is not None:
                    append(stmt)
            if K[i] is _DEDENT:
                i += 1
                return body

    def compound():
        # with_stmt: WITH expr ":" suite;  if_stmt: IF expr ":" suite (ELSE ":" suite)?
        nonlocal i
        j = i
        i += 1
        head = expr()
        expect(":")
        body = suite()
        if K[j] == "with":
            return Node(K_WITH, head, body, L[j], C[j], head.end_line, head.end_col)
        orelse = None
        if K[i] == "else":
            i += 1
            expect(":")
            orelse = suite()
        return Node(K_IF, head, [body, orelse], L[j], C[j], head.end_line, head.end_col)

    def decorators():
        nonlocal i
        out = []
        while K[i] == "@":
            i += 1
            out.append(expr())
            expect(_NL)
        return out

    def funcdef(decos):
        # funcdef: [decorators] DEF NAME LPAR [params] RPAR ["->" expr] ":" suite
        nonlocal i
        def_tok = expect("def")
        name = expect(_NAME)
        expect("(")
        params = []
        while K[i] is _NAME:  # params: param ("," param)* [","];  param: NAME [":" expr]
            p = i
            i += 1
            ann = None
            if K[i] == ":":
                i += 1
                ann = expr()
            params.append(Node(K_NAME, V[p], ann, L[p], C[p], L[p], C[p] + len(V[p])))
            if K[i] != ",":
                break
            i += 1
        expect(")")
        ret = None
        if K[i] == "->":
            i += 1
            ret = expr()
        expect(":")
        body = suite()
        return Node(K_FUNC, V[name], [decos or [], params, ret, body], L[def_tok], C[def_tok], L[name],
                    C[name] + len(V[name]))

    def classdef(decos):
        # classdef: decorators "class" NAME [LPAR RPAR] ":" _NL _INDENT (funcdef | simple_stmt)+ _DEDENT
        nonlocal i
        i += 1
        name = expect(_NAME)
        if K[i] == "(":
            i += 1
            expect(")")
        expect(":")
        expect(_NL)
        expect(_INDENT)
        body = []
        while True:
            k = K[i]
            if k == "@":
                body.append(funcdef(decorators()))
            elif k == "def":
                body.append(funcdef(None))
            else:
                stmt = simple_stmt()
                if stmt is not None:
                    body.append(stmt)
            if K[i] is _DEDENT:
                i += 1
                break
        if body:
            end_line, end_col = body[-1].end_line, body[-1].end_col
        else:
            end_line, end_col = L[name], C[name] + len(V[name])
        return Node(K_CLASS, V[name], [decos, body], L[name], C[name], end_line, end_col)

    def import_name():
        # import_name: NAME ("as" NAME)?
        nonlocal i
        expect(_NAME)
        if K[i] == "as":
            i += 1
            expect(_NAME)

    # -- top level: start: (_NL | import_stmt | classdef | funcdef | top_assign)* -----------------
    out = []
    while True:
        k = K[i]
        if k is _END:
            return out
        if k is _NL:
            i += 1
        elif k == "from":  # from NAME import import_name ("," import_name)* _NL
            i += 1
            expect(_NAME)
            expect("import")
            import_name()
            while K[i] == ",":
                i += 1
                import_name()
            expect(_NL)
        elif k == "import":  # import import_name _NL
            i += 1
            import_name()
            expect(_NL)
        elif k == "@":
            decos = decorators()
            out.append(classdef(decos) if K[i] == "class" else funcdef(decos))
        elif k == "def":
            out.append(funcdef(None))
        elif k is _NAME and K[i + 1] == "=":  # top_assign: NAME "=" expr _NL
            j = i
            i += 2
            value = expr()
            expect(_NL)
            out.append(Node(K_TOP_ASSIGN, V[j], [value], L[j], C[j], value.end_line, value.end_col))
        else:
            raise Fallback
