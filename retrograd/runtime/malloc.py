"""Keeping freed memory in the process, so each training step does not fault in fresh pages.

A step frees and allocates the same large arrays again and again. glibc's malloc returns big blocks
to the kernel (mmap for blocks above a threshold it adjusts up to 32 MiB, heap trimming above twice
that), and every fresh page then faults on first touch: 3,230 faults and 6-9 ms of system time per
MNIST-net step (of ~75 ms) on this 2-core VM. Fixing the thresholds (mmap only above 32 MiB, trim
only above 512 MiB of free heap) keeps those pages: 0 faults per step. The cost is that the process
keeps its high-water mark of freed memory, which suits a training job, and which is why this is
opt-in for a library: the Trainer and the `retrograd` command turn it on, RETROGRAD_KEEP_FREED_MEMORY=0
keeps glibc's defaults. Elsewhere than glibc, a no-op.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest: blocks above it are still mapped and unmapped
TRIM_THRESHOLD = 512 << 20

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Tune glibc's malloc to keep freed memory (once per process); whether it is in effect."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if os.environ.get("RETROGRAD_KEEP_FREED_MEMORY", "1").strip() in ("0", "", "no", "false") or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    _done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done
