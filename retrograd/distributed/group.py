"""The default process group: joined from torchrun's environment with the backend that fits the device.

torch is imported only here and in the collective kernels, lazily: retrograd runs without it.
"""

from __future__ import annotations

import datetime
import os

from retrograd.errors import UsageError
from retrograd.ops.ccl import process_group

# Seconds a collective waits for the other workers before it fails (gloo and NCCL both honour it).
DEFAULT_TIMEOUT_S = 300.0
_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _torch_dist():
    try:
        import torch.distributed as dist
    except ImportError as err:
        raise UsageError(f"distributed training needs PyTorch (pip install 'retrograd[torch]'): {err}") from None
    if not dist.is_available():
        raise UsageError("this PyTorch build has no torch.distributed")
    return dist


def backend_for(device=None) -> str:
    """"nccl" for a CUDA device (a string like "cuda:1" or a torch.device), "gloo" for the CPU.

    None: $RETROGRAD_DEVICE, else the CPU: NumPy arrays live there, and only the torch backend's
    CUDA tensors can travel over NCCL.
    """
    device = os.environ.get("RETROGRAD_DEVICE", "cpu") if device is None else device
    kind = getattr(device, "type", None) or str(device).split(":")[0].strip().lower()
    if kind == "cuda":
        return "nccl"
    if kind != "cpu":
        raise UsageError(f"no process-group backend for device {device!r} (cpu: gloo, cuda: nccl)")
    return "gloo"


def init(backend: str | None = None, device=None, timeout: float | None = None) -> bool:
    """Join the default process group described by torchrun's environment (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT; LOCAL_RANK picks the GPU under NCCL). Returns True when a group of more
    than one worker (or an existing group) is in use, False when the environment names none (a group
    of one: the collectives are then their single-worker values). `timeout` (seconds, default
    $RETROGRAD_DIST_TIMEOUT or 300): how long a collective waits for a worker that died or lags
    before it fails with an error (it never hangs)."""
    if process_group() is not None:
        return True
    if "WORLD_SIZE" not in os.environ:
        return False
    missing = [k for k in _ENV if k not in os.environ]
    if missing:
        raise UsageError(f"distributed init: the environment lacks {', '.join(missing)} (start the processes "
                         "with torchrun, or `retrograd train ... --nproc N`)")
    try:
        rank_, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except ValueError:
        raise UsageError(f"distributed init: RANK={os.environ['RANK']!r}, WORLD_SIZE={os.environ['WORLD_SIZE']!r} "
                         "are not integers") from None
    if not 0 <= rank_ < size:
        raise UsageError(f"distributed init: RANK={rank_} is not in [0, WORLD_SIZE={size})")
    dist = _torch_dist()
    backend = backend or backend_for(device)
    if backend == "nccl":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    seconds = float(os.environ.get("RETROGRAD_DIST_TIMEOUT", DEFAULT_TIMEOUT_S)) if timeout is None else float(timeout)
    try:
        dist.init_process_group(backend, init_method="env://", rank=rank_, world_size=size,
                                timeout=datetime.timedelta(seconds=seconds))
    except (RuntimeError, ValueError) as err:
        raise UsageError(f"distributed init (rank {rank_} of {size}, {backend} at "
                         f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}) failed: "
                         f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    return True


def is_initialized() -> bool:
    return process_group() is not None


def rank() -> int:
    """This worker's rank (0 outside a process group)."""
    dist = process_group()
    return 0 if dist is None else dist.get_rank()


def world_size() -> int:
    """The number of workers (1 outside a process group)."""
    dist = process_group()
    return 1 if dist is None else dist.get_world_size()


def barrier() -> None:
    """Wait until every worker reaches this point (nothing outside a process group); a worker that died
    or does not come within the timeout makes it fail with a UsageError instead of hanging."""
    dist = process_group()
    if dist is None:
        return
    try:
        dist.barrier()
    except RuntimeError as err:
        raise UsageError(f"barrier failed on worker {dist.get_rank()} of {dist.get_world_size()} (a worker died or "
                         f"timed out): {str(err).splitlines()[0]}") from None


def shutdown() -> None:
    """Leave the process group (nothing outside one)."""
    dist = process_group()
    if dist is not None:
        dist.destroy_process_group()


def exit_now(code: int) -> None:
    """End the process with `code` after a failed collective, output flushed. A process group whose peer
    died cannot be torn down cleanly (gloo aborts the interpreter at exit with a pending operation), so
    the process leaves without running the interpreter's shutdown."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
