"""`retrograd train`: an example (digits, textbag), or a user's module whose function returns a scalar loss."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from retrograd.errors import TrainingError
from retrograd.examples import digits, textbag
from retrograd.examples.options import add_arguments

EXAMPLES = {"digits": digits, "textbag": textbag}
OPTIMIZERS = ("adam", "adamw", "sgd", "momentum")
LOSSES = ("mse", "l1", "huber", "nll", "cross_entropy")
TARGETS = "targets"  # the DATA array holding the targets when --loss is given


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", help=f"an example ({', '.join(EXAMPLES)}) or a script FILE ('-': standard input) whose "
                   "function returns a scalar loss")
    add_arguments(p, epochs=None, lr=None)
    p.add_argument("--data", metavar="DATA.npz", help="FILE only: arrays named after the function's data parameters, "
                   "sharing their first (batch) dimension; the other parameters are trained")
    p.add_argument("--func", default="main", help="FILE only: the function to train")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adam", help="FILE only")
    p.add_argument("--init", default="he_uniform", help="FILE only: initialisation of the trained parameters")
    p.add_argument("--params", metavar="PARAMS.npz", help="FILE only: the initial parameters (what `retrograd import "
                   "--params` or save_params wrote, keyed by the framework's names or the IR's), instead of --init")
    p.add_argument("--loss", choices=LOSSES, help="FILE only: train the function's output (a model, such as an "
                   "imported one) against DATA's 'targets' array with this loss; without it the function returns "
                   "the loss itself")
    p.add_argument("--nproc", type=int, metavar="N", help="train data-parallel in N local processes (started "
                   "through torch's launcher, as `torchrun --nproc-per-node N -m retrograd train ...` would): "
                   "the batch is split over them; worker 0 prints, plots and saves")
    p.add_argument("--bucket", default="25MiB", help="data-parallel only: gradient bytes per allreduce (default: 25MiB)")


def run_train(args, stream=None) -> int:
    from retrograd.examples.parallel import is_worker

    if args.nproc is not None and not is_worker():
        from retrograd.distributed.launch import launch_local

        return launch_local(args.nproc, _argv_of(args))
    if is_worker():
        return _run_worker(args, stream)
    return _run(args, stream)


def _run(args, stream=None) -> int:
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
    from retrograd.examples.parallel import make_progress, make_trainer
    from retrograd.parser.parse import parse_path
    from retrograd.training import setup_trainer
    from retrograd.training.loop import fit, steps_per_epoch, training_threads

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
    loss = _loss(getattr(args, "loss", None))
    names = list(arrays)
    if loss is not None:
        if TARGETS not in arrays:
            raise TrainingError(f"--loss {args.loss} needs the targets in {args.data} as an array named '{TARGETS}' "
                                f"(it has {', '.join(names) or 'none'})")
        names = [k for k in names if k != TARGETS]
    lr = 1e-3 if args.lr is None else args.lr
    epochs = 1 if args.epochs is None else args.epochs
    train_mod = setup_trainer(mod, loss, _optimizer(args.optimizer, lr), checkpoint=args.checkpoint,
                              func=args.func, inputs=names, batch_size=args.batch_size)
    trainer = make_trainer(train_mod, args)
    source_names = _initial_params(trainer, args)
    if loss is not None:
        names.append(TARGETS)
    n = len(arrays[names[0]]) if names and np.ndim(arrays[names[0]]) else 0
    steps = epochs * steps_per_epoch(trainer, n, args.batch_size) if n else 0
    with training_threads(args.threads or None):
        history = fit(trainer, [arrays[k] for k in names], epochs, args.batch_size, seed=args.seed,
                      progress=make_progress(steps, Path(args.target).stem if args.target != "-" else "stdin"))
    losses = history["loss"]
    stream.write(f"{len(losses)} steps, first loss {losses[0]:.6g}, last loss {losses[-1]:.6g}\n" if losses
                 else "no step taken\n")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        if source_names:  # keyed as the --params archive was (PyTorch's dotted names of an import)
            from retrograd.runtime.params_io import save_params

            sd = trainer.state_dict()  # an imported model's buffers (running statistics) go with its parameters
            arrays = {**sd["params"], **sd.get("buffers", {})}
            save_params(out / "params.npz", {source_names.get(k, k): v for k, v in arrays.items()})
        else:
            trainer.export_params(out / "params.npz")
        stream.write(f"parameters written to {out / 'params.npz'}\n")
    return 0


def _loss(name):
    if name is None:
        return None
    from retrograd.training import losses

    return {"mse": losses.MSELoss, "l1": losses.L1Loss, "huber": losses.HuberLoss, "nll": losses.NLLLoss,
            "cross_entropy": losses.CrossEntropyLoss}[name]()


def _initial_params(trainer, args) -> dict:
    """Initialise the trainer from --params (each trained parameter, and any buffer, by its IR name or by the
    name it has in the archive, whose IR spelling it is) or from --init; returns {IR name: archive name}."""
    if not getattr(args, "params", None):
        trainer.init_params(args.init, seed=args.seed)
        return {}
    from retrograd.runtime.params_io import ir_name, load_params

    archive = load_params(args.params)
    known = trainer.param_names + trainer.buffer_names
    by_ir: dict = {}
    for name in archive:
        key = name if name in known else ir_name(name)
        if key in by_ir:
            raise TrainingError(f"{args.params}: '{name}' and '{by_ir[key]}' name the same parameter '{key}'")
        by_ir[key] = name
    missing = [n for n in trainer.param_names if n not in by_ir]
    unknown = [by_ir[k] for k in by_ir if k not in known]
    if missing or unknown:
        what = f"has no '{missing[0]}'" if missing else f"has '{unknown[0]}', which is no trained parameter"
        raise TrainingError(f"{args.params} {what} (trained parameters: {', '.join(trainer.param_names)})")
    trainer.init_params(args.init, seed=args.seed, overrides={k: archive[v] for k, v in by_ir.items()})
    return by_ir


def _run_worker(args, stream) -> int:
    """One worker of a data-parallel run: join the group, train; a lost worker ends every process."""
    import io

    from retrograd.distributed import group as distributed
    from retrograd.errors import DiagnosticError

    if args.target == "textbag":
        raise TrainingError("textbag's sparse embedding gradients are not averaged by data_parallel: train it in one process")
    distributed.init()
    first = distributed.rank() == 0
    if not first:
        args.out = None  # worker 0 alone writes
    try:
        code = _run(args, stream if first else io.StringIO())
        distributed.barrier()
    except DiagnosticError as err:
        sys.stderr.write(f"worker {distributed.rank()}: {err}\n")
        distributed.exit_now(1)
    distributed.shutdown()
    return code


# The options `retrograd train` passes on to the processes `--nproc` starts (dest, flag).
_FORWARDED = [("seed", "--seed"), ("epochs", "--epochs"), ("batch_size", "--batch-size"), ("lr", "--lr"),
              ("checkpoint", "--checkpoint"), ("out", "--out"), ("threads", "--threads"), ("limit", "--limit"),
              ("data", "--data"), ("func", "--func"), ("optimizer", "--optimizer"), ("init", "--init"),
              ("bucket", "--bucket"), ("params", "--params"), ("loss", "--loss")]


def _argv_of(args) -> list[str]:
    argv = ["train", args.target]
    for dest, flag in _FORWARDED:
        value = getattr(args, dest, None)
        if value is not None:
            argv += [flag, str(value)]
    return argv
