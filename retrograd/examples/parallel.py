"""What `retrograd train` changes when it runs as one of several workers (under torchrun, or `--nproc N`):
the trainer averages gradients over the workers, and only worker 0 prints, plots and saves."""

from __future__ import annotations

import io
import os

from retrograd.errors import TrainingError
from retrograd.training.progress import Progress


def is_worker() -> bool:
    """True in a process started by torchrun (its environment names a group of several workers)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def make_trainer(mod, args):
    """A DataParallelTrainer (the global batch split over the workers) in a group, else a Trainer."""
    from retrograd.distributed import DataParallelTrainer, world_size
    from retrograd.examples.options import trainer_options
    from retrograd.training import Trainer

    options = trainer_options(args)  # --backend / --device
    if world_size() == 1:
        return Trainer(mod, **options)
    if getattr(args, "checkpoint", None):
        raise TrainingError("--checkpoint is not supported with data-parallel training yet (data_parallel "
                            "rebuilds the train step from the adjoint and optimizer)")
    if args.batch_size % world_size():
        raise TrainingError(f"--batch-size {args.batch_size} does not split evenly over {world_size()} workers")
    return DataParallelTrainer(mod, bucket=getattr(args, "bucket", None) or "25MiB", **options)


def make_progress(steps: int, desc: str) -> Progress:
    """Worker 0's progress; the others' goes nowhere."""
    from retrograd.distributed import rank

    return Progress(steps, desc=desc) if rank() == 0 else Progress(steps, desc=desc, stream=io.StringIO(), bar=False)
