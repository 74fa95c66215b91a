"""The test tree stays navigable: files are named for the behaviour they test (never after an issue, an audit
or a campaign), shared code lives in each area's helpers and is imported as `area.module` through pyproject's
pytest `pythonpath` (never by editing sys.path), and no test module imports from another test module (its
tests would be collected twice) or an underscore name from a sibling module.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# Files under these folders are test data (TVMScript texts read as strings), never imported.
DATA = {"corpus"}
# Words that name where a test came from rather than what it checks.
ORIGIN = re.compile(r"issue|audit|killer|mutant|mutation|hardening|regression|defect|bugfix|fixes")


def python_files():
    return [p for p in sorted(TESTS.rglob("*.py")) if DATA.isdisjoint(p.relative_to(TESTS).parts)]


def origin_names(paths) -> list[str]:
    return [str(p) for p in paths if ORIGIN.search(Path(p).stem.lower())]


def sys_path_edits(source: str, filename: str) -> list[str]:
    """Every use of sys.path (insert, append, assignment, ...) and of site.addsitedir."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in (("sys", "path"), ("site", "addsitedir")):
                found.append((node.lineno, f"{filename}:{node.lineno}: {node.value.id}.{node.attr} (pyproject's pytest pythonpath is the one route)"))
    return [message for _, message in sorted(found)]


def resolve(module: str, tests: Path = TESTS) -> Path | None:
    """The file under tests/ that an absolute import of `module` reaches, or None (not a test-tree module)."""
    base = tests.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def import_problems(source: str, path: Path, tests: Path = TESTS) -> list[str]:
    """Imports of test modules, of underscore names from test-tree modules, relative imports, and bare
    imports of a sibling module inside an area package (which only the old sys.path edits made work)."""
    rel = path.relative_to(tests)
    found = []
    for node in sorted(ast.walk(ast.parse(source, str(rel))), key=lambda n: getattr(n, "lineno", 0)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"{rel}:{node.lineno}: relative import (write `from area.module import name`)")
                continue
            modules, names = [node.module], [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            modules, names = [a.name for a in node.names], []
        else:
            continue
        for module in modules:
            if module == "tests" or module.startswith("tests."):
                found.append(f"{rel}:{node.lineno}: imports '{module}' (tests/ is on the path: drop the 'tests.' prefix)")
                continue
            target = resolve(module, tests)
            if target is None:
                sibling = path.parent / f"{module.split('.')[0]}.py"
                if path.parent != tests and sibling.is_file():
                    area = ".".join(path.parent.relative_to(tests).parts)
                    found.append(f"{rel}:{node.lineno}: imports '{module}' by its bare name (write `{area}.{module}`)")
                continue
            if target.stem.startswith("test_"):
                found.append(f"{rel}:{node.lineno}: imports the test module '{module}' (move what it shares to the area's helpers)")
            private = [n for n in names if n.startswith("_")]
            if private:
                found.append(f"{rel}:{node.lineno}: imports underscore names {private} from '{module}' (make them public)")
    return found


def test_no_test_file_is_named_after_an_issue_or_an_audit():
    assert origin_names(python_files()) == [], "name test files for the behaviour they test"


def test_the_origin_check_catches_issue_and_audit_names():
    named = ["tests/ops/test_kernels_issue9.py", "tests/ops/test_mutation_killers.py", "tests/x/test_audit_fixes.py",
             "tests/parser/test_hardening.py", "tests/parser/test_fuzz_defect_classes.py", "tests/ops/test_kernels_pool.py",
             "tests/parser/test_parser_fuzz.py", "tests/parser/test_parser_edge_inputs.py"]
    assert origin_names(named) == named[:5]


def test_no_test_file_edits_sys_path():
    found = [f for p in python_files() for f in sys_path_edits(p.read_text(), str(p.relative_to(TESTS)))]
    assert found == []


def test_the_sys_path_check_catches_edits():
    source = "import sys, site\nsys.path.insert(0, 'x')\nsys.path = []\nsite.addsitedir('y')\nimport os\nos.path.join('a')\n"
    assert [f.split(": ")[0] for f in sys_path_edits(source, "f.py")] == ["f.py:2", "f.py:3", "f.py:4"]


def test_tests_share_code_through_helpers_not_test_modules():
    found = [f for p in python_files() for f in import_problems(p.read_text(), p)]
    assert found == []


def test_the_import_check_catches_test_modules_private_names_and_bare_siblings(tmp_path):
    area = tmp_path / "ops"
    area.mkdir()
    for name in ("__init__.py", "helpers.py", "test_a.py"):
        (area / name).write_text("")
    source = ("from ops.test_a import thing\nfrom ops.helpers import _hidden, shown\nfrom ops.helpers import shown\n"
              "from helpers import shown\nfrom .helpers import shown\nimport numpy\nfrom retrograd import parse\n"
              "from tests.ops.helpers import shown\n")
    found = import_problems(source, area / "test_b.py", tmp_path)
    assert [f.split(": ")[0] for f in found] == ["ops/test_b.py:1", "ops/test_b.py:2", "ops/test_b.py:4", "ops/test_b.py:5",
                                                 "ops/test_b.py:8"]
    assert "test module" in found[0] and "_hidden" in found[1] and "ops.helpers" in found[2] and "relative" in found[3]
    assert "'tests.' prefix" in found[4]


def test_every_area_is_a_package_on_the_pythonpath():
    """Areas import each other's helpers as `ops.helpers`, `passes.checkpoint.helpers`: each folder of tests
    is a package, and pyproject puts tests/ (and benchmarks/, for the model scripts) on pytest's path."""
    folders = {p.parent for p in python_files() if p.parent != TESTS}
    assert sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").is_file()) == []
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert {"tests", "benchmarks"} <= set(config["pythonpath"])
