"""Sequential and the pipeline text: `"gradient(func=main, target_index=0), dce"` -> a Sequential of registered passes."""

from __future__ import annotations

import re
from typing import Any

from retrograd.errors import DiagnosticError, PassError, Span
from retrograd.ir.strings import EscapeError, unescape
from retrograd.ir.module import IRModule
from retrograd.passes.infra.context import PassContext
from retrograd.passes.infra.pass_base import Pass, PassInfo
from retrograd.passes.infra.registry import entry, get_pass, instantiate, pass_options

class Sequential(Pass):
    """Runs passes in order; a member runs when the context enables it (opt_level, required, disabled)."""

    _instrumented = False

    def __init__(self, passes=(), name: str = "sequential", opt_level: int = 0, required=(), spans=None,
                 option_spans=None):
        super().__init__(PassInfo(name, opt_level, required))
        self.passes = list(passes)
        # Where each pass was written in pipeline text: its unlocated errors point there, and an error
        # naming one of its options (`err.option`) points at that option.
        self.spans = list(spans) if spans is not None else [None] * len(self.passes)
        self.option_spans = list(option_spans) if option_spans is not None else [{} for _ in self.passes]
        for p in self.passes:
            if not isinstance(p, Pass):
                raise PassError(f"Sequential '{name}' got {p!r}, which is not a Pass")

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p, span, options in zip(self.passes, self.spans, self.option_spans):
            if not ctx.pass_enabled(p.info):
                continue
            try:
                for req in p.required:
                    req_pass = get_pass(req)
                    if ctx.pass_enabled(req_pass.info):
                        mod = req_pass(mod, ctx)
                mod = p(mod, ctx)
            except DiagnosticError as err:
                at_option = options.get(getattr(err, "option", None))
                if at_option is not None:
                    located = err.located(at_option)
                    if err.span is not None:
                        located.notes = [*err.notes, f"the function is at {err.span}"]
                        Exception.__init__(located, located.render())
                    raise located from None
                if err.span is None and span is not None:
                    raise err.located(span) from None
                raise
        return mod

    def __repr__(self) -> str:
        return f"<Sequential {self.name}: {', '.join(repr(p.info) for p in self.passes)}>"


_PIPE_TOKEN = re.compile(
    r"""\s*+(?:
        (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_\d.%]))
      | (?P<qty>(?:\d+\.\d*|\.\d+|\d+)(?:%[A-Za-z]*|[A-Za-z]+))
      | (?P<word>[A-Za-z_][A-Za-z0-9_.\-]*)
      | (?P<punct>[(),=\[\]])
    )""",
    re.VERBOSE,
)


_MAX_NESTING = 50


class _PipelineParser:
    """`name(opt=value, ...), name, ...`; values: numbers, quantities (40%, 50%act, 12MiB, kept as text),
    true/false/none, names, strings, [lists]."""

    def __init__(self, text: str, source_name: str):
        self.text = text
        self.source_name = source_name
        self.toks: list[tuple[str, Any, int, int]] = []
        pos = 0
        while True:
            m = _PIPE_TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                rest = text[pos:]
                if rest.strip():
                    col = pos + (len(rest) - len(rest.lstrip()))
                    raise self.error(f"unexpected character {text[col]!r}", col, col + 1)
                break
            kind = m.lastgroup
            start, end = m.start(kind), m.end(kind)
            self.toks.append((kind, m.group(kind), start, end))
            pos = m.end()
        self.i = 0

    def span(self, start: int, end: int) -> Span:
        return Span(self.source_name, 1, start + 1, 1, max(end, start + 1) + 1, source=self.text)

    def error(self, message: str, start: int, end: int | None = None) -> PassError:
        return PassError(message, self.span(start, end if end is not None else start + 1))

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "", len(self.text), len(self.text))

    def take(self, kind: str, value: str | None = None):
        tok = self.peek()
        if tok[0] != kind or (value is not None and tok[1] != value):
            want = repr(value) if value else {"word": "a pass name", "eof": "the end"}.get(kind, kind)
            got = "the end of the pipeline" if tok[0] == "eof" else repr(tok[1])
            raise self.error(f"expected {want}, got {got}", tok[2], tok[3])
        self.i += 1
        return tok

    def pipeline(self) -> list[tuple]:
        items = []
        if self.peek()[0] == "eof":
            return items
        while True:
            items.append(self.item())
            tok = self.peek()
            if tok[0] == "eof":
                return items
            self.take("punct", ",")

    def item(self):
        _, name, start, end = self.take("word")
        args, kwargs, spans = [], {}, {}
        if self.peek()[:2] == ("punct", "("):
            self.take("punct", "(")
            if self.peek()[:2] != ("punct", ")"):
                while True:
                    tok = self.peek()
                    after = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
                    if tok[0] == "word" and after is not None and after[:2] == ("punct", "="):
                        self.i += 2
                        vstart = self.peek()[2]
                        value = self.value()
                        if tok[1] in kwargs:
                            raise self.error(f"option '{tok[1]}' given twice", tok[2], tok[3])
                        kwargs[tok[1]] = value
                        spans[tok[1]] = self.span(tok[2], max(self.toks[self.i - 1][3], vstart))
                    else:
                        if kwargs:
                            raise self.error("positional option after keyword options", tok[2], tok[3])
                        args.append(self.value())
                        spans[len(args) - 1] = self.span(tok[2], max(self.toks[self.i - 1][3], tok[3]))
                    if self.peek()[:2] == ("punct", ","):
                        self.take("punct", ",")
                        continue
                    self.take("punct", ")")
                    break
            else:
                self.take("punct", ")")
        return name, self.span(start, end), args, kwargs, spans

    def value(self, depth: int = 0):
        kind, text, start, end = self.peek()
        if kind == "punct" and text == "[":
            if depth >= _MAX_NESTING:
                raise self.error(f"option lists are nested too deeply (more than {_MAX_NESTING} levels)", start, end)
            self.i += 1
            items = []
            if self.peek()[:2] == ("punct", "]"):
                self.i += 1
                return items
            while True:
                items.append(self.value(depth + 1))
                if self.peek()[:2] == ("punct", ","):
                    self.i += 1
                    if self.peek()[:2] == ("punct", "]"):
                        self.i += 1
                        return items
                    continue
                self.take("punct", "]")
                return items
        self.i += 1
        if kind == "str":
            try:
                return unescape(text[1:-1])
            except EscapeError as err:
                raise self.error(str(err), start + 1 + err.offset, start + 3 + err.offset) from None
        if kind == "qty":
            return text  # a number with a unit (40%, 12MiB): the pass reads it
        if kind == "num":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "word":
            lowered = text.lower()
            if lowered == "true":
                return True
            if lowered == "false":
                return False
            if lowered == "none":
                return None
            return text
        got = "the end of the pipeline" if kind == "eof" else repr(text)
        raise self.error(f"expected an option value, got {got}", start, end)


def parse_pipeline(text: str, source_name: str = "<pipeline>") -> Sequential:
    """Build a Sequential from `"gradient(func=main, target_index=0), dce"`, converting option types.

    Errors (unknown pass or option, ill-typed value, bad syntax) are PassErrors pointing into the text.
    """
    parser = _PipelineParser(text, source_name)
    passes, item_spans, option_spans = [], [], []
    for name, span, args, kwargs, spans in parser.pipeline():
        found = entry(name, span)
        passes.append(instantiate(found, args, kwargs, convert=True, spans=spans, span=span))
        params = list(pass_options(name))
        option_spans.append(
            {found.aliases.get(k, k) if isinstance(k, str) else params[k]: s for k, s in spans.items()}
        )
        last = parser.toks[parser.i - 1][3] if parser.i else span.end_col
        item_spans.append(Span(source_name, 1, span.col, 1, max(last + 1, span.end_col), source=text))
    return Sequential(passes, name="pipeline", spans=item_spans, option_spans=option_spans)
