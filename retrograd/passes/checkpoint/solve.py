"""Placeholder until the planner's solvers merge: store-all when it fits, else infeasible."""

from __future__ import annotations

from retrograd.passes.checkpoint.problem import STORE_ALL, InfeasibleBudget
from retrograd.passes.checkpoint.simulate import simulate


def solve(problem, budget, policy="budget"):
    peak = simulate(problem, STORE_ALL).peak_bytes
    if budget is not None and peak > budget and policy == "budget":
        raise InfeasibleBudget(budget, peak)
    return STORE_ALL
