"""Every regular expression on user text runs in linear time: adversarial inputs at 1,000 and 10,000
characters, through the public entry points (script parser, pipeline parser) and the patterns themselves.

Run by hand:  python benchmarks/bench_regex.py [--bound 0.5]

For each input, the time at 10,000 characters must stay under --bound seconds and under 15x the time
at 2,000 (linear is 5x; quadratic would be 25x, exponential never finishes). Module-level patterns are
attacked the way the package applies them (match at a position). Exit code 1 on a failure.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from retrograd.errors import DiagnosticError  # noqa: E402
from retrograd.ir.strings import EscapeError, unescape  # noqa: E402
from retrograd.parser import parse  # noqa: E402
from retrograd.passes import parse_pipeline  # noqa: E402


def script_inputs(n: int) -> dict[str, str]:
    """Prefixes that make a backtracking regex retry, each ending where no token matches."""
    return {
        "spaces then $": "x =" + " " * n + "$",
        "tabs/form feeds then $": "x =" + "\t\f " * (n // 3) + "$",
        "continuations then $": "x = " + "\\\n" * (n // 2) + "$",
        "backslash-space continuations": "x = " + "\\ \t" * (n // 3) + "$",
        "unterminated string of escapes": 'x = "' + "\\a" * (n // 2),
        "unterminated long string": "x = '''" + "'" * (n - 8),
        "many long-string openers": '"""' * (n // 3),
        "digits then letter": "x = " + "1" * n + "$",
        "digits and dots": "x = " + "1." * (n // 2) + "$",
        "exponent run": "x = 1" + "e" * n,
        "dotted name run": "x = " + "a." * (n // 2) + "$",
        "comment then $": "#" * n + "\n$",
        "blank lines": "\n" * n + "$",
        "indented blank lines": " \n" * (n // 2) + "$",
        "nested brackets": "x = " + "(" * min(n, 150),
        "minus run": "x = " + "- " * (n // 2) + "$",
        "TIR decorator lookalike": " " * n + "@T.prim_funcx",
        "lines of spaces before @": (" " * 50 + "\n") * (n // 51) + "@",
    }


def pipeline_inputs(n: int) -> dict[str, str]:
    return {
        "pipeline spaces then $": "dce" + " " * n + "$",
        "pipeline unterminated string": 'gradient(func="' + "\\a" * (n // 2),
        "pipeline digits then letter": "gradient(x=" + "1" * n + "a)",
        "pipeline signed exponent": "gradient(x=1" + "e+" * (n // 2) + ")",
        "pipeline dashed name": "a" + "-" * n + "$",
    }


def escape_inputs(n: int) -> dict[str, str]:
    return {
        "escapes: backslashes": "\\" * n,
        "escapes: short hex": "\\x1" * (n // 3),
        "escapes: open names": "\\N{" * (n // 3),
    }


def _time(fn, text: str) -> float:
    """Best of three runs."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        try:
            fn(text)
        except (DiagnosticError, EscapeError):
            pass
        best = min(best, time.perf_counter() - t0)
    return best


def _project_patterns() -> list[re.Pattern]:
    """Module-level compiled patterns of the package, for a generic spaces/letters attack."""
    import importlib
    import pkgutil

    import retrograd

    found = []
    for info in pkgutil.walk_packages(retrograd.__path__, "retrograd."):
        if info.name.endswith(".__main__"):  # importing it runs the command
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:
            continue
        found.extend(v for v in vars(mod).values() if isinstance(v, re.Pattern))
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bound", type=float, default=0.5, help="seconds allowed per 10,000-character input")
    args = ap.parse_args(argv)
    checks = [(parse, script_inputs), (parse_pipeline, pipeline_inputs), (unescape, escape_inputs)]
    _time(parse, "x = 1\n")  # load the grammar first
    failures = 0
    print(f"{'input':<36} {'2k (ms)':>9} {'10k (ms)':>9} {'ratio':>6}")
    for fn, make in checks:
        small, large = make(2000), make(10000)
        for name in small:
            t1, t10 = _time(fn, small[name]), _time(fn, large[name])
            ratio = t10 / max(t1, 1e-5)
            bad = t10 > args.bound or (t10 > 0.01 and ratio > 15)
            failures += bad
            print(f"{name:<36} {t1 * 1e3:9.2f} {t10 * 1e3:9.2f} {ratio:6.1f}{'  SLOW' if bad else ''}")
    patterns = _project_patterns()
    attacks = [" " * 10000 + "$", "a" * 10000 + "$", "a." * 5000 + "$", "1" * 10000 + "$", "\\" * 10000, "(" * 10000]
    worst = 0.0
    for pat in patterns:
        for text in attacks:
            t0 = time.perf_counter()
            pat.match(text)
            worst = max(worst, time.perf_counter() - t0)
    failures += worst > args.bound
    print(f"{len(patterns)} module-level patterns x {len(attacks)} attacks: worst {worst * 1e3:.2f} ms")
    print("ok" if not failures else f"{failures} slow input(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
