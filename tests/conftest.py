"""Suite-wide checks: an installed oracle (PyTorch, TVM, onnx, ...) must really be used, never silently skipped."""

from __future__ import annotations

import importlib.util
import os

import pytest

# Every package of pyproject's `oracle` extra: installed, its tests must run.
ORACLES = ("torch", "tvm", "onnx", "onnxruntime", "torchvision", "transformers", "ml_dtypes", "matplotlib", "plotly")
# CI sets this: the oracles are then required, so a failed install fails the run instead of skipping.
REQUIRE = os.environ.get("RETROGRAD_REQUIRE_ORACLES", "") not in ("", "0")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def oracle_skip_problem(reason: str, installed=_installed, require: bool = REQUIRE) -> str | None:
    """Why a skip with this reason is not acceptable, or None. importorskip's reasons read
    "could not import 'tvm.script': ..."; a skip of an oracle that is installed (or required) hides its tests."""
    marker = "could not import '"
    if marker not in reason:
        return None
    module = reason.split(marker, 1)[1].split("'", 1)[0]
    top = module.split(".", 1)[0]
    if top not in ORACLES:
        return None
    if installed(top):
        return f"oracle '{top}' is installed but '{module}' failed to import: {reason}"
    if require:
        return f"oracle '{top}' is required (RETROGRAD_REQUIRE_ORACLES) but not installed: {reason}"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple):
        problem = oracle_skip_problem(str(rep.longrepr[2]))
        if problem is not None:
            rep.outcome = "failed"
            rep.longrepr = problem


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """The same rule for a module that skips as a whole (`torch = need("torch")` at module level)."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and isinstance(rep.longrepr, tuple):
        problem = oracle_skip_problem(str(rep.longrepr[2]))
        if problem is not None:
            rep.outcome = "failed"
            rep.longrepr = problem
