"""No module of retrograd/ is over 600 lines: a module that grows past it holds two things, split it by concept."""

from __future__ import annotations

from pathlib import Path

import retrograd

PACKAGE = Path(retrograd.__file__).resolve().parent
LIMIT = 600


def test_no_module_is_over_the_limit():
    long = {str(p.relative_to(PACKAGE.parent)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > LIMIT}
    assert long == {}
