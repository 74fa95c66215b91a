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
from retrograd.passes.checkpoint.problem import InfeasibleBudget, Problem, Schedule
from retrograd.passes.checkpoint.report import PlanReport
from retrograd.passes.checkpoint.rewrite import rewrite
from retrograd.passes.checkpoint.simulate import simulate
from retrograd.passes.checkpoint.policies import POLICIES, least_plan, solve
from retrograd.passes.infra import OptionError, module_pass
from retrograd.passes.infra.context import hook


class InfeasibleBudgetError(PassError):
    """The budget is below the least feasible one, given in bytes as `least_feasible`."""

    def __init__(self, message: str, least_feasible: int):
        super().__init__(message)
        self.least_feasible = least_feasible


def _options(budget, policy: str):
    """(Budget | None, policy), checked once per entry point; OptionError naming the option otherwise."""
    if policy not in POLICIES:
        raise OptionError("policy", f"unknown policy {policy!r} (policies: {', '.join(POLICIES)})")
    try:
        return parse_budget(budget), policy
    except ValueError as err:
        raise OptionError("budget", str(err)) from None


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
        self.budget, self.policy = _options(budget, policy)
        self.func_name = func_name

    def transform_module(self, mod: IRModule, ctx=None) -> IRModule:
        new_mod, report = _plan(mod, self.func_name, self.budget, self.policy)
        for inst in getattr(ctx, "instruments", ()):
            hook(inst, "plan_report")(report)
        return new_mod


def plan_checkpoint(mod: IRModule, func_name: str, budget=None, policy: str = "budget") -> tuple[IRModule, PlanReport]:
    """(module with `func_name` rewritten, report). Errors are PassErrors; the input module is unchanged."""
    try:
        parsed, policy = _options(budget, policy)
    except OptionError as err:
        raise PassError(f"checkpoint: {err}").about_option(err.option) from None
    return _plan(mod, func_name, parsed, policy)


def _plan(mod: IRModule, func_name: str, parsed, policy: str) -> tuple[IRModule, PlanReport]:
    func = mod[func_name] if func_name in mod else None
    if not isinstance(func, Function):
        names = [name for name, f in mod.items() if isinstance(f, Function)]
        raise PassError(
            f"checkpoint: the module has no function '{func_name}'{did_you_mean(func_name, names)} "
            f"(functions: {', '.join(names) or 'none'})"
        ).about_option("func_name")
    # Like Gradient: without the pause, the collector rescans the big IR again and again (superlinear).
    with collector_paused():
        ex = extract(func)
        problem = planning_problem(mod, func_name, ex)
        unplanned = _measure(mod, func_name, ex, lambda: func, simulate(problem).check().peak_bytes)
        target = parsed.resolve(unplanned, problem.pinned_bytes) if parsed is not None else None
        # A budget the function meets as it is needs no plan (the Problem may count more than the executor).
        budget = target if policy == "budget" and target is not None and target < unplanned else None
        least = lambda problem: _least(mod, func_name, ex, problem, unplanned)  # noqa: E731
        try:
            schedule = solve(problem, budget, policy, least)
            new_func = rewrite(ex, schedule.recompute)
            peak = _measure(mod, func_name, ex, lambda: new_func, simulate(problem, schedule).check().peak_bytes)
            if budget is not None and peak > budget:
                # Not reached while the Problem is exact or counts more than the executor (tested over the corpus).
                raise InfeasibleBudget(budget, least(problem)[0])
        except InfeasibleBudget as err:
            pinned = problem.pinned_bytes
            raise InfeasibleBudgetError(
                f"checkpoint: the budget of {target} bytes for '{func_name}' cannot be met: the least feasible "
                f"budget is {both_forms(err.least_feasible, unplanned, pinned)}; feasible budgets are those "
                f"from it up (parameters alone: {pinned} bytes; unplanned peak: {unplanned} bytes)",
                err.least_feasible,
            ).about_option("budget") from None
    report = PlanReport.of(problem, schedule, func_name, policy, target, unplanned, peak)
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
    peak, plan = least_plan(problem)  # the plan's simulated peak
    if plan is None:
        return unplanned, None
    peak = _measure(mod, func_name, ex, lambda: rewrite(ex, plan.recompute), peak)
    return (unplanned, None) if peak >= unplanned else (peak, plan)


def _measure(mod: IRModule, func_name: str, ex, new_func, planned: int) -> int:
    """The (rewritten) function's peak by the exact memory model (the executor's): without an If or a call
    it is the simulator's, `planned` (tests/passes/checkpoint/test_ckpt_model_equals_exact.py); with them
    the Problem may count more (a branch returning an outer value) and `new_func()`, the rewritten function,
    is measured. Made only then: the least plan of a long chain recomputes O(n^2) values."""
    return peak_memory(mod.with_function(func_name, new_func()), func_name) if ex.opaque else planned
