"""Parse / verify / print time of generated N-layer MLP scripts, against TVM 0.27's from_source / script().

Run by hand:  python benchmarks/bench_parse.py [--layers 100 667 1000 5000 50000] [--chain 100000] [--tvm-max 1000]

Each layer is matmul, bias add, relu (3 bindings) with its own weight and bias parameters; the text is
what the printer writes (every binding annotated, every attribute explicit), so TVM reads the same
text. TVM 0.27's parser grows faster than linearly (~9 s at 2,001 bindings), so it is only run up to
--tvm-max layers. Ratios compare the two systems measured in the same run.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from retrograd.ir import well_formed  # noqa: E402
from retrograd.ir.structural import structural_equal  # noqa: E402
from retrograd.parser import parse, print_module  # noqa: E402
from models import mlp_text  # noqa: E402


def chain_text(n: int) -> str:
    ops = ("R.exp", "R.sin", "R.negative")
    t = 'R.Tensor((4,), dtype="float32")'
    lines = ["@I.ir_module", "class Module:", "    @R.function", f"    def main(x: {t}) -> {t}:", "        with R.dataflow():"]
    prev = "x"
    for i in range(n):
        lines.append(f"            v{i}: {t} = {ops[i % 3]}({prev})")
        prev = f"v{i}"
    lines += [f"            R.output({prev})", f"        return {prev}"]
    return "\n".join(lines) + "\n"


def timed(fn, repeat: int):
    """Median wall time of `repeat` runs (each after a collection, so garbage of one run does not tax the next)."""
    times, result = [], None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def count_bindings(mod) -> int:
    return sum(len(b.bindings) for f in mod.functions().values() for b in f.body.blocks)


def bench_mlp(layers_list, tvm_max: int) -> None:
    try:
        from tvm.script import from_source
    except ImportError:
        from_source = None
        print("TVM not installed: retrograd only")
    head = f"{'layers':>7} {'bindings':>9} {'parse s':>9} {'bind/s':>9} {'verify s':>9} {'print s':>8} " \
           f"{'TVM parse s':>12} {'TVM print s':>12} {'parse x':>8} {'print x':>8}"
    print(head)
    print("-" * len(head))
    for layers in layers_list:
        text = mlp_text(layers)
        repeat = 5 if layers <= 1000 else 1
        t_parse, mod = timed(lambda: parse(text), repeat)
        n = count_bindings(mod)
        t_verify, problems = timed(lambda: well_formed(mod), repeat)
        assert problems == [], problems[:3]
        t_print, printed = timed(lambda: print_module(mod), repeat)
        tvm_parse = tvm_print = None
        if from_source is not None and layers <= tvm_max:
            tvm_parse, tvm_mod = timed(lambda: from_source(printed), 1)
            tvm_print, _ = timed(lambda: tvm_mod.script(), 3)
        cols = [f"{layers:>7}", f"{n:>9}", f"{t_parse:>9.3f}", f"{n / t_parse:>9.0f}", f"{t_verify:>9.3f}",
                f"{t_print:>8.3f}"]
        if tvm_parse is not None:
            cols += [f"{tvm_parse:>12.3f}", f"{tvm_print:>12.3f}", f"{tvm_parse / t_parse:>7.1f}x",
                     f"{tvm_print / t_print:>7.1f}x"]
        else:
            cols += [f"{'skipped':>12}", f"{'skipped':>12}", f"{'-':>8}", f"{'-':>8}"]
        print(" ".join(cols), flush=True)


def bench_chain(n: int) -> None:
    text = chain_text(n)
    t_parse, mod = timed(lambda: parse(text), 1)
    t_verify, problems = timed(lambda: well_formed(mod), 1)
    t_print, printed = timed(lambda: print_module(mod), 1)
    t_reparse, back = timed(lambda: parse(printed), 1)
    t_equal, same = timed(lambda: structural_equal(mod, back), 1)
    assert problems == [] and same and print_module(back) == printed
    print(f"chain of {n} bindings: parse {t_parse:.2f} s ({n / t_parse:.0f} bindings/s), verify {t_verify:.2f} s, "
          f"print {t_print:.2f} s, reparse {t_reparse:.2f} s, structural_equal {t_equal:.2f} s; "
          f"round trip equal and printing a fixpoint (recursion limit {sys.getrecursionlimit()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, nargs="*", default=[100, 667, 1000, 5000, 50000])
    ap.add_argument("--chain", type=int, default=100_000)
    ap.add_argument("--tvm-max", type=int, default=1000, help="largest layer count also given to TVM")
    args = ap.parse_args()
    bench_mlp(args.layers, args.tvm_max)
    if args.chain:
        bench_chain(args.chain)


if __name__ == "__main__":
    main()
