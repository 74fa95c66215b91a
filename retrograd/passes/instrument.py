"""Pass instruments: print before/after, print only what changed (a diff), per-pass timing, verify after each."""

from __future__ import annotations

import difflib
import sys
import time
from typing import Callable, Collection, TextIO

from retrograd.ir.module import IRModule
from retrograd.passes.infra import PassInfo, check_pass_result

__all__ = ["PassInstrument", "PrintBeforeAfter", "PrintChanged", "Timing", "VerifyAfterEach"]


def _script(mod: IRModule) -> str:
    return mod.script()


class PassInstrument:
    """Base with no-op hooks; PassContext calls them around every pass it runs."""

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        pass

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        pass


class PrintBeforeAfter(PassInstrument):
    """Print the module before and after each pass (mlir-opt's print-ir-before/after-all) to `stream`
    (default: stdout at print time); with `only`, just around the passes of those names
    (print-ir-before=PASS)."""

    def __init__(self, stream: TextIO | None = None, before: bool = True, after: bool = True,
                 printer: Callable[[IRModule], str] = _script, *, file: TextIO | None = None,
                 only: Collection[str] | None = None):
        self.file = stream or file
        self.before = before
        self.after = after
        self.printer = printer
        self.only = None if only is None else frozenset(only)

    def _out(self) -> TextIO:
        return self.file or sys.stdout

    def _wanted(self, info: PassInfo) -> bool:
        return self.only is None or info.name in self.only

    def run_before_pass(self, mod, info):
        if self.before and self._wanted(info):
            print(f"# IR before pass {info!r}\n{self.printer(mod)}", file=self._out())

    def run_after_pass(self, mod, info):
        if self.after and self._wanted(info):
            print(f"# IR after pass {info!r}\n{self.printer(mod)}", file=self._out())


class PrintChanged(PassInstrument):
    """Print a unified diff of the printed module, only for passes that changed it."""

    def __init__(self, stream: TextIO | None = None, context: int = 3,
                 printer: Callable[[IRModule], str] = _script, *, file: TextIO | None = None):
        self.file = stream or file
        self.context = context
        self.printer = printer
        self._before: list[IRModule] = []
        self.changed: list[str] = []

    def run_before_pass(self, mod, info):
        self._before.append(mod)

    def run_after_pass(self, mod, info):
        old_mod = self._before.pop()
        # Same functions, same objects: unchanged without printing anything.
        if old_mod is mod or (old_mod.attrs == mod.attrs and list(old_mod.items()) == list(mod.items())):
            return
        old, new = self.printer(old_mod), self.printer(mod)
        if old == new:
            return
        self.changed.append(info.name)
        diff = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"before {info!r}",
            tofile=f"after {info!r}",
            n=self.context,
        )
        self.file_write("".join(diff))

    def file_write(self, text: str) -> None:
        out = self.file or sys.stdout
        out.write(text if text.endswith("\n") else text + "\n")


class Timing(PassInstrument):
    """Wall time of every pass run; `report()` gives a table, `totals()` the time per pass name."""

    def __init__(self):
        self.records: list[tuple[str, float]] = []
        self._starts: list[float] = []

    def enter_pass_ctx(self):
        self.records = []
        self._starts = []

    def run_before_pass(self, mod, info):
        self._starts.append(time.perf_counter())

    def run_after_pass(self, mod, info):
        self.records.append((info.name, time.perf_counter() - self._starts.pop()))

    def totals(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, seconds in self.records:
            out[name] = out.get(name, 0.0) + seconds
        return out

    def report(self) -> str:
        totals = self.totals()
        counts: dict[str, int] = {}
        for name, _ in self.records:
            counts[name] = counts.get(name, 0) + 1
        total = sum(totals.values())
        width = max([len(n) for n in totals] + [4])
        lines = [f"{'pass':<{width}}  {'runs':>4}  {'seconds':>10}  {'share':>6}"]
        for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
            share = seconds / total if total else 0.0
            lines.append(f"{name:<{width}}  {counts[name]:>4}  {seconds:>10.6f}  {share:>6.1%}")
        lines.append(f"{'total':<{width}}  {len(self.records):>4}  {total:>10.6f}")
        return "\n".join(lines)


class VerifyAfterEach(PassInstrument):
    """Run the well-formedness check after each pass; an ill-formed result raises PassError naming the pass."""

    def run_after_pass(self, mod, info):
        check_pass_result(info, mod)
