"""If nests 100 to 1000 deep: print, lex, parse back, run; each level indents 4 more spaces, so the
text grows with the square of the depth and lexing must stay linear in its size.

Run by hand:  python benchmarks/bench_deep_if.py [--depths 100 300 1000]

Prints, per depth: the text's size, then seconds for mod.script(), the lexer alone, parse() (lexer,
LALR and conversion), structural_equal against the original, and build + one run. Lexing is linear
when its time grows like the size (9x from 100 to 300, 11x from 300 to 1000), not faster.
Under Python's default recursion limit, as the tests run it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "passes"))

import numpy as np  # noqa: E402

import retrograd  # noqa: E402
from retrograd.parser.syntax import _driver  # noqa: E402
from test_deep_if import nest  # noqa: E402  (the nest the tests check)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[100, 300, 1000])
    args = ap.parse_args()
    sys.setrecursionlimit(1000)
    lexer = _driver().lexer
    x = np.array([1.5, -2.0], "float32")
    print(f"{'depth':>6} {'MB':>7} {'script':>8} {'lex':>8} {'parse':>8} {'equal':>8} {'build+run':>10}")
    for depth in args.depths:
        mod = nest(depth)
        text, t_script = timed(mod.script)
        _, t_lex = timed(lambda: sum(1 for _ in lexer.lex(text)))
        back, t_parse = timed(lambda: retrograd.parse(text))
        same, t_eq = timed(lambda: retrograd.structural_equal(back, mod))
        assert same
        got, t_run = timed(lambda: retrograd.build(back)["main"](x, np.array(True)))
        np.testing.assert_array_equal(got, 4 * x)
        print(f"{depth:>6} {len(text) / 1e6:>7.2f} {t_script:>8.3f} {t_lex:>8.3f} {t_parse:>8.3f} {t_eq:>8.3f} {t_run:>10.3f}")


if __name__ == "__main__":
    main()
