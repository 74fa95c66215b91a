"""The planner's input and output: a Problem (nodes with sizes, costs, deps), a Schedule, InfeasibleBudget."""

from __future__ import annotations

import attrs

from retrograd.errors import PassError
from retrograd.ops.cost import KINDS

CHEAP_KINDS = frozenset({"elementwise", "view", "reduce"})
HEAVY_KINDS = frozenset({"matmul", "conv", "pool"})  # recomputed only when nothing else fits
LIGHT_KINDS = frozenset(KINDS) - HEAVY_KINDS
_OPTIONAL = {"alias_of": None, "inplace": (), "kinds": "other", "names": None, "fields": (), "field": None, "inner": 0}


def _once(v, item=int) -> tuple:
    """tuple(map(item, v)), equal items held once: a long adjoint repeats a few sizes, costs and in-place
    positions, each an object of its own otherwise (deps, all distinct, are not memoized)."""
    memo: dict = {}
    return tuple([memo.setdefault(x, x) for x in map(item, v)])


def _ints(ds) -> tuple:
    return tuple(map(int, ds))


def _optional(v) -> tuple:
    return tuple(None if a is None else int(a) for a in v)


@attrs.frozen
class Problem:
    """A function's top-level bindings as nodes 0..n-1, node i computed originally at stage i.

    sizes[i]: bytes of node i's own new buffer (0 for an alias). costs[i]: cost of computing it once. deps[i]: nodes
    read by node i, all < i (parameters and constants are not nodes; a node may appear twice). recomputable[i]: False
    for impure calls, If, calls of other functions. outputs: nodes live until the end. pinned_bytes: parameters, live
    for the whole call. alias_of[i]: node i is a view of (or the same object as) node alias_of[i], which must be one of
    its deps; the buffer is counted once, while any alias lives. inplace[i]: positions in deps[i] whose buffer the
    executor may reuse for node i's result when that dep dies at node i (the first dying one is tried; it is reused when
    the dep owns its buffer, of node i's size, and no other live value holds it; like the executor's lowering, list no
    position after a parameter that could die there). kinds[i]: one of KINDS. fields[i]: the bytes of each field of node
    i's own buffer when it is a tuple (empty otherwise): the executor holds each field on its own, so a field outlives
    the tuple while a view of it lives. field[i]: for an alias of such a tuple, the field it holds (None: the whole
    tuple). inner[i]: bytes node i holds inside while it runs beyond its result (an If's branch, a called function's
    body: the exact model's, pass_.py), counted at its peak. Empty optional fields take their defaults (_OPTIONAL).
    """

    sizes: tuple = attrs.field(converter=_once)
    costs: tuple = attrs.field(converter=lambda v: _once(v, float))
    deps: tuple = attrs.field(converter=lambda v: tuple(map(_ints, v)))
    recomputable: tuple = attrs.field(converter=lambda v: tuple(bool(x) for x in v))
    outputs: tuple = attrs.field(default=(), converter=_once)
    pinned_bytes: int = attrs.field(default=0, converter=int)
    alias_of: tuple = attrs.field(default=(), converter=_optional)
    inplace: tuple = attrs.field(default=(), converter=lambda v: _once(v, _ints))
    kinds: tuple = attrs.field(default=(), converter=tuple)
    names: tuple = attrs.field(default=(), converter=tuple)
    fields: tuple = attrs.field(default=(), converter=lambda v: _once(v, _ints))
    field: tuple = attrs.field(default=(), converter=_optional)
    inner: tuple = attrs.field(default=(), converter=_once)

    def __attrs_post_init__(self):
        for name in ("costs", "deps", "recomputable", *_OPTIONAL):
            if name in _OPTIONAL and not getattr(self, name):
                default = tuple(f"%{i}" for i in range(self.n)) if name == "names" else (_OPTIONAL[name],) * self.n
                object.__setattr__(self, name, default)
            if len(getattr(self, name)) != self.n:
                raise ValueError(f"Problem: {name} has {len(getattr(self, name))} entries for {self.n} nodes")
        if self.pinned_bytes < 0:
            raise ValueError("Problem: pinned_bytes must be >= 0")
        for i, ds in enumerate(self.deps):
            if self.sizes[i] < 0 or not self.costs[i] >= 0 or self.inner[i] < 0:
                raise ValueError(f"Problem: node {self.names[i]} has a negative size or cost")
            if (d := next((d for d in ds if not 0 <= d < i), None)) is not None:
                raise ValueError(f"Problem: node {self.names[i]} (#{i}) reads #{d}, which is not an earlier node")
            a = self.alias_of[i]
            if a is not None and a not in ds:
                raise ValueError(f"Problem: node {self.names[i]} is an alias of #{a}, which it does not read")
            if self.fields[i] and (sum(self.fields[i]) != self.sizes[i] or a is not None):
                raise ValueError(f"Problem: node {self.names[i]}: its fields do not add up to its own buffer")
            if (p := next((p for p in self.inplace[i] if not 0 <= p < len(ds)), None)) is not None:
                raise ValueError(f"Problem: node {self.names[i]}: in-place position {p} is not one of its deps")
            if self.kinds[i] not in KINDS:
                raise ValueError(f"Problem: node {self.names[i]}: unknown kind {self.kinds[i]!r} (one of {KINDS})")
        if (o := next((o for o in self.outputs if not 0 <= o < self.n), None)) is not None:
            raise ValueError(f"Problem: output #{o} is not a node")

    n = property(lambda self: len(self.sizes))

    def users(self) -> list[list[int]]:
        """users[v]: the nodes reading v, in program order (once per reading node)."""
        out: list[list[int]] = [[] for _ in range(self.n)]
        for i, ds in enumerate(self.deps):
            for d in set(ds):
                out[d].append(i)  # i grows: each list is in program order
        return out

    def roots(self) -> list[int]:
        """root[v]: the node owning the buffer v holds (v itself unless v is an alias)."""
        root = list(range(self.n))
        for v, a in enumerate(self.alias_of):
            root[v] = root[a] if a is not None else v
        return root


@attrs.frozen
class Schedule:
    """recompute[t]: nodes recomputed just before stage t, in topological order (up to n entries; missing:
    none). Every use reads the most recent instance of a value (how long each lives: simulate.py)."""

    recompute: tuple = attrs.field(default=(), converter=lambda v: tuple([_ints(s) if len(s) else () for s in v]))

    @classmethod
    def from_lists(cls, per_stage: dict) -> Schedule:
        """A schedule from {stage: [nodes]} (the nodes of a stage are sorted: node order is topological)."""
        last = max((t for t, nodes in per_stage.items() if nodes), default=-1)  # no empty stages at the end
        return cls([sorted(set(per_stage.get(t, ()))) for t in range(last + 1)])

    count = property(lambda self: sum(len(s) for s in self.recompute))


class InfeasibleBudget(PassError, ValueError):
    """No schedule keeps the peak within the budget; `least_feasible`: the least budget (bytes) that can be met."""

    def __init__(self, budget: int, least_feasible: int, message: str | None = None):
        self.budget, self.least_feasible = int(budget), int(least_feasible)
        super().__init__(message or f"memory budget of {self.budget} bytes cannot be met: the least feasible "
                         f"budget is {self.least_feasible} bytes")
