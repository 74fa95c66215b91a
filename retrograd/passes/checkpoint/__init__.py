"""Checkpoint planning: choose values to recompute so that a function's peak of live bytes meets a budget."""

from retrograd.passes.checkpoint.policies import POLICIES, least_feasible, solve  # noqa: F401
from retrograd.passes.checkpoint.problem import InfeasibleBudget, Problem, Schedule  # noqa: F401
from retrograd.passes.checkpoint.simulate import Simulation, simulate  # noqa: F401
from retrograd.passes.checkpoint.pass_ import Budget, Checkpoint, InfeasibleBudgetError  # noqa: F401,E402
from retrograd.passes.checkpoint.pass_ import PlanReport, parse_budget, plan_checkpoint  # noqa: F401,E402
