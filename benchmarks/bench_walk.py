"""The generic ExprMutator's no-op walk against the fastest private walk the passes had before it.

Run by hand:  python benchmarks/bench_walk.py [--layers 2500] [--repeat 15]

The function walked is the adjoint of an N-layer MLP (Gradient of `mlp_text`, 2,500 layers: 25,002
bindings), already cleaned up, so neither walk changes anything. The reference is dead-code
elimination's former private backward walk (the fastest of the four private walks DCE,
fold-constant, simplify and CSE had; copied here as it was). Runs alternate; each side's best time
is reported, with the cyclic GC paused as the Gradient pass pauses it (a full collection landing in
one timed run would swamp a 20 ms walk). Target: ratio at most 1.5.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import retrograd  # noqa: E402
from models import mlp_text  # noqa: E402
from retrograd.ir.vars import read_vars  # noqa: E402
from retrograd.ir.block import VarBinding  # noqa: E402
from retrograd.ir.expr import Function, If, SeqExpr  # noqa: E402
from retrograd.ir.functor import ExprMutator  # noqa: E402
from retrograd.passes import Gradient  # noqa: E402
from retrograd.passes.cse import eliminate_common_subexpressions  # noqa: E402
from retrograd.passes.dce import eliminate_dead_code, is_pure  # noqa: E402
from retrograd.passes.fold_constant import fold_constants  # noqa: E402
from retrograd.passes.simplify import simplify_function  # noqa: E402

# -- the reference: DCE's private walk as it was before the passes moved onto ExprMutator ------------


def reference_dce(func: Function, mod=None) -> Function:
    body = _dce_seq(func.body, mod)
    if body is func.body:
        return func
    return Function(func.params, body, func.ret_struct_info, func.is_pure, func.private, dict(func.attrs), span=func.span)


def _dce_seq(seq: SeqExpr, mod) -> SeqExpr:
    reads: list = []
    read_vars(seq.body, reads)
    live = set(reads)
    new_blocks = []
    changed = False
    for block in reversed(seq.blocks):
        kept = []
        block_changed = False
        for b in reversed(block.bindings):
            if b.var not in live and is_pure(b.value, mod):
                block_changed = True
                continue
            value = b.value
            if isinstance(value, If):
                tb, fb = _dce_seq(value.true_branch, mod), _dce_seq(value.false_branch, mod)
                if tb is not value.true_branch or fb is not value.false_branch:
                    value = If(value.cond, tb, fb, value.struct_info, span=value.span)
                    b = VarBinding(b.var, value, span=b.span)
                    block_changed = True
            reads.clear()
            read_vars(value, reads)
            live.update(reads)
            kept.append(b)
        changed |= block_changed
        if not block_changed:
            new_blocks.append(block)
        elif kept:
            kept.reverse()
            new_blocks.append(type(block)(tuple(kept), span=block.span))
    if not changed:
        return seq
    new_blocks.reverse()
    return SeqExpr(tuple(new_blocks), seq.body, seq.struct_info, span=seq.span)


# -- timing ---------------------------------------------------------------------------------------------


def best_times(fns: dict, repeat: int) -> dict:
    """Best wall time of each function, the functions run in turn `repeat` times."""
    best = {name: float("inf") for name in fns}
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for name, fn in fns.items():
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
    finally:
        gc.enable()
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2500)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    mod = retrograd.parse(mlp_text(args.layers, transposed_weights=True, scalar_loss=True))
    adj = Gradient("main")(mod)["main_adjoint"]
    n = sum(len(block.bindings) for block in adj.body.blocks)
    walks = {
        "reference (old private DCE walk)": lambda: reference_dce(adj),
        "ExprMutator no-op walk": lambda: ExprMutator().visit_expr(adj),
    }
    for name, fn in walks.items():
        assert fn() is adj, f"{name} changed a function it should leave alone"
    best = best_times(walks, args.repeat)
    ref, new = best.values()
    print(f"adjoint of {args.layers} layers: {n} bindings, best of {args.repeat} alternating runs")
    for name, t in best.items():
        print(f"  {name:<34} {t * 1e3:8.1f} ms  {t / n * 1e6:6.2f} us/binding")
    ratio = new / ref
    print(f"  ratio mutator / reference: {ratio:.2f} (target <= 1.5: {'ok' if ratio <= 1.5 else 'MISSED'})")
    passes = {
        "dce": lambda: eliminate_dead_code(adj),
        "fold-constant": lambda: fold_constants(adj),
        "simplify": lambda: simplify_function(adj),
        "cse": lambda: eliminate_common_subexpressions(adj),
    }
    print("the passes on the same function (nothing to change):")
    for name, t in best_times(passes, max(3, args.repeat // 3)).items():
        print(f"  {name:<34} {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
