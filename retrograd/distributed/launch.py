"""`retrograd train ... --nproc N`: N local worker processes started through torch's own launcher
(torch.distributed.run, which torchrun is), on a free port of this machine."""

from __future__ import annotations

import os
import socket
import sys

from retrograd.errors import UsageError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_local(nproc: int, argv: list[str]) -> int:
    """Run `python -m retrograd ARGV...` in `nproc` processes (RANK, WORLD_SIZE, MASTER_ADDR, ... set by
    the launcher); return 0 when all succeed, 1 when one fails (the launcher then stops the others)."""
    if nproc < 1:
        raise UsageError(f"--nproc must be at least 1, got {nproc}")
    try:
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.run import get_args_parser, run
    except ImportError as err:
        raise UsageError(f"--nproc needs PyTorch (pip install 'retrograd[torch]'): {err}") from None
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # the launcher's default, without its warning
    launcher = get_args_parser().parse_args(
        ["--nproc-per-node", str(nproc), "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
         "--max-restarts", "0", "--monitor-interval", "0.2", "-m", "retrograd", *argv])
    try:
        run(launcher)
    except ChildFailedError as err:
        failures = ", ".join(f"worker {rank} exited with {f.exitcode}" for rank, f in sorted(err.failures.items()))
        sys.stderr.write(f"error: data-parallel training failed: {failures}\n")
        return 1
    return 0
