"""What every training example shares: its command-line options and the loss/accuracy curve it writes."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser, epochs: int | None, lr: float | None) -> None:
    """The options of every training command (None defaults: the example's own)."""
    p.add_argument("--seed", type=int, default=0, help="seed of the initialisation and the batch order (default: 0)")
    p.add_argument("--epochs", type=int, default=epochs, help="passes over the data")
    p.add_argument("--batch-size", type=int, default=32, help="examples per step (default: 32)")
    p.add_argument("--lr", type=float, default=lr, help="learning rate")
    p.add_argument("--checkpoint", metavar="BUDGET", help="memory budget for the train step (bytes, 12MiB, 40%%)")
    p.add_argument("--out", metavar="DIR", help="write the loss/accuracy curve (PNG) and the parameters here")
    p.add_argument("--threads", type=int, default=1,
                   help="threads while training, the kernels' and BLAS's (BLAS's need threadpoolctl; 0: the defaults)")
    p.add_argument("--limit", type=int, help=argparse.SUPPRESS)  # a subset, for tests
    p.add_argument("--backend", choices=("numpy", "torch"), default="numpy",
                   help="run the steps on NumPy (default) or on PyTorch tensors (pip install 'retrograd[torch]')")
    p.add_argument("--device", default=None, help="torch backend: the device (cpu, cuda, cuda:1, ...; default cpu)")


def trainer_options(args) -> dict:
    """The Trainer's backend options from the command line."""
    backend = getattr(args, "backend", "numpy")
    device = getattr(args, "device", None)
    if backend == "numpy" and device not in (None, "cpu"):
        raise SystemExit(f"--device {device} needs --backend torch")
    return {"backend": backend, "device": device} if backend != "numpy" else {}


def plot_history(history: dict, path: Path, title: str) -> str:
    """Write the per-step loss and per-epoch accuracy as a PNG; a line saying what happened."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot written (pip install 'retrograd[train]')"
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history["loss"], color="tab:blue", linewidth=0.8, label="training loss (per step)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    accs = history.get("test_acc", [])
    if accs:
        per_epoch = len(history["loss"]) // len(accs)
        ax2 = ax.twinx()
        ax2.plot([per_epoch * (i + 1) for i in range(len(accs))], accs, "o-", color="tab:red", label="test accuracy")
        ax2.set_ylabel("test accuracy")
        ax2.set_ylim(min(0.8, min(accs)), 1.0)
        ax2.legend(loc="center right")
    ax.legend(loc="lower left")
    ax.set_title(f"retrograd: {title}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return f"curve written to {path}"
