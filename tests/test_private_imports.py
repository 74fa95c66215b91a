"""No module of retrograd/ imports an underscore-prefixed name from another module (make it public or
move it): read from the source with `ast`, as tests/test_layering.py reads the import direction."""

from __future__ import annotations

import ast
from pathlib import Path

import retrograd

PACKAGE = Path(retrograd.__file__).resolve().parent


def private_imports(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, dotted name) of every imported name or module path with a part starting with `_`, at
    any depth (lazy imports too); `__future__` and dunders (`__version__`) are not private."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            paths = [f"{module}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Import):
            paths = [a.name for a in node.names]
        else:
            continue
        for path in paths:
            if any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in path.split(".")):
                found.append((node.lineno, path))
    return found


def test_the_scanner_sees_every_form():
    src = ("from __future__ import annotations\nfrom a.b import c, _d\nimport a._e\nfrom . import _f\n"
           "from a import __version__\nfrom x import y as _y\n\ndef g():\n    from h import _i\n")
    assert sorted(private_imports(src)) == [(2, "a.b._d"), (3, "a._e"), (4, "._f"), (9, "h._i")]


def test_no_module_imports_a_private_name():
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}"
           for path in sorted(PACKAGE.rglob("*.py"))
           for line, name in private_imports(path.read_text(), str(path))]
    assert bad == []
