"""Placeholder of the planner's problem.py (branch `planner` replaces it): the interface's two records."""

from __future__ import annotations

import attrs


@attrs.frozen
class Problem:
    sizes: tuple
    costs: tuple
    deps: tuple
    recomputable: tuple
    outputs: tuple = ()
    pinned_bytes: int = 0
    alias_of: tuple = ()
    inplace: tuple = ()
    kinds: tuple = ()
    names: tuple = ()


@attrs.frozen
class Schedule:
    recompute: tuple
