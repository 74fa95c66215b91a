"""The printer's names for a large function's variables, decided in bulk.

The printer names a variable by its hint unless the hint is taken (then `hint_1`, `hint_2`, ... by
definition order), not an identifier, or reserved. Decided one binding at a time, that takes a probe of
a table of every name so far per binding and one of a table of every variable per argument: at a
million bindings those tables are far larger than the CPU's caches and each probe is a cache miss.
Here the same names come from a few sorted NumPy arrays (sequential passes, cache-friendly at any
size): which hints repeat (`NamePlan.shared`), and, once the function is printed, whether every
variable it read is one it defines. Whatever the plan cannot prove gives None (or False), and the
printer names that function one binding at a time as before: the text is the same either way.
"""

from __future__ import annotations

import keyword
from itertools import chain
from operator import attrgetter

import numpy as np

from retrograd.ir.expr import If, Var

__all__ = ["NamePlan", "plan_names", "all_defined", "RESERVED", "BULK_MIN"]

# Names a variable may not take: they would shadow what the script itself refers to.
RESERVED = frozenset(keyword.kwlist) | {"R", "T", "I", "cls", "metadata", "Module", "tvm", "float"}
# Functions with fewer variables are named one binding at a time (the plan's fixed cost is ~20 us).
BULK_MIN = 256

_var = attrgetter("var")
_value = attrgetter("value")
_hint = attrgetter("name_hint")


class NamePlan:
    """The names of one function's variables: a var whose hint is not in `shared` is named its hint;
    the vars sharing a hint take the names of `names[hint]` (the hint, then `hint_1`, ...) in
    definition order (`next_name`)."""

    __slots__ = ("defs", "shared", "names")

    def __init__(self, defs: list, shared: frozenset, names: dict):
        self.defs = defs  # parameters, then every binding's var, in order
        self.shared = shared
        self.names = names  # hint -> iterator over the names its vars take, in order

    def next_name(self, hint: str) -> str:
        return next(self.names[hint])


def _hashes(strings: list) -> np.ndarray:
    return np.fromiter(map(hash, strings), np.int64, len(strings))


def _repeats(sorted_values: np.ndarray) -> np.ndarray:
    """The values of a sorted array that occur more than once (each once)."""
    again = sorted_values[1:][sorted_values[1:] == sorted_values[:-1]]
    if not again.size:
        return again
    return again[np.concatenate(([True], again[1:] != again[:-1]))]


def plan_names(params, blocks) -> NamePlan | None:
    """The names of a function whose body is `blocks` (no If: its branches name their own results),
    or None where the plan cannot prove them (small functions, hints that are not identifiers or are
    reserved, a var defined twice, a generated name equal to another name; hash collisions count as
    equal names)."""
    bindings = list(chain.from_iterable(b.bindings for b in blocks))
    if len(params) + len(bindings) < BULK_MIN or If in set(map(type, map(_value, bindings))):
        return None
    defs = list(params)
    defs += map(_var, bindings)
    hints = list(map(_hint, defs))
    if not (all(map(str.isascii, hints)) and all(map(str.isidentifier, hints)) and RESERVED.isdisjoint(hints)):
        return None
    hashes = _hashes(hints)
    ordered = np.sort(hashes)
    repeated = _repeats(ordered)
    if not repeated.size:
        return NamePlan(defs, frozenset(), {})
    # The positions whose hash repeats, found by a search in the (few) repeated values.
    at = np.searchsorted(repeated, hashes)
    np.minimum(at, repeated.size - 1, out=at)
    groups: dict[str, list] = {}
    for i in np.flatnonzero(repeated[at] == hashes).tolist():
        groups.setdefault(hints[i], []).append(defs[i])
    names: dict[str, list[str]] = {}
    for hint, members in groups.items():
        if len(set(map(id, members))) != len(members):
            return None  # a var defined twice is named once: leave it to the exact walk
        names[hint] = [hint] + [f"{hint}_{k}" for k in range(1, len(members))]
    # The names above are those of the one-at-a-time walk as long as every name is new: then the
    # first var of a hint finds it free and the k-th finds `hint_k` free.
    made = _hashes(list(chain.from_iterable(n[1:] for n in names.values())))
    distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    if _repeats(np.sort(np.concatenate((distinct, made)))).size:
        return None
    return NamePlan(defs, frozenset(names), {hint: iter(n) for hint, n in names.items()})


def all_defined(plan: NamePlan, reads) -> bool:
    """Whether every variable in `reads` (any expressions; only vars count) is one of the plan's
    definitions: a var read but never defined would have been named when read."""
    read_ids = np.fromiter(map(id, filter(Var.__instancecheck__, reads)), np.int64)
    if not read_ids.size:
        return True
    def_ids = np.fromiter(map(id, plan.defs), np.int64, len(plan.defs))
    # One sort of both, definitions tagged even and reads odd: each read must follow a definition of
    # the same id (a read's id sorts after its definition's, and after other reads of it).
    tagged = np.sort(np.concatenate((def_ids * 2, read_ids * 2 + 1)))
    ids = tagged >> 1
    is_def = (tagged & 1) == 0
    last_def = np.maximum.accumulate(np.where(is_def, ids, -1))
    is_read = ~is_def
    return bool(np.array_equal(last_def[is_read], ids[is_read]))
