"""The fast syntax path (parser/fast_syntax.py) against the LALR parser (syntax.py's `_driver`): the same
nodes, node for node with every source region, on the corpus, on generated programs and on mangled
text; everything it does not read falls back (and errors then come from the LALR parser alone)."""

from __future__ import annotations

import inspect
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from parser.error_cases import CASES
from parser.helpers import mangled

from retrograd.errors import DiagnosticError
from retrograd.parser import parse, syntax
from retrograd.parser.fast_syntax import KEYWORDS, MAX_DEPTH, Fallback, parse_fast, tokens
from retrograd.parser.syntax_nodes import Node
from retrograd.parser.tir import split_tir

CORPUS = sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))


def dump(x):
    """A node tree as plain tuples: kind, payload, children and the full region of every node."""
    if isinstance(x, Node):
        return ("node", x.kind, dump(x.value), dump(x.items), x.line, x.col, x.end_line, x.end_col)
    if isinstance(x, list | tuple):
        return (type(x).__name__, tuple(dump(y) for y in x))
    return (type(x).__name__, repr(x))


def slow(text: str):
    """The LALR parser's nodes and depth, or the error it raises."""
    depth: list = []
    try:
        return dump(syntax._driver().parse(text, depth)), depth
    except Exception as err:  # noqa: BLE001 - any error: the fast path must not have accepted the text
        return "error", type(err).__name__


def fast(text: str):
    """The fast path's nodes and depth, or None when it falls back."""
    depth: list = []
    try:
        return dump(parse_fast(text, depth)), depth
    except Fallback:
        return None


def agree(text: str) -> bool:
    """Asserts the fast path builds what the LALR parser builds; True when it read the text itself."""
    got = fast(text)
    if got is None:
        return False
    assert got == slow(text), text
    return True


def test_keywords_are_the_grammars():
    assert set(syntax._driver().lexer.keywords) == set(KEYWORDS)


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_corpus_nodes_are_the_lalr_parsers(path):
    relax_text, _tir = split_tir(path.read_text(), str(path))
    read = agree(relax_text)
    # Backslash continuations and tabs are left to the LALR parser; everything else is read here.
    assert read or "\\\n" in relax_text or "\t" in relax_text


# -- generated programs: every rule of grammar.lark, in random combinations ---------------------------
class Gen:
    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def name(self) -> str:
        return self.r.choice(["x", "y", "lv0", "R.add", "R.nn.relu", "T.int64", "cls.f", "n", "_a.b_2"])

    def atom(self, d: int) -> str:
        r = self.r
        k = r.randrange(14 if d < 4 else 5)
        if k == 0:
            return self.name()
        if k == 1:
            return r.choice(["0", "7", "1.5", ".25", "3e-07", "2.", "1E5", "12345678901234567890"])
        if k == 2:
            return r.choice(['"float32"', "'a b'", '"esc\\n\\x41"', '""', "'q\\'s'"])
        if k == 3:
            return r.choice(["True", "False", "None"])
        if k == 4:
            return self.name()
        if k == 5:
            return f"({self.expr(d + 1)})"
        if k == 6:
            return r.choice(["()", f"({self.expr(d + 1)},)", f"({self.exprs(d)})", f"({self.exprs(d)},)"])
        if k == 7:
            return r.choice(["[]", f"[{self.exprs(d)}]", f"[{self.exprs(d)},]"])
        if k == 8:
            items = ", ".join(f"{self.expr(d + 1)}: {self.expr(d + 1)}" for _ in range(r.randrange(3)))
            return "{" + items + r.choice(["", ","] if items else [""]) + "}"
        if k in (9, 10, 11):
            return f"{self.atom(d + 1)}({self.args(d)})"
        if k == 12:
            return f"{self.atom(d + 1)}[{self.expr(d + 1)}]"
        return f"(\n{' ' * r.randrange(9)}{self.expr(d + 1)} ,\n  # note\n {self.expr(d + 1)})"

    def args(self, d: int) -> str:
        parts = []
        for _ in range(self.r.randrange(4)):
            parts.append(f"k{self.r.randrange(3)}={self.expr(d + 1)}" if self.r.random() < 0.4 else self.expr(d + 1))
        tail = self.r.choice(["", ","]) if parts else ""
        return ", ".join(parts) + tail

    def exprs(self, d: int) -> str:
        return ", ".join(self.expr(d + 1) for _ in range(self.r.randrange(1, 4)))

    def unary(self, d: int) -> str:
        r = self.r
        k = r.randrange(6)
        if k == 0:
            return f"-{self.unary(d + 1)}" if d < 6 else self.atom(d)
        if k == 1:
            return f"{self.atom(d)} ** {self.unary(d + 1) if d < 6 else self.atom(d)}"
        return self.atom(d)

    def sum(self, d: int) -> str:
        out = self.unary(d)
        for _ in range(self.r.choice([0, 0, 1, 2])):
            out += f" {self.r.choice(['+', '-', '*', '/', '//', '%'])} {self.unary(d + 1)}"
        return out

    def expr(self, d: int = 0) -> str:
        r = self.r
        if d < 5 and r.random() < 0.05:
            params = r.choice(["", "i", "i, j"])
            return f"lambda {params}: {self.expr(d + 1)}"
        out = self.sum(d)
        if r.random() < 0.15:
            for _ in range(r.randrange(1, 3)):
                out += f" {r.choice(['==', '!=', '<', '>', '<=', '>='])} {self.sum(d + 1)}"
        return out

    def exprlist(self) -> str:
        r = self.r
        k = r.randrange(5)
        if k == 0:
            return f"{self.expr()}, {self.expr()}" + r.choice(["", ","])
        if k == 1:
            return f"{self.expr()},"
        return self.expr()

    def simple(self, ind: str) -> str:
        r = self.r
        k = r.randrange(6)
        if k == 0:
            return f"{ind}return" + r.choice(["", " " + self.exprlist()])
        if k == 1:
            return f"{ind}pass"
        if k == 2:
            return f"{ind}{self.exprlist()}"
        ann = f": {self.expr()}" if r.random() < 0.5 else ""
        return f"{ind}v{r.randrange(9)}{ann} = {self.exprlist()}" + r.choice(["", "  # c", ""])

    def suite(self, ind: str, d: int) -> list[str]:
        r = self.r
        lines = []
        for _ in range(r.randrange(1, 5)):
            k = r.randrange(8)
            if k == 0 and d < 3:
                lines.append(f"{ind}with {self.expr()}:")
                lines += self.suite(ind + "    ", d + 1)
            elif k == 1 and d < 3:
                lines.append(f"{ind}if {self.expr()}:")
                lines += self.suite(ind + "  ", d + 1)
                if r.random() < 0.5:
                    lines.append(f"{ind}else:")
                    lines += self.suite(ind + "      ", d + 1)
            elif k == 2:
                lines.append(r.choice(["", "   ", f"{ind}# a comment", "# at column one"]))
            else:
                lines.append(self.simple(ind))
        if not any(line.strip() and not line.strip().startswith("#") for line in lines):
            lines.append(f"{ind}pass")
        return lines

    def funcdef(self, ind: str) -> list[str]:
        r = self.r
        lines = [f"{ind}@{self.expr()}" for _ in range(r.randrange(3))]
        params = ", ".join(f"p{i}" + (f": {self.expr()}" if r.random() < 0.6 else "") for i in range(r.randrange(4)))
        if params and r.random() < 0.2:
            params += ","
        ret = f" -> {self.expr()}" if r.random() < 0.5 else ""
        lines.append(f"{ind}def f{r.randrange(9)}({params}){ret}:")
        return lines + self.suite(ind + "    ", 0)

    def module(self) -> str:
        r = self.r
        lines = []
        for _ in range(r.randrange(1, 5)):
            k = r.randrange(6)
            if k == 0:
                lines.append(r.choice(["from tvm.script import relax as R", "import numpy", "import a.b as c",
                                       "from x import y, z as w"]))
            elif k == 1:
                lines.append(f"n{r.randrange(3)} = {self.expr()}")
            elif k == 2:
                lines += [f"@{self.expr()}" for _ in range(r.randrange(1, 3))]
                lines.append(r.choice(["class Module:", "class M():"]))
                for _ in range(r.randrange(1, 3)):
                    lines += self.funcdef("    ") if r.random() < 0.7 else [self.simple("    ")]
            elif k == 3:
                lines.append(r.choice(["", "# comment", "   "]))
            else:
                lines += self.funcdef("")
        return "\n".join(lines) + r.choice(["\n", "", "\n\n", "  # end", "   ", "\n  "])


def test_generated_programs_give_the_lalr_parsers_nodes():
    read = 0
    for seed in range(400):
        text = Gen(seed).module()
        if seed % 7 == 0:  # Windows line ends
            text = text.replace("\n", "\r\n")
        read += agree(text)
    # Generated programs are valid and indented with spaces: all are read by the fast path (the
    # comparison above is not vacuous).
    assert read == 400


def test_the_benchmark_script_is_read_by_the_fast_path():
    from models import mlp_text  # benchmarks/models.py (benchmarks/ is on pytest's pythonpath)

    assert agree(mlp_text(30))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mangled())
def test_mangled_text_is_read_alike_or_left_to_the_lalr_parser(text):
    relax_text, _tir = split_tir(text, "<m>") if "@T.prim_func" not in text else (text, [])
    agree(relax_text)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error_cases_fall_back(case):
    text = case[1]
    if slow(text)[0] == "error":
        assert fast(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "x = 1\n\ty = 2\n",  # a tab
        "x = R.add(a, \\\n b)\n",  # a backslash continuation
        'x = """doc"""\n',  # a long string
        "x = 1\r y = 2\n",  # a carriage return alone
        "x = " + "9" * 101 + "\n",  # an integer literal too long
        'x = "\\x4"\n',  # a bad escape
        "  x = 1\ny = 2\n",  # a dedent below the first line
        "x = (" + "(" * 300 + "1" + ")" * 301 + "\n",  # brackets too deep
        "x = " + "-" * 300 + "1\n",  # unary minus signs too deep
        "x = (1\n",  # a bracket never closed
        "x = 1)\n",  # unmatched
        "x = 1 $ 2\n",  # no token starts with $
    ],
)
def test_what_the_fast_path_does_not_read_falls_back(text):
    assert fast(text) is None
    with pytest.raises(DiagnosticError):
        parse(text)


def test_deep_nests_fall_back_and_parse():
    depth = MAX_DEPTH + 40
    pow_chain = "x = " + " ** ".join(["2"] * 150) + "\n"
    assert fast(pow_chain) is None
    assert (dump(syntax.parse_syntax(pow_chain, "<s>")), [0]) == slow(pow_chain)
    long_chain = "x = " + " ** ".join(["2"] * 5000) + "\n"
    assert syntax.parse_syntax(long_chain, "<s>")[0].items[0].kind == "pow"
    body = "".join("    " * (d + 1) + "if c:\n" for d in range(depth)) + "    " * (depth + 1) + "pass\n"
    text = "def f(c):\n" + body
    assert fast(text) is None
    assert syntax.parse_syntax(text, "<s>") is not None


def test_little_stack_left_falls_back():
    text = "x = " + "(" * 50 + "1" + ")" * 50 + "\n"
    expected = slow(text)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 40)  # room for the LALR loop, not for 50 brackets read by descent
    try:
        got = dump(syntax.parse_syntax(text, "<s>"))
    finally:
        sys.setrecursionlimit(limit)
    assert (got, [0]) == expected


def test_tokens_track_lines_and_columns_through_brackets_and_comments():
    K, V, L, C, deepest = tokens("a = f(1,\n      2)  # c\n\nb = 3\n")
    real = [(k, v, ln, c) for k, v, ln, c in zip(K, V, L, C) if k not in ("\n", "$END", "INDENT", "DEDENT")]
    assert real == [("NAME", "a", 1, 1), ("=", "=", 1, 3), ("NAME", "f", 1, 5), ("(", "(", 1, 6),
                    ("NUMBER", "1", 1, 7), (",", ",", 1, 8), ("NUMBER", "2", 2, 7), (")", ")", 2, 8),
                    ("NAME", "b", 4, 1), ("=", "=", 4, 3), ("NUMBER", "3", 4, 5)]
    assert deepest == 0


def _lalr_tokens(text: str) -> list:
    """ScriptLexer's tokens as (kind, value, line, column) in the fast lexer's terms; layout tokens by kind."""
    layout = {"_NL": "\n", "_INDENT": "INDENT", "_DEDENT": "DEDENT"}
    out = []
    for tok in syntax._driver().lexer.lex(text):
        if tok.type in layout:
            out.append((layout[tok.type],))
        else:
            kind = tok.type if tok.type in ("NAME", "NUMBER", "STRING") else tok.value
            out.append((kind, tok.value, tok.line, tok.column))
    return out


def _fast_tokens(text: str) -> list:
    K, V, L, C, _deepest = tokens(text)
    return [(k,) if k in ("\n", "INDENT", "DEDENT") else (k, v, ln, c) for k, v, ln, c in zip(K, V, L, C) if k != "$END"]


def test_tokens_are_the_lalr_lexers():
    texts = [split_tir(p.read_text(), str(p))[0] for p in CORPUS] + [Gen(seed).module() for seed in range(100)]
    texts.append("x = a == b != c <= d >= e < f > g -> h ** i * j // k / l % m - n + o\n")
    compared = 0
    for text in texts:
        try:
            fast_tokens = _fast_tokens(text)
        except Fallback:
            continue
        assert fast_tokens == _lalr_tokens(text), text
        compared += 1
    assert compared >= len(texts) - 2
