"""A minibatch training loop over NumPy arrays: shuffled per epoch with a seed, with progress and a history."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

import numpy as np

from retrograd.errors import TrainingError
from retrograd.training.progress import Progress
from retrograd.training.trainer import Trainer


def batches(n: int, batch_size: int, rng: np.random.Generator | None):
    """Index arrays covering range(n) in batches (shuffled when rng is given); the last may be shorter."""
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


def steps_per_epoch(trainer: Trainer, n: int, batch_size: int) -> int:
    """Steps `fit` takes per epoch over n examples."""
    return n // batch_size if trainer.fixed_batch is not None else -(-n // batch_size)


def fit(trainer: Trainer, arrays: list, epochs: int, batch_size: int, seed: int = 0,
        evaluate: Callable[[Trainer], dict] | None = None, progress: Progress | None = None,
        batch_accuracy: bool = False) -> dict:
    """Train on `arrays` (inputs then targets, sharing their first dimension) for `epochs` epochs
    (a step specialized to one batch size leaves out each epoch's shorter last batch: `steps_per_epoch`).

    Returns the history: per-step `loss`, and per epoch the values `evaluate(trainer)` returns. With
    `batch_accuracy` (a classifier: one input, integer class targets), the progress also shows `acc`,
    the share of the batch classified right before the step, computed only on the steps it prints
    (a forward pass costs about a third of a step).
    """
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise TrainingError(f"the arrays must share their first dimension, got {[len(a) for a in arrays]}")
    if batch_size <= 0 or epochs < 0:
        raise TrainingError(f"batch size and epochs must be positive, got {batch_size} and {epochs}")
    fixed = trainer.fixed_batch
    if fixed is not None and fixed != batch_size:
        raise TrainingError(f"the train step takes batches of exactly {fixed} (its inputs' leading dim is static, "
                            f"e.g. specialized for checkpointing), not {batch_size}")
    rng = np.random.default_rng(seed)
    history: dict[str, list] = {"loss": []}
    last: dict = {}
    for _ in range(epochs):
        for idx in batches(n, batch_size, rng):
            if fixed is not None and len(idx) != fixed:
                continue  # a static step cannot take the shorter last batch
            batch = [a[idx] for a in arrays]
            acc = accuracy(trainer, batch[0], batch[-1]) if batch_accuracy and progress is not None and progress.due() else None
            history["loss"].append(trainer.step(*batch))
            if progress is not None:
                progress.update(loss=history["loss"][-1], acc=acc, **last)
        if evaluate is not None:
            last = evaluate(trainer)
            for k, v in last.items():
                history.setdefault(k, []).append(v)
    if progress is not None:
        progress.close()
    return history


def accuracy(trainer: Trainer, x, y, batch_size: int = 512) -> float:
    """Share of rows of `x` whose predicted class (argmax over axis 1) is `y`."""
    hits = 0
    for idx in batches(len(x), batch_size, None):
        hits += int((np.asarray(trainer.predict(x[idx])).argmax(axis=1) == y[idx]).sum())
    return hits / max(1, len(x))


@contextlib.contextmanager
def training_threads(n: int | None):
    """Train with `n` threads: the kernels' own (retrograd.set_num_threads) and BLAS's (with
    threadpoolctl, in the `train` extra). None: the defaults.

    Small models lose to thread start-up and, on a busy machine, to threads spinning: the digits CNN's
    step took 40x the CPU time with two OpenBLAS threads than with one on a loaded 2-core machine.
    """
    from retrograd.ops.kernels import parallel

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        threadpool_limits = None
    if n is None:
        yield
        return
    before = parallel.get_num_threads()
    parallel.set_num_threads(n)
    # The torch backend's kernels: PyTorch's intra-op (OpenMP) threads, when the backend has imported it.
    torch = sys.modules.get("torch")
    torch_before = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n, user_api="blas") if threadpool_limits else contextlib.nullcontext():
            yield
    finally:
        parallel.set_num_threads(before)
        if torch is not None:
            torch.set_num_threads(torch_before)
