"""Print every checkpoint plan of the test corpus, the benchmark models and chain problems (lengths 1..60
at several budgets), one line each: (function, policy, budget) -> digest of the schedule, simulated peak,
extra cost. Run it with two trees first on PYTHONPATH and diff the outputs: a planner change that removes
a solver or an option must leave every line identical (or better, with the reason stated).

    PYTHONPATH=/path/to/tree python benchmarks/compare_checkpoint_plans.py > plans.txt
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests"), str(ROOT / "tests" / "passes" / "checkpoint")]

import bench_checkpoint_scale as scale  # noqa: E402
import models  # noqa: E402
from helpers import adjoint_module, chain_problem, corpus_functions  # noqa: E402

from retrograd.errors import DiagnosticError  # noqa: E402
from retrograd.passes.checkpoint import InfeasibleBudget, least_feasible, simulate, solve  # noqa: E402
from retrograd.passes.checkpoint.extract import extract  # noqa: E402
from retrograd.passes.checkpoint.pass_ import planning_problem  # noqa: E402


def plan_line(label: str, p, budget, policy: str) -> str:
    try:
        s = solve(p, budget, policy)
    except InfeasibleBudget as err:
        return f"{label} {policy} {budget}: infeasible, least {err.least_feasible}"
    sim = simulate(p, s).check()
    digest = hashlib.sha1(repr(s.recompute).encode()).hexdigest()[:12]
    return f"{label} {policy} {budget}: {digest} peak {sim.peak_bytes} extra {sim.extra_cost:.6g}"


def problem_lines(label: str, p) -> list[str]:
    high, low = simulate(p).peak_bytes, least_feasible(p)
    out = [f"{label} least {low} unplanned {high}"]
    for frac in (0.2, 0.4, 0.5, 0.6, 0.8, 0.95):
        out.append(plan_line(label, p, low + int((high - low) * frac), "budget"))
    out += [plan_line(label, p, None, policy) for policy in ("sqrt", "cheap")]
    return out


def functions():
    for path in sorted((ROOT / "tests" / "corpus").glob("c*.py")):
        for k, (mod, name) in enumerate(corpus_functions(path)):
            yield f"{path.stem}:{name}:{k}", mod, name
    yield "chain", adjoint_module(models.chain_text(12, width=8, batch=4)), "main_adjoint"
    yield "matmul_relu", adjoint_module(models.matmul_relu_chain_text(8, width=8, batch=4)), "main_adjoint"
    yield "transformer", adjoint_module(models.transformer_text(3, seq=8, d=8)), "main_adjoint"
    yield "resnet", adjoint_module(models.resnet_text(stages=2, blocks=2, channels=4, size=8, batch=2)), "main_adjoint"
    for shape in sorted(scale.SHAPES) + [scale.FORWARD]:
        mod, name = scale.build(shape, 6)
        yield f"scale-{shape}", mod, name


def main() -> None:
    for label, mod, name in functions():
        try:
            p = planning_problem(mod, name, extract(mod[name]))
        except DiagnosticError:
            continue  # symbolic shapes: not planned
        print("\n".join(problem_lines(label, p)), flush=True)
    for steps in range(1, 61):
        p = chain_problem(steps)
        high, low = simulate(p).peak_bytes, least_feasible(p)
        for budget in sorted({low, (low + high) // 2, low + 8, low + 8 * max(1, int(steps**0.5)), high - 8}):
            print(plan_line(f"chain{steps}", p, budget, "budget"), flush=True)


if __name__ == "__main__":
    main()
