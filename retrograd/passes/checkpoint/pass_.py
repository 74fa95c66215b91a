"""The `checkpoint` pass (values recomputed instead of kept, to meet a memory budget) and its plan's report."""

from __future__ import annotations

import attrs

from retrograd.analysis import memory_timeline, peak_memory
from retrograd.analysis.budget import Budget, parse_budget
from retrograd.analysis.memory import human_bytes
from retrograd.errors import PassError, did_you_mean
from retrograd.gc_pause import collector_paused
from retrograd.ir.expr import Function
from retrograd.ir.module import IRModule
from retrograd.passes.checkpoint.extract import extract
from retrograd.passes.checkpoint.problem import InfeasibleBudget, Problem, Schedule
from retrograd.passes.checkpoint.rewrite import rewrite
from retrograd.passes.checkpoint.simulate import simulate
from retrograd.passes.checkpoint.policies import POLICIES, least_plan, solve
from retrograd.passes.infra import OptionError, module_pass
from retrograd.passes.infra.context import hook


@attrs.frozen
class PlanReport:
    """One checkpoint plan. kept: values with a buffer of their own never recomputed; recomputed: distinct
    values recomputed; recomputations: bindings added; extra_cost / base_cost: FLOPs-like cost of those /
    of the function (extra_matmul_cost: of matmul and conv); predicted_peak: the exact memory model's, of
    the rewritten function; chosen: (stage binding, recomputed bindings) per stage that recomputes."""

    function: str
    policy: str
    budget: int | None
    unplanned_peak: int
    predicted_peak: int
    kept: int
    recomputed: int
    recomputations: int
    extra_cost: float
    base_cost: float
    extra_matmul_cost: float
    chosen: tuple = ()

    @classmethod
    def of(cls, p, schedule, function: str, policy: str, budget, unplanned: int, peak: int) -> PlanReport:
        every = [v for group in schedule.recompute for v in group]
        recomputed, extra = set(every), sum((p.costs[v] for v in every), 0.0)
        matmul = sum((p.costs[v] for v in every if p.kinds[v] in ("matmul", "conv")), 0.0)
        kept = sum(1 for i in range(p.n) if p.sizes[i] > 0 and i not in recomputed)
        chosen = tuple((p.names[t], tuple(p.names[v] for v in g)) for t, g in enumerate(schedule.recompute) if g)
        counts = (kept, len(recomputed), len(every), extra, float(sum(p.costs)), matmul)
        return cls(function, policy, budget, unplanned, peak, *counts, chosen)

    def summary(self) -> str:
        share = f" (+{self.extra_cost / self.base_cost * 100:.1f}%)" if self.base_cost else ""
        _bytes = lambda n: f"{n} B" if human_bytes(n) == f"{n} B" else f"{n} B ({human_bytes(n)})"  # noqa: E731
        budget = _bytes(self.budget) if self.budget is not None else "none"
        return (f"checkpoint {self.function} [{self.policy}]: kept {self.kept}, recomputed {self.recomputed} "
                f"({self.recomputations} bindings), extra FLOPs {self.extra_cost:.4g}{share}, predicted peak "
                f"{_bytes(self.predicted_peak)} vs budget {budget}, unplanned {_bytes(self.unplanned_peak)}")

    def details(self) -> str:
        return "\n".join([self.summary()] + [f"  before {stage}: recompute {', '.join(names)}" for stage, names in self.chosen])

    __str__ = summary


InfeasibleBudgetError = InfeasibleBudget  # the pass's name for it (its message gives the budget's forms)


@module_pass(name="checkpoint", aliases={"func": "func_name"})
class Checkpoint:
    """Recompute values of `func_name` instead of keeping them, so that its peak of live bytes fits `budget`
    (as `parse_budget` reads it; None: no limit). policy: "budget" (least recomputation cost within the
    budget), "sqrt" (Chen et al. 2016 segments), "cheap" (recompute only pointwise ops, views, reductions).
    The options are frozen, checked here once (OptionError naming the option); the report goes to each
    PassContext instrument with a `plan_report` hook."""

    def __init__(self, func_name: str, budget: int | str | None = None, policy: str = "budget"):
        if policy not in POLICIES:
            raise OptionError("policy", f"unknown policy {policy!r} (policies: {', '.join(POLICIES)})")
        try:
            self.budget: Budget | None = parse_budget(budget)
        except ValueError as err:
            raise OptionError("budget", str(err)) from None
        self.func_name, self.policy = func_name, policy

    def transform_module(self, mod: IRModule, ctx=None) -> IRModule:
        new_mod, report = _plan(mod, self)
        for inst in getattr(ctx, "instruments", ()):
            hook(inst, "plan_report")(report)
        return new_mod


def plan_checkpoint(mod: IRModule, func_name: str, budget=None, policy: str = "budget") -> tuple[IRModule, PlanReport]:
    """(module with `func_name` rewritten, report). Errors are PassErrors; the input module is unchanged."""
    try:
        checkpoint = Checkpoint(func_name, budget, policy)
    except OptionError as err:
        raise PassError(f"checkpoint: {err}").about_option(err.option) from None
    return _plan(mod, checkpoint)


def _plan(mod: IRModule, options: Checkpoint) -> tuple[IRModule, PlanReport]:
    func_name, parsed, policy = options.func_name, options.budget, options.policy
    func = mod[func_name] if func_name in mod else None
    if not isinstance(func, Function):
        names = [name for name, f in mod.items() if isinstance(f, Function)]
        listed = f"{did_you_mean(func_name, names)} (functions: {', '.join(names) or 'none'})"
        raise PassError(f"checkpoint: the module has no function '{func_name}'{listed}").about_option("func_name")
    # Like Gradient: without the pause, the collector rescans the big IR again and again (superlinear).
    with collector_paused():
        ex = extract(func)
        problem = planning_problem(mod, func_name, ex)
        unplanned = _measure(mod, func_name, ex, lambda: func, simulate(problem).check().peak_bytes)
        target = parsed.resolve(unplanned, problem.pinned_bytes) if parsed is not None else None
        # A budget the function meets as it is needs no plan (the Problem may count more than the executor).
        budget = target if policy == "budget" and target is not None and target < unplanned else None

        def least(problem: Problem) -> tuple[int, Schedule | None]:
            """(the least budget the pass meets, its plan; None: the function as it is), by the exact model."""
            peak, plan = least_plan(problem)
            peak = peak if plan is None else _measure(mod, func_name, ex, lambda: rewrite(ex, plan.recompute), peak)
            return (unplanned, None) if plan is None or peak >= unplanned else (peak, plan)

        try:
            schedule = solve(problem, budget, policy, least)
            new_func = rewrite(ex, schedule.recompute)
            peak = _measure(mod, func_name, ex, lambda: new_func, simulate(problem, schedule).check().peak_bytes)
            if budget is not None and peak > budget:
                # Not reached while the Problem is exact or counts more than the executor (tested over the corpus).
                raise InfeasibleBudget(budget, least(problem)[0])
        except InfeasibleBudget as err:
            low, pinned = err.least_feasible, problem.pinned_bytes
            # The least feasible budget in the forms `parse_budget` reads: bytes, % of the peak, %act.
            forms = [f"{low} bytes"]
            forms += [f"{low / unplanned * 100:.4g}% of the unplanned peak"] if unplanned else []
            forms += [f"{(low - pinned) / (unplanned - pinned) * 100:.4g}%act"] if unplanned > pinned else []
            message = (f"checkpoint: the budget of {target} bytes for '{func_name}' cannot be met: the least "
                       f"feasible budget is {' = '.join(forms)}; feasible budgets are those "
                       f"from it up (parameters alone: {pinned} bytes; unplanned peak: {unplanned} bytes)")
            raise InfeasibleBudget(target, low, message).about_option("budget") from None
    report = PlanReport.of(problem, schedule, func_name, policy, target, unplanned, peak)
    return (mod if new_func is func else mod.with_function(func_name, new_func)), report


def planning_problem(mod: IRModule, func_name: str, ex) -> Problem:
    """The Problem of `ex` with Problem.inner filled from the exact model (a plan changes none of it)."""
    p = ex.problem
    if not ex.opaque:
        return p
    during = memory_timeline(mod, func_name).during
    own = simulate(p, stage_peaks=True).check().stage_peaks
    return attrs.evolve(p, inner=[max(0, during[i] - own[i]) if i in ex.opaque else 0 for i in range(p.n)])


def _measure(mod: IRModule, func_name: str, ex, new_func, planned: int) -> int:
    """The exact model's peak: the simulator's `planned` without an If or a call (simulate.py), else new_func()'s."""
    return peak_memory(mod.with_function(func_name, new_func()), func_name) if ex.opaque else planned
