"""A small mutation-testing harness, run by hand: one-line mutations of core logic, each applied to a
temporary copy of the repository, then the tests that should catch it; reports killed and surviving mutants.

    python tools/mutation.py                 # every mutant
    python tools/mutation.py --only cse-key  # a few, by id (repeatable)
    python tools/mutation.py --list

A mutant is killed when its tests fail (or time out); it survives when they pass. A mutation whose
text is no longer found is reported as stale (the list must follow the code), never as killed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (id, file, original text, mutated text, tests that must catch it)
MUTANTS = [
    ("max-tie", "retrograd/ops/binary.py", '_max_min_grad("greater_equal")', '_max_min_grad("greater")',
     ["tests/passes/test_gradient_op_edges.py", "tests/ops/test_grad_rules_math.py"]),
    ("min-tie", "retrograd/ops/binary.py", '_max_min_grad("less_equal")', '_max_min_grad("less")',
     ["tests/passes/test_gradient_op_edges.py", "tests/ops/test_grad_rules_math.py"]),
    ("pool-ceil", "retrograd/ops/kernels/window.py", "if (n - 1) * s >= size + p0:", "if (n - 1) * s > size + p0:",
     ["tests/ops/test_kernels_pool.py"]),
    ("printer-ndim", "retrograd/ir/text.py", 'return f"R.Shape(ndim={s.ndim})" if s.ndim != -1 else "R.Shape"',
     'return f"R.Shape(ndim={s.ndim})" if s.ndim > 0 else "R.Shape"', ["tests/parser/test_printer.py"]),
    ("cse-key", "retrograd/passes/cse.py", "return (value.op.name, tuple(_arg_key(a) for a in value.args), attrs)",
     "return (value.op.name, tuple(_arg_key(a) for a in value.args))", ["tests/passes/test_cse.py"]),
    ("permute-compose", "retrograd/passes/simplify.py", "composed = tuple(inner_axes[a] for a in axes)",
     "composed = tuple(axes[a] for a in inner_axes)", ["tests/passes/test_simplify.py"]),
    ("dce-if", "retrograd/passes/dce.py", "return _seq_pure(value.true_branch, mod) and _seq_pure(value.false_branch, mod)",
     "return _seq_pure(value.true_branch, mod) or _seq_pure(value.false_branch, mod)", ["tests/passes/test_dce.py"]),
    ("power-guard", "retrograd/ops/binary.py", "R.log(R.where(flat, scalar(1, x1), x1))", "R.log(x1)",
     ["tests/passes/test_gradient_op_edges.py"]),
    ("take-clip", "retrograd/ops/index/take_slice.py", "return R.clip(indices, PrimValue(0), PrimValue(size - 1))",
     "return R.clip(indices, PrimValue(0), PrimValue(size))", ["tests/passes/test_gradient_sparse.py"]),
    ("sum-keepdims", "retrograd/ops/statistical.py", 'if call.attrs["keepdims"] or not axis:', "if not axis:",
     ["tests/ops/test_grad_rules_math.py", "tests/ops/test_op_gradients.py"]),
    ("mean-count", "retrograd/ops/statistical.py", "return scalar(float(math.prod(dims)), x)", "return scalar(float(math.prod(dims) + 1), x)",
     ["tests/ops/test_op_gradients.py"]),
    ("nll-mean", "retrograd/ops/nn/loss.py", "coef = R.divide(R.multiply(g, R.subtract(per_entry, R.multiply(out, valid))), total)",
     "coef = R.divide(R.multiply(g, per_entry), total)", ["tests/passes/test_gradient_op_edges.py"]),
    ("sweep-accumulate", "retrograd/passes/gradient/sweep.py", 'return self.bb.emit(get_op("relax.add")(a, b), f"{name}_adjoint")',
     'return self.bb.emit(get_op("relax.subtract")(a, b), f"{name}_adjoint")', ["tests/passes/test_gradient_numeric.py"]),
    ("vjp-fresh", "retrograd/passes/gradient/transform.py", "while name in self.mod or name in self.reserved:", "while name in self.reserved:",
     ["tests/passes/test_gradient_api.py"]),
    ("check-nothing", "retrograd/testing.py", "ok=checked > 0 and bool(ratio <= 1.0),", "ok=name is None or bool(ratio <= 1.0),",
     ["tests/passes/test_gradient_numeric.py"]),
    ("zero-d-shape", "retrograd/ir/struct_info.py", "elif self.shape is None and self.ndim == 0:", "elif self.shape is None and self.ndim == -2:",
     ["tests/passes/test_gradient_symbolic.py"]),
    ("take-uint64", "retrograd/ops/kernels/index.py", "idx = np.minimum(idx, size)  # still", "idx = idx  # still",
     ["tests/ops/test_kernels_index.py"]),
    ("slice-dynamic", "retrograd/ops/index/take_slice.py", "where = R.strided_slice(axis_positions(x, a), axes=[0], begin=[b], end=[e], strides=[s])",
     "where = R.strided_slice(axis_positions(x, a), axes=[0], begin=[b], end=[e])", ["tests/passes/test_gradient_symbolic.py"]),
    ("relu-grad-at-zero", "retrograd/ops/nn/activation.py", "return [R.where(R.greater(out, zero), g, zero)]", "return [R.where(R.greater_equal(out, zero), g, zero)]",
     ["tests/ops/test_grad_rules_nn.py"]),
    ("executor-errstate", "retrograd/runtime/executor.py", 'with np.errstate(all="ignore"):', 'with np.errstate(all="warn"):',
     ["tests/runtime/test_executor_warnings.py"]),
]


def _copy_repo(dest: Path) -> None:
    for name in ("retrograd", "tests", "tools", "examples"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("conftest.py", "pyproject.toml", "pytest.ini", "setup.cfg"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, dest / name)


def run(mutants, timeout: float) -> int:
    killed = survived = stale = 0
    with tempfile.TemporaryDirectory(prefix="retrograd-mutation-") as tmp:
        work = Path(tmp)
        _copy_repo(work)
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
        # The unmutated copy must pass the same tests, or every "kill" would be that failure's.
        baseline = sorted({t for *_, tests in mutants for t in tests})
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *baseline],
                              cwd=work, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"the unmutated tests fail; no score:\n{proc.stdout[-3000:]}")
            return 2
        for mid, rel, old, new, tests in mutants:
            path = work / rel
            text = path.read_text()
            if text.count(old) != 1:
                print(f"STALE     {mid}: the original text occurs {text.count(old)} times in {rel}")
                stale += 1
                continue
            path.write_text(text.replace(old, new))
            start = time.perf_counter()
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
                    cwd=work, env=env, capture_output=True, text=True, timeout=timeout,
                )
                dead = proc.returncode != 0
                how = "tests failed" if dead else "tests passed"
            except subprocess.TimeoutExpired:
                dead, how = True, "timed out"
            finally:
                path.write_text(text)
            took = time.perf_counter() - start
            if dead:
                killed += 1
            else:
                survived += 1
            print(f"{'KILLED' if dead else 'SURVIVED':9} {mid} ({how}, {took:.1f} s)", flush=True)
    total = killed + survived
    score = 100.0 * killed / total if total else 0.0
    print(f"\nmutation score: {killed}/{total} killed ({score:.0f}%), {survived} survived, {stale} stale")
    return 1 if survived or stale else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="run only the mutant with this id (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant's test run")
    args = ap.parse_args(argv)
    if args.list:
        for mid, rel, *_ in MUTANTS:
            print(f"{mid:20} {rel}")
        return 0
    chosen = [m for m in MUTANTS if not args.only or m[0] in args.only]
    unknown = set(args.only or ()) - {m[0] for m in chosen}
    if unknown:
        ap.error(f"no mutant named {', '.join(sorted(unknown))}")
    return run(chosen, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
