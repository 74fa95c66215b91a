"""Layering `ir <- ops <- analysis <- parser/passes/runtime <- codegen/visualize/frontend <- cli`: no module imports upward or sideways,
function-level (lazy) imports included; read from the source with `ast`, so nothing is executed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import retrograd

PACKAGE = Path(retrograd.__file__).resolve().parent

# Rank of each top-level part of the package; a module may import parts of lower or equal rank,
# except that the parts of rank 4 are siblings and may not import each other.
RANK = {
    "errors": 0, "gc_pause": 0, "tuning": 0,  # tuning: the parallelism thresholds, read by kernels and runtime
    "ir": 1,
    "ops": 2,
    "kernels": 2.5,  # the public kernel namespace: every op's kernel under its name (reads the registry)
    "analysis": 3,  # may not exist yet
    "parser": 4, "passes": 4, "runtime": 4,
    "codegen": 5, "visualize": 5,  # source code generation (retrograd lower) and pictures (dot, memory plots)
    "frontend": 5,  # TVM interop: builds IR with the ops, prints with the parser's printer
    "training": 5,  # above passes and runtime, beside codegen, below cli
    "distributed": 5.25,  # data-parallel training: a pass over training's train step, its trainer
    "examples": 5.5,  # runnable examples built on training; cli starts them
    "cli": 6, "testing": 6, "__init__": 6, "__main__": 6,
}
SIBLINGS = {"parser", "passes", "runtime"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        parts = list(rel.with_suffix("").parts)
        yield path, parts


def _imports(path: Path, parts: list[str]):
    """(line, imported module) for every import in the file, at any depth, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ["retrograd"] + parts[:-1]  # the package holding the module (itself, for an __init__)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            if module == "retrograd":  # `from retrograd import parser` names a part
                for alias in node.names:
                    yield node.lineno, f"retrograd.{alias.name}"


def _part(module: str) -> str | None:
    bits = module.split(".")
    if bits[0] != "retrograd":
        return None
    return bits[1] if len(bits) > 1 else "__init__"


def _violations(own_parts: set[str] | None = None):
    found = []
    for path, parts in _modules():
        own = parts[0]
        if own_parts is not None and own not in own_parts:
            continue
        assert own in RANK, f"{path}: a new top-level part of the package needs a rank in this test"
        for line, module in _imports(path, parts):
            target = _part(module)
            if target is None or target == own:
                continue
            upward = RANK.get(target, 99) > RANK[own]
            sideways = own in SIBLINGS and target in SIBLINGS
            if upward or sideways:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    return found


def test_scanner_sees_lazy_and_relative_imports(tmp_path):
    src = "import os\n\ndef f():\n    from retrograd.parser import printer\n    from ..passes import x\n" \
          "    from . import y\n    from retrograd import runtime\n"
    p = tmp_path / "m.py"
    p.write_text(src)
    got = sorted(m for _, m in _imports(p, ["ir", "sub", "m"]))
    assert got == ["os", "retrograd", "retrograd.ir.passes", "retrograd.ir.sub", "retrograd.parser",
                   "retrograd.runtime"]


def test_ir_imports_nothing_above_it():
    """retrograd/ir/** may import only errors/gc_pause and itself (not parser, ops, passes, runtime, cli)."""
    banned = ("parser", "ops", "passes", "runtime", "cli", "analysis", "testing")
    bad = []
    for path, parts in _modules():
        if parts[0] != "ir":
            continue
        for line, module in _imports(path, parts):
            if _part(module) in banned or module == "retrograd":
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert bad == []


def test_no_upward_or_sideways_imports():
    assert _violations() == []


def test_script_works_after_importing_the_package():
    mod = retrograd.parse('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n    return x\n')
    assert "def main(x: R.Tensor((2,), dtype=\"float32\"))" in mod.script()
    assert str(mod) == mod.script()


@pytest.mark.parametrize("part", sorted(RANK))
def test_every_rank_is_a_real_part_or_planned(part):
    exists = (PACKAGE / part).is_dir() or (PACKAGE / f"{part}.py").is_file()
    assert exists or part == "analysis"
