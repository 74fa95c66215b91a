"""An embedding-bag text classifier whose table gets sparse gradients: SGD updates only the rows a batch reads.

`python -m retrograd.examples.textbag`. The data are synthetic: each class has its own keywords, and a
document mixes a few of them with random words of the whole vocabulary.
"""

from __future__ import annotations

import argparse
import sys

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


def build_trainer(lr: float, sparse: bool = True, seed: int = 0):
    from retrograd.parser import parse
    from retrograd.training import SGD, CrossEntropyLoss, Trainer, setup_trainer

    mod = setup_trainer(parse(MODEL), CrossEntropyLoss(), SGD(lr), sparse=["table"] if sparse else None)
    trainer = Trainer(mod)
    rng = np.random.default_rng(seed)
    trainer.init_params("xavier_uniform", seed=seed,
                        overrides={"table": (rng.standard_normal((VOCAB, DIM)) * 0.5).astype(np.float32)})
    return trainer


def main(argv=None, stream=None) -> float:
    from retrograd.training.loop import accuracy, fit

    p = argparse.ArgumentParser(prog="python -m retrograd.examples.textbag", description=__doc__)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=2.0)
    args = p.parse_args(argv)
    stream = stream or sys.stdout
    x, y = make_data(2000, args.seed)
    xt, yt = make_data(500, args.seed + 1000)
    trainer = build_trainer(args.lr, seed=args.seed)
    history = fit(trainer, [x, y], args.epochs, args.batch_size, seed=args.seed)
    acc = accuracy(trainer, xt, yt)
    stream.write(f"{len(history['loss'])} steps, last loss {history['loss'][-1]:.4f}\ntest accuracy {acc:.4f}\n")
    return acc


if __name__ == "__main__":
    main()
    sys.exit(0)
