"""Memory sizes as users write them: bytes ("917504", "12MiB", "1.5GB"), a fraction of a function's
unplanned peak ("40%") or of its activation memory ("50%act"). The one reader of options that take a
memory size: the checkpoint pass's budget (retrograd.passes.checkpoint), data_parallel's bucket."""

from __future__ import annotations

import re

import attrs

_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_UNITS.update({p + s: base**e for e, p in enumerate("kmgt", 1) for s, base in (("b", 1000), ("ib", 1024))})
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
        base = pinned if self.activations else 0
        return self.nbytes if self.fraction is None else base + int((unplanned_peak - base) * self.fraction)

    def __str__(self) -> str:
        return f"{self.nbytes} bytes" if self.fraction is None else f"{self.fraction * 100:g}%" + "act" * self.activations


def parse_budget(value) -> Budget | None:
    """None, a Budget, an int of bytes, or text: "40%" (of the unplanned peak), "50%act" (of the activation
    memory), "12MiB", "1.5GB" (KB = 1000, KiB = K = 1024); ValueError (the pass turns it into a located
    error) for anything else."""
    if value is None or isinstance(value, Budget):
        return value
    m = _QUANTITY.fullmatch(str(value)) if type(value) in (int, str) else None  # bool is not int here
    unit = "".join(m.group(2).lower().split()) if m else None
    if unit not in ("%", "%act", *_UNITS):
        raise ValueError(f"cannot read the budget {value!r}: expected a number of bytes (an integer) or one with a "
                         "unit of %, %act, B, KB, MB, GB, TB, KiB, MiB, GiB, TiB ('40%', '50%act', '12MiB', '1.5GB')")
    number = float(m.group(1)) if "." in m.group(1) else int(m.group(1))  # an int stays exact
    if unit in ("%", "%act"):
        if not 0 < number <= 100:
            raise ValueError(f"a budget in percent must be in (0, 100], got {value!r}")
        return Budget(fraction=number / 100, activations=unit == "%act")
    if _UNITS[unit] == 1 and number != int(number):
        raise ValueError(f"a budget in bytes must be a whole number, got {value!r} (for a fraction, write '40%')")
    if int(number * _UNITS[unit]) <= 0:
        raise ValueError(f"budget must be positive, got {value!r}")
    return Budget(nbytes=int(number * _UNITS[unit]))
