"""runtime/malloc.py: with glibc tuned, arrays freed and allocated again reuse their pages (no page
faults after the first round); RETROGRAD_KEEP_FREED_MEMORY=0 keeps glibc's defaults. Counted with
getrusage in fresh processes, so nothing here depends on timing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

SCRIPT = """
import resource, numpy as np
from retrograd.runtime.malloc import keep_freed_memory
on = keep_freed_memory()
def round_():
    a = np.ones(3 << 20, np.float32)   # 12 MiB, then 8 MiB while the first is alive
    b = np.ones(2 << 20, np.float32)
    return float(a[-1] + b[-1])
round_()
r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    round_()
print(on, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - r0)
"""


def _run(env_value):
    env = dict(os.environ)
    env.pop("RETROGRAD_KEEP_FREED_MEMORY", None)
    if env_value is not None:
        env["RETROGRAD_KEEP_FREED_MEMORY"] = env_value
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True).stdout.split()
    return out[0] == "True", int(out[1])


def test_freed_pages_are_reused_and_opt_out_keeps_the_defaults():
    on, kept = _run(None)
    off, default = _run("0")
    assert not off
    if not on:
        pytest.skip("this C library has no mallopt")
    # With glibc's defaults the 12 MiB block is mapped afresh every round (~3,000 pages each time,
    # fewer once its adaptive threshold rises); tuned, the pages stay with the process.
    assert default > 500
    assert kept * 10 < default
