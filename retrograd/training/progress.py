"""Progress over training steps: a tqdm bar on a terminal when tqdm is installed, else plain periodic lines."""

from __future__ import annotations

import sys


class Progress:
    """`update(loss=..., acc=...)` once per step; `close()` at the end. Never fails for want of tqdm."""

    def __init__(self, total: int, desc: str = "train", stream=None, every: int | None = None, bar: bool | None = None):
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.every = every or max(1, total // 20)
        self._bar = None
        if bar is None:
            bar = bool(getattr(self.stream, "isatty", lambda: False)())
        if bar:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=total, desc=desc, file=self.stream, dynamic_ncols=True)
        self.desc = desc

    def due(self) -> bool:
        """Whether the next update prints a line (every `every` steps, and the last): values that cost
        something to compute, such as a batch accuracy, need only be computed then."""
        nxt = self.done + 1
        return nxt % self.every == 0 or nxt == self.total

    def update(self, **values) -> None:
        self.done += 1
        shown = {k: f"{v:.4f}" for k, v in values.items() if v is not None}
        if self._bar is not None:
            # A value given only on some steps (a batch accuracy) stays on the bar until replaced.
            self._shown = {**getattr(self, "_shown", {}), **shown}
            self._bar.set_postfix(self._shown, refresh=False)
            self._bar.update(1)
        elif self.done % self.every == 0 or self.done == self.total:
            fields = " ".join(f"{k} {v}" for k, v in shown.items())
            self.stream.write(f"{self.desc} step {self.done}/{self.total} {fields}\n")
            self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
