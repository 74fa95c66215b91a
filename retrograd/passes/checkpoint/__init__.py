"""Checkpoint planning: choose values to recompute so that a function's peak of live bytes meets a budget."""

from retrograd.passes.checkpoint.policies import POLICIES, least_feasible, solve  # noqa: F401
from retrograd.passes.checkpoint.problem import InfeasibleBudget, Problem, Schedule  # noqa: F401
from retrograd.passes.checkpoint.simulate import Simulation, simulate  # noqa: F401
from retrograd.passes.checkpoint.budget import Budget, parse_budget  # noqa: F401,E402
from retrograd.passes.checkpoint.report import PlanReport  # noqa: F401,E402
from retrograd.passes.checkpoint.pass_ import Checkpoint, InfeasibleBudgetError, plan_checkpoint  # noqa: F401,E402
