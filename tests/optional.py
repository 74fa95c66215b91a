"""The one way tests reach optional packages (torch, TVM, onnx, ...): `need(name)` imports it or skips.

No test module imports an optional package any other way, and none imports one before this skip
(tests/test_optional_imports.py checks it over the test tree). A skip of an installed oracle, or of
a required one under RETROGRAD_REQUIRE_ORACLES, is turned into a failure by tests/conftest.py.
"""

from __future__ import annotations

import sys
import types

import pytest


def need(module: str, minversion: str | None = None):
    """The imported module, or a skip of the calling test ("could not import 'module': ...")."""
    return pytest.importorskip(module, minversion=minversion)


def need_torchvision():
    """torchvision's models (pure Python). Its wheel here is linked against a CUDA build of torch, so its
    C ops do not load with the CPU torch; the fake (meta) registrations of those ops are skipped."""
    need("torch")
    if "torchvision" not in sys.modules:
        sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    return need("torchvision")


def need_transformers():
    """Hugging Face transformers (it imports torchvision when installed, hence the same care)."""
    need("torch")
    try:
        need_torchvision()
    except pytest.skip.Exception:
        pass
    return need("transformers")
