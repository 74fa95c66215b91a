"""Pausing Python's cyclic garbage collector around bulk IR work."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """Parsing, lowering and differentiating allocate many long-lived objects and no cycles: the
    cyclic collector's full passes would rescan the whole (large) IR again and again for nothing,
    making big inputs superlinear. Nested uses are fine; the collector resumes only if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
