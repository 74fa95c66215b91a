"""ONNX backend node-test coverage of retrograd's ONNX importer.

Runs every case of `onnx.backend.test.case.node.collect_testcases(None)` through
retrograd.frontend.onnx_backend and compares outputs as ONNX's runner does (rtol 1e-3, atol 1e-7
unless the case says otherwise). Each case is bounded in time (SIGALRM). Prints per operator:
pass / pass after specializing an import-time input / import error / run error / wrong, and totals.

    PYTHONPATH=. python benchmarks/bench_onnx_coverage.py [--filter SUBSTR] [--timeout 20] [--errors]
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import time
import warnings

import numpy as np


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def op_of(case) -> str:
    node = case.model.graph.node
    return node[-1].op_type if node else "?"


def compare(ref, got, rtol, atol) -> bool:
    if len(ref) != len(got):
        return False
    from retrograd.frontend.onnx_backend import to_array

    for r, o in zip(ref, got):
        r = to_array(r)
        o = np.asarray(o)
        if r.shape != o.shape:
            return False
        if r.dtype == object or r.dtype.kind in "US":
            if not np.array_equal(r, o):
                return False
            continue
        if r.dtype.kind in "biu":
            if not np.array_equal(r, o):
                return False
            continue
        try:
            np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError:
            return False
    return True


def run_case(case, timeout: float):
    """('pass' | 'pass-specialized' | 'import' | 'run' | 'wrong', message)."""
    from retrograd.frontend.onnx_backend import RetrogradRep

    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    stage = "import"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                rep = RetrogradRep(case.model)
                for inputs, outputs in case.data_sets:
                    stage = "import" if rep._fn is None else "run"
                    try:
                        got = rep.run(inputs)
                    except Exception as err:
                        if rep._fn is None:
                            raise
                        stage = "run"
                        raise err
                    if not compare(outputs, got, case.rtol, case.atol):
                        return "wrong", ""
        return ("pass-specialized" if rep.specialized else "pass"), ""
    except _Timeout:
        return stage, f"timeout after {timeout}s"
    except Exception as err:  # every failure is counted, none stops the sweep
        return stage, f"{type(err).__name__}: {str(err)[:300]}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--filter", default="")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--errors", action="store_true", help="print each failing case's message")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    from onnx.backend.test.case.node import collect_testcases

    cases = [c for c in collect_testcases(None) if args.filter in c.name]
    per_op = collections.defaultdict(collections.Counter)
    totals = collections.Counter()
    t0 = time.perf_counter()
    for case in cases:
        result, msg = run_case(case, args.timeout)
        per_op[op_of(case)][result] += 1
        totals[result] += 1
        if args.errors and result not in ("pass", "pass-specialized"):
            print(f"{case.name}: {result}: {msg}", file=sys.stderr)
    cols = ["pass", "pass-specialized", "import", "run", "wrong"]
    if args.markdown:
        print("| operator | " + " | ".join(cols) + " |")
        print("|---" * (len(cols) + 1) + "|")
        for op in sorted(per_op):
            print(f"| {op} | " + " | ".join(str(per_op[op][c]) for c in cols) + " |")
        print("| **total** | " + " | ".join(f"**{totals[c]}**" for c in cols) + " |")
    else:
        print(f"{'operator':28s}" + "".join(f"{c:>18s}" for c in cols))
        for op in sorted(per_op):
            print(f"{op:28s}" + "".join(f"{per_op[op][c]:18d}" for c in cols))
        print(f"{'TOTAL':28s}" + "".join(f"{totals[c]:18d}" for c in cols))
    print(f"cases {len(cases)}; passed {totals['pass'] + totals['pass-specialized']} "
          f"({totals['pass']} without specializing); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
