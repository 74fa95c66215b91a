"""The test tree reaches optional packages only through tests/optional.py, so a fresh clone with only
`pip install -e ".[test]"` skips their tests instead of failing (an import before the skip fails).

Optional is decided by pyproject: anything that is not the standard library, a runtime dependency,
the test framework itself (pytest, hypothesis) or the project's own code must go through `need(...)`.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# Files under these folders are test data (TVMScript texts read as strings), never imported.
DATA = {"corpus"}
FRAMEWORK = {"pytest", "_pytest", "hypothesis"}
# Distribution names whose import name differs.
IMPORT_NAMES = {"attrs": {"attrs", "attr"}}


def runtime_modules() -> set[str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = set()
    for dep in deps:
        dist = re.match(r"[A-Za-z0-9_.-]+", dep).group(0).lower().replace("-", "_")
        names |= IMPORT_NAMES.get(dist, {dist})
    return names


def local_modules() -> set[str]:
    """The project's package, the test areas (packages under tests/: ops, passes, ...) and the helper modules
    tests import by name (strategies, optional, the benchmarks' models, ...)."""
    names = {"retrograd", "tests"}
    for folder in ("tests", "benchmarks", "tools", "examples"):
        names |= {path.stem for path in (ROOT / folder).rglob("*.py")}
    names |= {path.parent.name for path in TESTS.rglob("__init__.py")}
    return names


def allowed_modules() -> set[str]:
    return set(sys.stdlib_module_names) | runtime_modules() | FRAMEWORK | local_modules()


def violations(source: str, filename: str, allowed: set[str]) -> list[str]:
    """Each import of a module outside `allowed` (and each pytest.importorskip / import_module of one)."""
    tree = ast.parse(source, filename)
    # A module the test writes itself ("user_passes.py" in tmp_path) is its own, not an optional package.
    written = {Path(n.value).stem for n in ast.walk(tree) if isinstance(n, ast.Constant) and str(n.value).endswith(".py")}
    allowed = allowed | written
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called == "importorskip":
                found.append((node.lineno, f"{filename}:{node.lineno}: pytest.importorskip (use optional.need)"))
                continue
            if called in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    names = [arg.value]
        for name in names:
            if name.split(".", 1)[0] not in allowed:
                found.append((node.lineno, f"{filename}:{node.lineno}: imports optional '{name}' (use optional.need)"))
    return [message for _, message in sorted(found)]


def test_no_test_imports_an_optional_package_but_through_optional_py():
    allowed = allowed_modules()
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS)
        if rel.parts[0] in DATA or rel == Path("optional.py"):
            continue
        found += violations(path.read_text(), str(rel), allowed)
    assert not found, "\n".join(found)


def test_the_rule_sees_every_way_to_import():
    allowed = allowed_modules()
    source = (
        "import numpy\nimport os.path\nfrom retrograd.ir import expr\nfrom . import sibling\n"
        "import pytest\nfrom optional import need\ntorch = need('torch')\n"
        "def f():\n    import torch\n"
        "def g():\n    from tvm.script import relax as R\n"
        "def h():\n    pytest.importorskip('onnx')\n"
        "def k():\n    import importlib\n    importlib.import_module('scipy.stats')\n"
        "import matplotlib.pyplot as plt\n"
    )
    found = violations(source, "t.py", allowed)
    assert [line.split(": ", 1)[0] for line in found] == ["t.py:9", "t.py:11", "t.py:13", "t.py:16", "t.py:17"]
    assert "'torch'" in found[0] and "'tvm.script'" in found[1] and "importorskip" in found[2]
    assert "'scipy.stats'" in found[3] and "'matplotlib.pyplot'" in found[4]


def test_optional_is_decided_by_pyproject():
    allowed = allowed_modules()
    assert {"numpy", "attrs", "attr", "lark"} <= allowed
    for name in ("torch", "tvm", "onnx", "onnxruntime", "torchvision", "transformers", "scipy", "matplotlib",
                 "ml_dtypes", "plotly", "pygments", "graphviz", "threadpoolctl", "tqdm"):
        assert name not in allowed, name
