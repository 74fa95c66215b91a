"""Memory budgets as users write them: 917504 (bytes), "40%" (of the unplanned peak), "50%act" (of the
activation memory), "12MiB", "1.5GB"."""

from __future__ import annotations

import re

import attrs

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_UNITS.update({p + "b": 1000**e for e, p in enumerate("kmgt", 1)})
_UNITS.update({p + "ib": 1024**e for e, p in enumerate("kmgt", 1)})
_QUANTITY = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(%\s*act|%|[A-Za-z]*)\s*", re.IGNORECASE)


@attrs.frozen
class Budget:
    """A number of bytes, a fraction of the function's unplanned peak, or (activations=True) a fraction of
    its activation memory: what the planner can change, the unplanned peak less the parameters (PyTorch's
    activation_memory_budget: 1.0 keeps every activation, smaller fractions recompute some)."""

    nbytes: int | None = None
    fraction: float | None = None
    activations: bool = False

    def resolve(self, unplanned_peak: int, pinned: int = 0) -> int:
        if self.fraction is None:
            return self.nbytes
        if self.activations:
            return pinned + int((unplanned_peak - pinned) * self.fraction)
        return int(unplanned_peak * self.fraction)

    def __str__(self) -> str:
        if self.fraction is None:
            return f"{self.nbytes} bytes"
        return f"{self.fraction * 100:g}%" + ("act" if self.activations else "")


def both_forms(nbytes: int, unplanned_peak: int, pinned: int) -> str:
    """'N bytes = P% of the unplanned peak = A%act': a budget in the forms `parse_budget` reads."""
    peak = f"{nbytes / unplanned_peak * 100:.4g}% of the unplanned peak" if unplanned_peak else ""
    act = unplanned_peak - pinned
    share = f"{(nbytes - pinned) / act * 100:.4g}%act" if act > 0 else ""
    return " = ".join(x for x in (f"{nbytes} bytes", peak, share) if x)


def parse_budget(value) -> Budget | None:
    """None, a Budget, an int of bytes, or text: "917504", "40%", "50%act", "12MiB", "1.5GB" (KB = 1000,
    KiB = K = 1024).

    Raises ValueError (the pass turns it into a located error) for anything else.
    """
    if value is None or isinstance(value, Budget):
        return value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(
            f"budget must be a number of bytes (an integer) or text like '40%', '50%act', '12MiB', '1.5GB'; got {value!r}"
        )
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"budget must be positive, got {value}")
        return Budget(nbytes=value)
    m = _QUANTITY.fullmatch(value)
    unit = "".join(m.group(2).lower().split()) if m else None
    if m is None or (unit not in ("%", "%act") and unit not in _UNITS):
        units = "%, %act, B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
        raise ValueError(f"cannot read the budget {value!r}: expected a number with one of the units {units}")
    number = float(m.group(1))
    if unit in ("%", "%act"):
        if not 0 < number <= 100:
            raise ValueError(f"a budget in percent must be in (0, 100], got {value!r}")
        return Budget(fraction=number / 100, activations=unit == "%act")
    if _UNITS[unit] == 1 and number != int(number):
        raise ValueError(f"a budget in bytes must be a whole number, got {value!r} (for a fraction, write '40%')")
    nbytes = int(number * _UNITS[unit])
    if nbytes <= 0:
        raise ValueError(f"budget must be positive, got {value!r}")
    return Budget(nbytes=nbytes)
