"""A small CNN trained on the 8x8 handwritten digits: `python -m retrograd.examples.digits` or `retrograd train digits`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "digits.npz"

_TEMPLATE = """
@I.ir_module
class DigitsCNN:
    @R.function
    def main(x: R.Tensor(("n", 1, 8, 8), dtype="float32"), conv1_w: R.Tensor((16, 1, 3, 3), dtype="float32"), conv1_b: R.Tensor((1, 16, 1, 1), dtype="float32"), conv2_w: R.Tensor((32, 16, 3, 3), dtype="float32"), conv2_b: R.Tensor((1, 32, 1, 1), dtype="float32"), fc_w: R.Tensor((512, 10), dtype="float32"), fc_b: R.Tensor((10,), dtype="float32")) -> R.Tensor(("n", 10), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            c1 = R.nn.relu(R.add(R.nn.conv2d(x, conv1_w, padding=[1, 1, 1, 1]), conv1_b))
            c2 = R.nn.relu(R.add(R.nn.conv2d(c1, conv2_w, padding=[1, 1, 1, 1]), conv2_b))
            pooled = R.nn.max_pool2d(c2, pool_size=[2, 2], strides=[2, 2])
            {flat}
            logits = R.add(R.matmul(flat, fc_w), fc_b)
            out = R.nn.log_softmax(logits, axis=1)
            R.output(out)
        return out
"""
_FLAT = "flat = R.reshape(pooled, R.shape([n, 512]))"
# Dropout of the flattened features: the training step draws a fresh mask each step (setup_trainer's
# train mode); predict and evaluate run it as the identity.
DROPOUT_RATE = 0.25


def model_text(dropout: float | None = DROPOUT_RATE) -> str:
    """The CNN's script; with `dropout`, the flattened features go through dropout at that rate."""
    if dropout is None:
        return _TEMPLATE.replace("{flat}", _FLAT)
    dropped = f"dropped = R.nn.dropout(R.reshape(pooled, R.shape([n, 512])), rate={float(dropout)!r})"
    return _TEMPLATE.replace("{flat}", dropped + "\n            flat = dropped[0]")


# Without dropout: what the step-by-step comparisons with PyTorch train (PyTorch draws other masks).
MODEL = model_text(None)


def load_digits():
    """(images (1797, 1, 8, 8) float32 scaled to [0, 1], labels (1797,) int64), from the data shipped here."""
    with np.load(DATA, allow_pickle=False) as data:
        images, labels = data["images"], data["target"]
    return (images.astype(np.float32) / 16.0)[:, None], labels.astype(np.int64)


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int):
    """(train indices, test indices): each class split at `test_fraction`, shuffled with the seed."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    for c in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == c))
        k = int(round(test_fraction * len(idx)))
        test.append(idx[:k])
        train.append(idx[k:])
    return rng.permutation(np.concatenate(train)), np.sort(np.concatenate(test))


# `retrograd train digits` without --epochs / --lr.
DEFAULTS = {"epochs": 20, "lr": 2e-3}


def run(args, stream=None) -> float:
    """Train, print `test accuracy 0.xxxx`, write the outputs; return the test accuracy."""
    from retrograd.examples.options import plot_history
    from retrograd.parser import parse
    from retrograd.examples.options import trainer_options
    from retrograd.training import Adam, NLLLoss, Trainer, setup_trainer
    from retrograd.training.loop import accuracy, fit, steps_per_epoch, training_threads
    from retrograd.training.progress import Progress

    stream = stream or sys.stdout
    start = time.perf_counter()
    x, y = load_digits()
    tr, te = stratified_split(y, 0.2, args.seed)
    if args.limit:
        tr = tr[: args.limit]
    mod = setup_trainer(parse(model_text()), NLLLoss(), Adam(args.lr), checkpoint=args.checkpoint,
                        batch_size=args.batch_size)
    trainer = Trainer(mod, **trainer_options(args))
    trainer.init_params("he_uniform", seed=args.seed)
    steps = args.epochs * steps_per_epoch(trainer, len(tr), args.batch_size)
    with training_threads(args.threads or None):
        history = fit(trainer, [x[tr], y[tr]], args.epochs, args.batch_size, seed=args.seed,
                      evaluate=lambda t: {"test_acc": accuracy(t, x[te], y[te])},
                      progress=Progress(steps, desc="digits"), batch_accuracy=True)
        acc = accuracy(trainer, x[te], y[te])
    elapsed = time.perf_counter() - start
    stream.write(f"{len(tr)} training and {len(te)} test images, {steps} steps in {elapsed:.1f} s\n")
    stream.write(f"test accuracy {acc:.4f}\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        trainer.export_params(out / "digits_params.npz")
        stream.write(plot_history(history, out / "digits_curve.png", "digits CNN") + "\n")
    return acc


def main(argv=None) -> int:
    from retrograd.examples.options import add_arguments

    p = argparse.ArgumentParser(prog="python -m retrograd.examples.digits", description=__doc__)
    add_arguments(p, **DEFAULTS)
    run(p.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
