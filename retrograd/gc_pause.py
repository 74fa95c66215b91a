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


def promote_survivors() -> None:
    """Move everything allocated so far (a new module, long-lived) straight to the collector's oldest
    generation. With the collector paused, every object made stays in the youngest generation, and the
    first young collection after the pause scans them all only to promote them; freeze + unfreeze moves
    them without a scan. Skipped when the program froze objects itself (gc.freeze before a fork):
    unfreeze would thaw those too."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
