"""`retrograd train`: an example (digits, textbag), or a user's module whose function returns a scalar loss."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from retrograd.errors import TrainingError
from retrograd.examples import digits, textbag
from retrograd.examples.options import add_arguments, trainer_options

EXAMPLES = {"digits": digits, "textbag": textbag}
OPTIMIZERS = ("adam", "adamw", "sgd", "momentum")


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help=f"an example ({', '.join(EXAMPLES)}) or a script FILE ('-': standard input) whose "
                   "function returns a scalar loss")
    add_arguments(p, epochs=None, lr=None)
    p.add_argument("--data", metavar="DATA.npz", help="FILE only: arrays named after the function's data parameters, "
                   "sharing their first (batch) dimension; the other parameters are trained")
    p.add_argument("--func", default="main", help="FILE only: the function to train")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam", help="FILE only")
    p.add_argument("--init", default="he_uniform", help="FILE only: initialisation of the trained parameters")


def run_train(args, stream=None) -> int:
    stream = stream or sys.stdout
    example = EXAMPLES.get(args.target)
    if example is not None:
        args.epochs = example.DEFAULTS["epochs"] if args.epochs is None else args.epochs
        args.lr = example.DEFAULTS["lr"] if args.lr is None else args.lr
        example.run(args, stream)
        return 0
    return _train_file(args, stream)


def _optimizer(name: str, lr: float):
    from retrograd.training import SGD, Adam, AdamW

    return {"adam": lambda: Adam(lr), "adamw": lambda: AdamW(lr), "sgd": lambda: SGD(lr),
            "momentum": lambda: SGD(lr, momentum=0.9)}[name]()


def _train_file(args, stream) -> int:
    from retrograd.parser.parse import parse_path
    from retrograd.training import Trainer, setup_trainer
    from retrograd.training.loop import fit, steps_per_epoch, training_threads
    from retrograd.training.progress import Progress

    if args.target != "-" and not Path(args.target).exists():
        raise TrainingError(f"'{args.target}' is neither an example ({', '.join(EXAMPLES)}) nor a file")
    if not args.data:
        raise TrainingError("training a script needs --data DATA.npz (arrays named after its data parameters)")
    mod = parse_path(args.target)
    try:
        with np.load(args.data, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError) as err:
        raise TrainingError(f"cannot read {args.data}: {err}") from None
    names = list(arrays)
    lr = 1e-3 if args.lr is None else args.lr
    epochs = 1 if args.epochs is None else args.epochs
    train_mod = setup_trainer(mod, None, _optimizer(args.optimizer, lr), checkpoint=args.checkpoint,
                              func=args.func, inputs=names, batch_size=args.batch_size)
    trainer = Trainer(train_mod, **trainer_options(args))
    trainer.init_params(args.init, seed=args.seed)
    n = len(arrays[names[0]]) if names and np.ndim(arrays[names[0]]) else 0
    steps = epochs * steps_per_epoch(trainer, n, args.batch_size) if n else 0
    with training_threads(args.threads or None):
        history = fit(trainer, [arrays[k] for k in names], epochs, args.batch_size, seed=args.seed,
                      progress=Progress(steps, desc=Path(args.target).stem if args.target != "-" else "stdin"))
    losses = history["loss"]
    stream.write(f"{len(losses)} steps, first loss {losses[0]:.6g}, last loss {losses[-1]:.6g}\n" if losses
                 else "no step taken\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        trainer.export_params(out / "params.npz")
        stream.write(f"parameters written to {out / 'params.npz'}\n")
    return 0
