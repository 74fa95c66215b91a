"""Training: losses and optimizers as IR, `setup_trainer` (one module with a fused train step) and the Trainer."""

from retrograd.training.assemble import setup_trainer
from retrograd.training.init import initial_value
from retrograd.training.losses import CrossEntropyLoss, HuberLoss, L1Loss, Loss, MSELoss, NLLLoss, append_loss
from retrograd.training.optimizers import SGD, Adam, AdamW, MomentumSGD, Optimizer
from retrograd.training.trainer import Trainer

__all__ = [
    "Loss", "MSELoss", "L1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss", "append_loss",
    "Optimizer", "SGD", "MomentumSGD", "Adam", "AdamW",
    "setup_trainer", "Trainer", "initial_value",
]
