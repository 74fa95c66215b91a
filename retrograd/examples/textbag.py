"""An embedding-bag text classifier whose table gets sparse gradients: SGD updates only the rows a batch reads.

`retrograd train textbag` or `python -m retrograd.examples.textbag`. The data are synthetic: each class has its own keywords, and a
document mixes a few of them with random words of the whole vocabulary.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

VOCAB, DIM, CLASSES, LENGTH = 500, 16, 4, 12

MODEL = f"""
@I.ir_module
class TextBag:
    @R.function
    def main(tokens: R.Tensor(("n", {LENGTH}), dtype="int64"), table: R.Tensor(({VOCAB}, {DIM}), dtype="float32"), w: R.Tensor(({DIM}, {CLASSES}), dtype="float32"), b: R.Tensor(({CLASSES},), dtype="float32")) -> R.Tensor(("n", {CLASSES}), dtype="float32"):
        with R.dataflow():
            words = R.take(table, tokens, axis=0)
            bag = R.mean(words, axis=[1])
            logits = R.add(R.matmul(bag, w), b)
            R.output(logits)
        return logits
"""


def make_data(n: int, seed: int, keywords: int = 2):
    """(tokens (n, LENGTH) int64, labels (n,) int64): `keywords` words of the class's own 10, the rest random."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, size=n)
    tokens = rng.integers(0, VOCAB, size=(n, LENGTH))
    own = rng.integers(0, 10, size=(n, keywords)) + 10 * labels[:, None]
    tokens[:, :keywords] = own
    return rng.permuted(tokens, axis=1).astype(np.int64), labels.astype(np.int64)


def build_trainer(lr: float, sparse: bool = True, seed: int = 0, checkpoint=None, batch_size: int | None = None,
                  backend_options: dict | None = None):
    from retrograd.parser import parse
    from retrograd.training import SGD, CrossEntropyLoss, Trainer, setup_trainer

    mod = setup_trainer(parse(MODEL), CrossEntropyLoss(), SGD(lr), sparse=["table"] if sparse else None, checkpoint=checkpoint,
                        batch_size=batch_size)
    trainer = Trainer(mod, **(backend_options or {}))
    rng = np.random.default_rng(seed)
    trainer.init_params("xavier_uniform", seed=seed,
                        overrides={"table": (rng.standard_normal((VOCAB, DIM)) * 0.5).astype(np.float32)})
    return trainer


# `retrograd train textbag` without --epochs / --lr (plain SGD: the sparse rows take a large step).
DEFAULTS = {"epochs": 10, "lr": 2.0}


def run(args, stream=None) -> float:
    """Train on 2,000 synthetic documents, print `test accuracy 0.xxxx` for 500 others, write the outputs."""
    from retrograd.examples.options import plot_history
    from retrograd.training.loop import accuracy, fit, steps_per_epoch, training_threads
    from retrograd.training.progress import Progress

    stream = stream or sys.stdout
    x, y = make_data(2000, args.seed)
    xt, yt = make_data(500, args.seed + 1000)
    if args.limit:
        x, y = x[: args.limit], y[: args.limit]
    from retrograd.examples.options import trainer_options

    trainer = build_trainer(args.lr, seed=args.seed, checkpoint=args.checkpoint, batch_size=args.batch_size,
                            backend_options=trainer_options(args))
    steps = args.epochs * steps_per_epoch(trainer, len(x), args.batch_size)
    with training_threads(args.threads or None):
        history = fit(trainer, [x, y], args.epochs, args.batch_size, seed=args.seed,
                      evaluate=lambda t: {"test_acc": accuracy(t, xt, yt)},
                      progress=Progress(steps, desc="textbag"), batch_accuracy=True)
        acc = accuracy(trainer, xt, yt)
    stream.write(f"{len(history['loss'])} steps, last loss {history['loss'][-1]:.4f}\ntest accuracy {acc:.4f}\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        trainer.export_params(out / "textbag_params.npz")
        stream.write(plot_history(history, out / "textbag_curve.png", "embedding-bag text classifier") + "\n")
    return acc


def main(argv=None, stream=None) -> float:
    from retrograd.examples.options import add_arguments

    p = argparse.ArgumentParser(prog="python -m retrograd.examples.textbag", description=__doc__)
    add_arguments(p, **DEFAULTS)
    return run(p.parse_args(argv), stream)


if __name__ == "__main__":
    main()
    sys.exit(0)
