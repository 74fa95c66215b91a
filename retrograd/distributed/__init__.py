"""Data-parallel training over torch.distributed: the process group, the `data_parallel` pass, the trainer.

`init()` joins the group torchrun describes in the environment; the `R.ccl.*` kernels then run on it.
Outside a group every collective is its group-of-one value, so a data-parallel module also runs alone.
"""

from retrograd.distributed.group import (
    DEFAULT_TIMEOUT_S, backend_for, barrier, exit_now, init, is_initialized, rank, shutdown, world_size,
)
from retrograd.distributed.data_parallel import DataParallel, data_parallel
from retrograd.distributed.trainer import DataParallelTrainer, shard

__all__ = [
    "init", "rank", "world_size", "barrier", "shutdown", "exit_now", "is_initialized", "backend_for", "DEFAULT_TIMEOUT_S",
    "data_parallel", "DataParallel", "DataParallelTrainer", "shard",
]
