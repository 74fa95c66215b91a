"""`DataParallelTrainer`: a Trainer whose steps take the global batch, run this worker's shard, and
average the gradients over the workers inside the step (the `data_parallel` pass)."""

from __future__ import annotations

import numpy as np

from retrograd.errors import TrainingError
from retrograd.distributed.data_parallel import DEFAULT_BUCKET, data_parallel
from retrograd.distributed.group import rank, world_size
from retrograd.ir.module import IRModule
from retrograd.ops.ccl import allreduce_kernel
from retrograd.training.dropout_mode import DROPOUT_KEY
from retrograd.training.trainer import Trainer


def shard(batch_rows: int, rank_: int, workers: int) -> slice:
    """The rows of a global batch that worker `rank_` reads: equal contiguous parts (so the mean of the
    workers' mean losses is the batch's mean loss), as PyTorch's DistributedSampler splits without padding."""
    if batch_rows % workers:
        raise TrainingError(f"a global batch of {batch_rows} rows does not split evenly over {workers} workers: "
                            f"use a batch size divisible by {workers}")
    n = batch_rows // workers
    return slice(rank_ * n, (rank_ + 1) * n)


class DataParallelTrainer(Trainer):
    """`DataParallelTrainer(setup_trainer(...), bucket="25MiB")` after `retrograd.distributed.init()`.

    Every worker runs the same sequence of global batches (the same seed draws the same order); `step`
    takes a global batch, trains on this worker's shard and returns the global batch's loss (the mean
    of the workers' losses). `init_params` / `set_params` broadcast worker 0's values. With one worker
    (no process group) it is the plain Trainer's step on the whole batch.
    """

    def __init__(self, mod: IRModule, bucket=DEFAULT_BUCKET, **build_options):
        super().__init__(data_parallel(mod, bucket=bucket), **build_options)
        self.rank, self.workers = rank(), world_size()

    def set_params(self, values: dict, reset_state: bool = True) -> None:
        super().set_params(values, reset_state)
        synced = [np.asarray(v) for v in self.exe["sync_params"](*(self.params[n] for n in self.param_names),
                                                                   *self._buffer_args())]
        self.params = dict(zip(self.param_names, synced))
        if self.buffer_names:
            self.buffers = dict(zip(self.buffer_names, synced[len(self.param_names):]))

    def init_params(self, method: str = "he_uniform", seed: int = 0, overrides: dict | None = None) -> None:
        super().init_params(method, seed, overrides)
        if DROPOUT_KEY in self.state:  # each worker draws its own dropout masks
            self.state[DROPOUT_KEY] = self.state[DROPOUT_KEY] + np.int64(self.rank << 24)

    @property
    def fixed_batch(self) -> int | None:
        local = super().fixed_batch
        return None if local is None else local * self.workers

    def step(self, *batch) -> float:
        rows = len(batch[0])
        part = shard(rows, self.rank, self.workers)
        loss = super().step(*(np.asarray(a)[part] for a in batch))
        if self.workers == 1:
            return loss
        return float(allreduce_kernel(np.array(loss, np.float64), op_type="avg"))
