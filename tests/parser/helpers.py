"""Shared by the parser tests: mangled scripts (corpus files with random deletions, insertions and
replacements of script fragments), a hypothesis strategy."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

TEXTS = [p.read_text() for p in sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))]
PIECES = list("()[]{},:=.+-*/%\"'#\\\n \t0123456789xyzRT_@") + [
    "R.", "def ", "if c:", "else:", "with ", "return ", "None", "True", "R.const(", "R.Tensor(", "\n    ",
    "metadata", "cls.", "R.output(", "T.int64()", "R.add(x, ", '"float32"', "@R.function\n",
]


@st.composite
def mangled(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(["delete", "insert", "replace"]))
        if kind == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 6)) :]
        else:
            piece = draw(st.sampled_from(PIECES))
            cut = draw(st.integers(1, 4)) if kind == "replace" else 0
            text = text[:i] + piece + text[i + cut :]
    return text
