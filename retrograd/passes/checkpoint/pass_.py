"""The `checkpoint` pass: plan which values of a function to keep and which to recompute under a memory budget."""

from __future__ import annotations

import attrs

from retrograd.analysis import memory_timeline, peak_memory
from retrograd.errors import PassError, did_you_mean
from retrograd.gc_pause import collector_paused
from retrograd.ir.expr import Function
from retrograd.ir.module import IRModule
from retrograd.passes.checkpoint.budget import both_forms, parse_budget
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.problem import Problem, Schedule
from retrograd.passes.checkpoint.report import PlanReport
from retrograd.passes.checkpoint.rewrite import rewrite
from retrograd.passes.checkpoint.simulate import simulate
from retrograd.passes.checkpoint.policies import POLICIES, least_plan, plan_budget, solve
from retrograd.passes.infra import OptionError, module_pass
from retrograd.passes.infra.context import hook


class InfeasibleBudgetError(PassError):
    """The budget is below the least feasible one, given in bytes as `least_feasible`."""

    def __init__(self, message: str, least_feasible: int):
        super().__init__(message)
        self.least_feasible = least_feasible


def _options(budget, policy: str):
    """(Budget | None, policy), checked once per entry point; ValueError naming the option otherwise."""
    if policy not in POLICIES:
        raise ValueError("policy", f"unknown policy {policy!r} (policies: {', '.join(POLICIES)})")
    try:
        return parse_budget(budget), policy
    except ValueError as err:
        raise ValueError("budget", str(err)) from None


@module_pass(name="checkpoint", aliases={"func": "func_name"})
class Checkpoint:
    """Recompute values of `func_name` instead of keeping them, so that its peak of live bytes fits `budget`.

    budget: bytes (int), or text: "40%" of the function's unplanned peak, "50%act" of its activation
    memory (the unplanned peak less the parameters), "12MiB", "1.5GB" (KB = 1000, KiB = 1024); None: no
    limit (policy "budget" then recomputes nothing). policy: "budget" (least recomputation cost within
    the budget), "sqrt" (Chen et al. 2016 segments), "cheap" (recompute only pointwise ops, views and
    reductions). The options are frozen; the plan's report goes to each instrument of the PassContext
    with a `plan_report(report)` hook (`plan_checkpoint` returns it).
    """

    def __init__(self, func_name: str, budget: int | str | None = None, policy: str = "budget"):
        try:
            self.budget, self.policy = _options(budget, policy)
        except ValueError as err:
            raise OptionError(*err.args) from None
        self.func_name = func_name

    def transform_module(self, mod: IRModule, ctx=None) -> IRModule:
        new_mod, report = _checked(mod, self.func_name, self.budget, self.policy)
        for inst in getattr(ctx, "instruments", ()):
            hook(inst, "plan_report")(report)
        return new_mod


def plan_checkpoint(mod: IRModule, func_name: str, budget=None, policy: str = "budget") -> tuple[IRModule, PlanReport]:
    """(module with `func_name` rewritten, report). Errors are PassErrors; the input module is unchanged."""
    try:
        parsed, policy = _options(budget, policy)
    except ValueError as err:
        raise PassError(f"checkpoint: {err.args[1]}").about_option(err.args[0]) from None
    return _checked(mod, func_name, parsed, policy)


def _checked(mod: IRModule, func_name: str, parsed, policy: str) -> tuple[IRModule, PlanReport]:
    func = mod[func_name] if func_name in mod else None
    if not isinstance(func, Function):
        names = [name for name, f in mod.items() if isinstance(f, Function)]
        hint = did_you_mean(func_name, names)
        raise PassError(
            f"checkpoint: the module has no function '{func_name}'{hint} (functions: {', '.join(names) or 'none'})"
        ).about_option("func_name")
    # Like Gradient: without the pause, the collector rescans the big IR again and again (superlinear).
    with collector_paused():
        return _plan(mod, func, func_name, parsed, policy)


def _plan(mod: IRModule, func: Function, func_name: str, parsed, policy: str) -> tuple[IRModule, PlanReport]:
    ex = extract(func)
    problem = planning_problem(mod, func_name, ex)
    unplanned = _measure(mod, func_name, ex, func, simulate(problem, None).check().peak_bytes)
    target = parsed.resolve(unplanned, problem.pinned_bytes) if parsed is not None else None
    if policy != "budget" or target is None or target >= unplanned:
        # A budget the function meets as it is needs no plan (the Problem may count more than the executor).
        schedule = solve(problem, None, policy)
    else:
        schedule = plan_budget(problem, target)
        if schedule is None:
            least, schedule = _least(mod, func_name, ex, problem, unplanned)
            if schedule is None or least > target:
                raise _infeasible(func_name, problem, target, least, unplanned)
    new_func = rewrite(ex, schedule.recompute)
    peak = _measure(mod, func_name, ex, new_func, simulate(problem, schedule).check().peak_bytes)
    if policy == "budget" and target is not None and peak > target:
        # Not reached while the Problem is exact or counts more than the executor (tested over the corpus).
        raise _infeasible(func_name, problem, target, _least(mod, func_name, ex, problem, unplanned)[0], unplanned)
    report = _report(ex, schedule, func_name, policy, target, unplanned, peak)
    return (mod if new_func is func else mod.with_function(func_name, new_func)), report


def planning_problem(mod: IRModule, func_name: str, ex) -> Problem:
    """The Problem of `ex` with what each If and call of another function holds inside it (Problem.inner):
    the exact memory model's bytes during it over the Problem's own, on the function as written (the most
    over the paths through its branches). A plan changes none of what they hold inside, and can only
    free their inputs earlier: the Problem then counts at least what the executor measures."""
    p = ex.problem
    if not ex.opaque:
        return p
    during = memory_timeline(mod, func_name).during
    own = simulate(p, stage_peaks=True).check().stage_peaks
    inner = [0] * p.n
    for ins in ex.plan.block.ins:
        if ins.kind in ("if", "call"):
            inner[ins.binding] = max(0, during[ins.binding] - own[ins.binding])
    return attrs.evolve(p, inner=inner)


def _least(mod: IRModule, func_name: str, ex, problem: Problem, unplanned: int) -> tuple[int, Schedule | None]:
    """(the least budget the pass meets, the plan meeting it; None: the function as it is): the measured
    peak of the plan for the Problem's least peak, or the unplanned peak when that is no higher."""
    _, plan = least_plan(problem)
    if plan is None:
        return unplanned, None
    peak = _measure(mod, func_name, ex, rewrite(ex, plan.recompute), simulate(problem, plan).peak_bytes)
    return (unplanned, None) if peak >= unplanned else (peak, plan)


def _infeasible(func_name: str, problem: Problem, target: int, least: int, unplanned: int) -> InfeasibleBudgetError:
    pinned = problem.pinned_bytes
    return InfeasibleBudgetError(
        f"checkpoint: the budget of {target} bytes for '{func_name}' cannot be met: the least feasible "
        f"budget is {both_forms(least, unplanned, pinned)}; feasible budgets are those from it up "
        f"(parameters alone: {pinned} bytes; unplanned peak: {unplanned} bytes)",
        least,
    ).about_option("budget")


def _measure(mod: IRModule, func_name: str, ex, new_func: Function, planned: int) -> int:
    """The (rewritten) function's peak by the exact static memory model (what the executor will measure).
    Without an If or a call of another function it is the simulator's, `planned` (proven over the corpus
    and the benchmark functions by tests/passes/checkpoint/test_ckpt_model_equals_exact.py); with them the
    Problem may count more than the executor (a branch returning an outer value), and the exact model
    measures the rewritten function."""
    if not ex.opaque:
        return planned
    return peak_memory(mod.with_function(func_name, new_func), func_name)


def _report(ex, schedule: Schedule, func_name, policy, target, unplanned, peak) -> PlanReport:
    p = ex.problem
    recomputed: set[int] = set()
    chosen = []
    extra = extra_mm = 0.0
    count = 0
    for t, group in enumerate(schedule.recompute):
        if not group:
            continue
        chosen.append((p.names[t], tuple(p.names[v] for v in group)))
        for v in group:
            recomputed.add(v)
            count += 1
            extra += p.costs[v]
            if p.kinds[v] in ("matmul", "conv"):
                extra_mm += p.costs[v]
    own = [i for i in range(p.n) if p.sizes[i] > 0]
    kept = sum(1 for i in own if i not in recomputed)
    return PlanReport(
        function=func_name,
        policy=policy,
        budget=target,
        unplanned_peak=unplanned,
        predicted_peak=peak,
        kept=kept,
        recomputed=len(recomputed),
        recomputations=count,
        extra_cost=extra,
        base_cost=float(sum(p.costs)),
        extra_matmul_cost=extra_mm,
        chosen=tuple(chosen),
    )
