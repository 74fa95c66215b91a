"""Shared by the parser tests: mangled scripts (corpus files with random deletions, insertions and
replacements of script fragments), a hypothesis strategy."""

from __future__ import annotations

import keyword
import re
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


# The printer's naming rule, written plainly for the printer tests to compare against.
RESERVED = set(keyword.kwlist) | {"R", "T", "I", "cls", "metadata", "Module", "tvm", "float"}


def plain_base(hint: str) -> str:
    """A hint made a name: bad characters to _, a leading digit prefixed, reserved words suffixed."""
    base = hint
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", base):
        base = re.sub(r"[^A-Za-z0-9_]", "_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
    return base + "_" if base in RESERVED else base


class PlainNames:
    """First come keeps its base; later ones take the smallest free `base_k`."""

    def __init__(self):
        self.names, self.used = {}, set()

    def __call__(self, var) -> str:
        if var not in self.names:
            base = plain_base(var.name_hint)
            name, k = base, 0
            while name in self.used:
                k += 1
                name = f"{base}_{k}"
            self.used.add(name)
            self.names[var] = name
        return self.names[var]
