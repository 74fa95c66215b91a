"""The plan report: what the checkpoint pass kept and recomputed, at what cost, for which peak."""

from __future__ import annotations

import attrs

from retrograd.analysis.memory import human_bytes


@attrs.frozen
class PlanReport:
    """One checkpoint plan.

    kept: values with a buffer of their own that are never recomputed; recomputed: distinct values
    recomputed at least once; recomputations: bindings added (a value may be recomputed more than once);
    extra_cost / base_cost: FLOPs-like cost of the recomputations / of the function as written;
    extra_matmul_cost: the part of extra_cost spent in matmul and conv; unplanned_peak: the function's peak
    before planning; predicted_peak: the memory model's peak of the rewritten function; chosen: per
    stage, (stage binding, recomputed bindings) where recomputation happens.
    """

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
        """The report of `schedule` for Problem `p`."""
        stages = [(t, group) for t, group in enumerate(schedule.recompute) if group]
        every = [v for _, group in stages for v in group]
        recomputed = set(every)
        return cls(
            function, policy, budget, unplanned, peak,
            kept=sum(1 for i in range(p.n) if p.sizes[i] > 0 and i not in recomputed),
            recomputed=len(recomputed),
            recomputations=len(every),
            extra_cost=sum((p.costs[v] for v in every), 0.0),
            base_cost=float(sum(p.costs)),
            extra_matmul_cost=sum((p.costs[v] for v in every if p.kinds[v] in ("matmul", "conv")), 0.0),
            chosen=tuple((p.names[t], tuple(p.names[v] for v in group)) for t, group in stages),
        )

    def summary(self) -> str:
        share = f" (+{self.extra_cost / self.base_cost * 100:.1f}%)" if self.base_cost else ""
        _bytes = lambda n: f"{n} B" if human_bytes(n) == f"{n} B" else f"{n} B ({human_bytes(n)})"  # noqa: E731
        budget = _bytes(self.budget) if self.budget is not None else "none"
        return (
            f"checkpoint {self.function} [{self.policy}]: kept {self.kept}, recomputed {self.recomputed} "
            f"({self.recomputations} bindings), extra FLOPs {self.extra_cost:.4g}{share}, "
            f"predicted peak {_bytes(self.predicted_peak)} vs budget {budget}, unplanned {_bytes(self.unplanned_peak)}"
        )

    def details(self) -> str:
        """The summary, then one line per stage with recomputations."""
        return "\n".join([self.summary()] + [f"  before {stage}: recompute {', '.join(names)}" for stage, names in self.chosen])

    __str__ = summary

