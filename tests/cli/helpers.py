"""Run the `retrograd` command in a subprocess, as a user would, with this checkout's package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MLP = str(ROOT / "examples" / "mlp.py")
CORPUS = ROOT / "tests" / "corpus"


def cli(*args: str, input: bytes | str | None = None, cwd=None, check_traceback: bool = True) -> subprocess.CompletedProcess:
    """`python -m retrograd ARGS` with bytes output; asserts that no traceback is shown unless asked."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONIOENCODING="utf-8")
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run(
        [sys.executable, "-m", "retrograd", *args], input=data, capture_output=True, cwd=cwd or ROOT, env=env, timeout=300
    )
    proc.out = proc.stdout.decode("utf-8", "replace")
    proc.err = proc.stderr.decode("utf-8", "replace")
    if check_traceback and "--traceback" not in args:
        assert "Traceback" not in proc.err, proc.err
    return proc
