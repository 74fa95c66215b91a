"""What the printer checks, in bulk, when it names a large function's variables without tables.

The printer names a variable by its hint unless the hint is taken (then `hint_1`, `hint_2`, ... by
definition order), not an identifier, or reserved. Decided one binding at a time with exact tables, that
is a probe of a table of every name so far per binding and one of a table of every variable per argument:
at a million bindings those tables are far larger than the CPU's caches and each probe is a cache miss.
A large function is instead printed optimistically (a var is named its hint; a hint met twice within a
window of recent definitions becomes shared and its vars take `hint`, `hint_1`, ... in order), recording
as raw integers what that assumed: the hash of every name given and the identity of every var defined and
read by its hint. `NameChecks.hold` then proves with a few sorts of those arrays (sequential work, the
same cost per binding at any size) that the one-binding-at-a-time walk gives the same names: every name
is new, none reserved, every var read by its hint defined in the function and named its hint. Where it
cannot (a repeat further apart than the window, a hash collision, ...), the printer prints the function
again the exact way: the text is the same either way.
"""

from __future__ import annotations

import keyword
import numpy as np

__all__ = ["NameChecks", "RESERVED", "BULK_MIN", "WINDOW"]

# Names a variable may not take: they would shadow what the script itself refers to.
RESERVED = frozenset(keyword.kwlist) | {"R", "T", "I", "cls", "metadata", "Module", "tvm", "float"}
# Functions with fewer bindings are named one binding at a time (the checks' fixed cost is ~20 us).
BULK_MIN = 256
# How many distinct hints the printer remembers to find a repeated one (a dict this size stays in cache).
WINDOW = 8192


def _ids(objects: list) -> np.ndarray:
    """The objects' ids (addresses: `id` reads the list, not the objects)."""
    return np.fromiter(map(id, objects), np.int64, len(objects))


class NameChecks:
    """What an optimistic naming of one function assumed (lists: an append is the cheapest record)."""

    __slots__ = ("defined", "name_hashes", "read", "suffixed")

    def __init__(self):
        self.defined: list = []  # every var defined (parameters, bindings), in order
        self.name_hashes: list[int] = []  # the hash of the name each was given (taken while it is in cache)
        self.read: list = []  # every var read and printed as its hint
        self.suffixed: list = []  # every var named `hint_k`

    def hold(self) -> bool:
        """Whether the names given are those of the exact walk (see the module's docstring)."""
        hashes = np.sort(np.fromiter(self.name_hashes, np.int64, len(self.name_hashes)))
        if hashes.size > 1 and (hashes[1:] == hashes[:-1]).any():
            return False  # a name given twice (or two names of one hash: not told apart here)
        if hashes.size:
            reserved = np.fromiter(map(hash, RESERVED), np.int64, len(RESERVED))
            at = np.minimum(np.searchsorted(hashes, reserved), hashes.size - 1)
            if (hashes[at] == reserved).any():
                return False
        if not self.read and not self.suffixed:
            return True
        # One sort of the three kinds tagged in the low bits (definition 0, suffixed 1, read 2): a var is
        # defined once, and a read follows a definition of its id with no suffixed entry of that id.
        tagged = np.sort(np.concatenate((
            _ids(self.defined) * 4,
            _ids(self.suffixed) * 4 + 1,
            _ids(self.read) * 4 + 2,
        )))
        if (tagged[1:] == tagged[:-1])[tagged[1:] & 3 == 0].any():
            return False  # a var defined twice (the exact walk names it once)
        ids = tagged >> 2
        kind = tagged & 3
        last_def = np.maximum.accumulate(np.where(kind == 0, ids, -1))
        last_suffixed = np.maximum.accumulate(np.where(kind == 1, ids, -1))
        reads = kind == 2
        return bool(np.array_equal(last_def[reads], ids[reads]) and not (last_suffixed[reads] == ids[reads]).any())
