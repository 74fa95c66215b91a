"""Diagnostics: every user-facing error, located by a span and rendered with a caret."""

from __future__ import annotations

import difflib
from contextlib import contextmanager
import warnings

import attrs


@attrs.frozen(eq=False)
class Span:
    """A region of source text; lines and columns are 1-based, end_col exclusive."""

    source_name: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None
    # The whole source text, kept so the message can quote the offending line.
    source: str | None = attrs.field(default=None, repr=False)

    def source_line(self) -> str | None:
        """Line `line` of the source, counting only "\\n" as the lexer does (not str.splitlines())."""
        if self.source is None or self.line < 1:
            return None
        text, start = self.source, 0
        for _ in range(self.line - 1):
            start = text.find("\n", start) + 1
            if start == 0:
                return None
        end = text.find("\n", start)
        line = text[start:] if end == -1 else text[start:end]
        return line[:-1] if line.endswith("\r") else line

    def __str__(self) -> str:
        return f"{self.source_name}:{self.line}:{self.col}"


class DiagnosticError(Exception):
    """Base of all retrograd errors shown to users: a message and, where known, a span."""

    kind = "error"
    # The pass option whose value is at fault, if any: a pipeline that gave it points there.
    option: str | None = None

    def __init__(self, message: str, span: Span | None = None, notes: list[str] | None = None):
        self.message = message
        self.span = span
        self.notes = list(notes or [])
        super().__init__(self.render())

    def render(self) -> str:
        # A message or note quoting a 10,000-character name, say, is cut in the middle.
        message = _cut(self.message, _MESSAGE_WIDTH)
        notes = [_cut(n, _NOTE_WIDTH) for n in self.notes]
        if self.span is None:
            head = f"{self.kind}: {message}"
            return "\n".join([head] + [f"  note: {n}" for n in notes])
        out = [f"{self.span}: {self.kind}: {message}"]
        text = self.span.source_line()
        if text is not None:
            width = 1
            if self.span.end_col is not None and (self.span.end_line in (None, self.span.line)):
                width = max(1, self.span.end_col - self.span.col)
            col = max(1, self.span.col)
            text, col, width = _window(text, col, width)
            out.append(f"  {text}")
            # Tabs in the prefix keep the caret aligned with the token.
            prefix = "".join(c if c == "\t" else " " for c in text[: col - 1])
            out.append(f"  {prefix}{'^' * width}")
        out.extend(f"  note: {n}" for n in notes)
        return "\n".join(out)

    def __str__(self) -> str:
        return self.render()

    def about_option(self, name: str | None) -> "DiagnosticError":
        """This error, marked as caused by the value of the pass option `name`."""
        self.option = name
        return self

    def located(self, span: Span) -> "DiagnosticError":
        """The same error kind, message and notes, located at `span`."""
        new = type(self).__new__(type(self))
        for key, value in vars(self).items():
            setattr(new, key, value)
        new.span = span
        Exception.__init__(new, new.render())
        return new


@contextmanager
def noting(note: str):
    """A DiagnosticError raised inside stays located at the offending part and gains `note` (once),
    which says what that part belongs to (a binding, a parameter)."""
    try:
        yield
    except DiagnosticError as err:
        if note not in err.notes:
            err.notes.append(note)
        raise


# Messages and notes longer than these are cut in the middle.
_MESSAGE_WIDTH = 10000
_NOTE_WIDTH = 2000


def _cut(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    keep = width // 10
    return text[: width - keep - 5] + " ... " + text[-keep:]
# Quoted lines longer than this are cut around the caret (a 25,000-parameter signature is 1 MB).
_QUOTE_WIDTH = 160


def _window(text: str, col: int, width: int) -> tuple[str, int, int]:
    """(quoted text, caret column, caret width) with a long line trimmed to a window around the caret."""
    if len(text) <= _QUOTE_WIDTH:
        return text, col, width
    width = min(width, _QUOTE_WIDTH // 2)
    start = max(0, min(col - 1 - _QUOTE_WIDTH // 4, len(text) - _QUOTE_WIDTH))
    end = start + _QUOTE_WIDTH
    head = "..." if start > 0 else ""
    tail = "..." if end < len(text) else ""
    return head + text[start:end] + tail, col - start + len(head), width


class ScriptWarning(UserWarning):
    """The parser read something it does not keep or cannot run (dropped attributes, TIR functions)."""


def warn_script(message: str) -> None:
    """A ScriptWarning attributed to the first caller outside retrograd (its line, not ours, is shown)."""
    import sys
    from pathlib import Path

    package = str(Path(__file__).resolve().parent)
    level, frame = 2, sys._getframe(1)  # stacklevel 2: warn_script's caller
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(package):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, ScriptWarning, stacklevel=level)


class ParseError(DiagnosticError):
    """The text does not follow the script grammar."""

    kind = "syntax error"


class NameError_(DiagnosticError):
    """A name is undefined, defined twice, or used out of its scope."""

    kind = "name error"


class UnsupportedError(DiagnosticError):
    """A construct that is valid TVMScript but outside retrograd's subset."""

    kind = "unsupported"


class OpError(DiagnosticError):
    """Unknown op, unknown or ill-typed attribute, wrong number of arguments."""

    kind = "op error"


class TypeInferenceError(DiagnosticError):
    """Shapes or dtypes of an op's arguments do not fit the op."""

    kind = "type error"


class WellFormedError(DiagnosticError):
    """A module breaks an IR invariant; carries every problem found."""

    kind = "ill-formed"

    def __init__(self, problems, span: Span | None = None):
        self.problems = list(problems)
        message = f"{len(self.problems)} problem(s):\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(message, span)


class GradientError(DiagnosticError):
    """The Gradient pass cannot differentiate what it was asked to."""

    kind = "gradient error"


class PassError(DiagnosticError):
    """A pass was misconfigured or produced an invalid module."""

    kind = "pass error"


class KernelError(DiagnosticError):
    """A kernel got values it cannot compute on (out-of-range index or target, ...)."""

    kind = "kernel error"


class ExecutionError(DiagnosticError):
    """Running a built module failed: bad arguments, or a kernel failure located at its binding."""

    kind = "execution error"


class TrainingError(DiagnosticError):
    """Training was set up or driven wrongly: a non-scalar loss, parameters missing or of the wrong shape or dtype."""

    kind = "training error"


class UsageError(DiagnosticError):
    """The command line asks for something that does not exist or cannot be done (a name, a file kind)."""

    kind = "error"


def did_you_mean(name: str, choices) -> str:
    """"; did you mean 'x'?" naming the choices closest to `name`, or "" when none is close."""
    close = difflib.get_close_matches(name, [str(c) for c in choices], n=3) if isinstance(name, str) else []
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
