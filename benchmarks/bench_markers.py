"""Checkpoint markers in Gradient: measured peak memory and time of a marked chain's adjoint against the unmarked one.

Run by hand:  python benchmarks/bench_markers.py [--layers 32] [--every 8] [--width 64] [--batch 512]

For a tanh chain and a matmul+tanh chain, Gradient runs on the same chain with and without
start_checkpoint/end_checkpoint segments of `--every` layers; both adjoints run on the executor with the
same inputs. Reported: the executor's measured peak_live_bytes (and the intermediates without the
parameters, in activations of batch x width float32), the median time of a call, and whether the
gradients are bitwise identical.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "passes"))

import retrograd  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from checkpoint_cases import chain  # noqa: E402  (the chain the tests measure)


def run(text: str, inputs: list, repeat: int):
    mod = Gradient("main")(retrograd.parse(text))
    fn = retrograd.build(mod)["main_adjoint"]
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn(*inputs)
        times.append(time.perf_counter() - t)
    return out, fn.exe.stats, statistics.median(times)


def flat(value) -> list:
    return [np.asarray(value)] if not isinstance(value, tuple) else [a for v in value for a in flat(v)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    act = args.batch * args.width * 4
    print(f"{args.layers} layers, segments of {args.every}, activation {act} bytes")
    print(f"{'chain':<12} {'adjoint':<9} {'peak bytes':>11} {'peak acts':>9} {'interm. acts':>12} {'ms':>8} {'bitwise':>8}")
    for matmul in (False, True):
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal((args.batch, args.width)).astype("float32")]
        if matmul:
            scale = 1.0 / np.sqrt(args.width)
            inputs += [(rng.standard_normal((args.width, args.width)) * scale).astype("float32") for _ in range(args.layers)]
        plain, ps, pt = run(chain(args.layers, 0, args.width, args.batch, matmul), inputs, args.repeat)
        marked, ms, mt = run(chain(args.layers, args.every, args.width, args.batch, matmul), inputs, args.repeat)
        same = all(a.tobytes() == b.tobytes() for a, b in zip(flat(plain), flat(marked)))
        name = "matmul+tanh" if matmul else "tanh"
        for label, st, t in (("unmarked", ps, pt), ("marked", ms, mt)):
            print(
                f"{name:<12} {label:<9} {st.peak_live_bytes:>11} {st.peak_live_bytes / act:>9.1f} "
                f"{st.peak_intermediate_bytes / act:>12.1f} {t * 1e3:>8.2f} {'yes' if same else 'NO':>8}"
            )


if __name__ == "__main__":
    main()
