"""IndexMap: the value of layout_transform's `index_map` attribute, TVM's `T.index_map(lambda i, j: (j, i))`.

Read from the script's lambda without executing it: parameters renamed i0, i1, ... (so maps equal up to
renaming compare equal), results as trees of (op, lhs, rhs) over parameter names and integers with the
operators + - * // % (floor division and floor modulo, as TVM's index maps). It evaluates on index
arrays (vectorized) and bounds each result over a box of static extents (interval arithmetic).
"""

from __future__ import annotations

import attrs
import numpy as np

OPS = ("+", "-", "*", "//", "%")


@attrs.frozen(repr=False)
class IndexMap:
    ndim: int
    results: tuple

    def __repr__(self) -> str:
        return self.text()

    @staticmethod
    def make(params: list[str], results: list) -> "IndexMap":
        """From the lambda's parameter names and result trees (names among `params`, ints, (op, a, b))."""
        if len(set(params)) != len(params):
            raise ValueError(f"index_map parameters repeat a name: {params}")
        rename = {p: f"i{k}" for k, p in enumerate(params)}
        out = []
        for tree in results:
            out.append(_rename(tree, rename))
        return IndexMap(len(params), tuple(out))

    def text(self) -> str:
        params = ", ".join(f"i{k}" for k in range(self.ndim))
        body = ", ".join(_text(r) for r in self.results)
        return f"T.index_map(lambda {params}: ({body}{',' if len(self.results) == 1 else ''}))"

    def evaluate(self, indices: list) -> list:
        """The results on index arrays (one per parameter)."""
        env = {f"i{k}": v for k, v in enumerate(indices)}
        return [_eval(r, env) for r in self.results]

    def bounds(self, extents: list) -> list[tuple[int, int]]:
        """Each result's (least, greatest) value for parameters in [0, extent) (all extents positive)."""
        env = {f"i{k}": (0, e - 1) for k, e in enumerate(extents)}
        return [_interval(r, env) for r in self.results]

    def params_of(self, k: int) -> set[str]:
        return _names(self.results[k])


def _rename(tree, rename):
    stack, out = [(tree, False)], []
    while stack:  # iterative: a generated map may nest deeply
        t, done = stack.pop()
        if isinstance(t, tuple):
            if done:
                b, a = out.pop(), out.pop()
                out.append((t[0], a, b))
            else:
                if t[0] not in OPS:
                    raise ValueError(f"index_map supports {' '.join(OPS)}, got {t[0]}")
                stack += [(t, True), (t[2], False), (t[1], False)]
        elif isinstance(t, str):
            if t not in rename:
                raise ValueError(f"index_map uses '{t}', which is not one of its parameters ({', '.join(rename)})")
            out.append(rename[t])
        elif isinstance(t, int) and not isinstance(t, bool):
            out.append(t)
        else:
            raise ValueError(f"index_map results are integer expressions of its parameters, got {t!r}")
    return out[0]


def _text(t) -> str:
    if isinstance(t, tuple):
        parts = [_text(x) if not isinstance(x, tuple) else f"({_text(x)})" for x in t[1:]]
        return f"{parts[0]} {t[0]} {parts[1]}"
    return str(t)


def _names(t) -> set[str]:
    if isinstance(t, tuple):
        return _names(t[1]) | _names(t[2])
    return {t} if isinstance(t, str) else set()


def _eval(t, env):
    if isinstance(t, tuple):
        a, b = _eval(t[1], env), _eval(t[2], env)
        op = t[0]
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if np.any(np.asarray(b) == 0):
            raise ZeroDivisionError("index_map divides by zero")
        return np.floor_divide(a, b) if op == "//" else np.mod(a, b)
    return env[t] if isinstance(t, str) else t


def _interval(t, env) -> tuple[int, int]:
    if not isinstance(t, tuple):
        return env[t] if isinstance(t, str) else (t, t)
    (alo, ahi), (blo, bhi) = _interval(t[1], env), _interval(t[2], env)
    op = t[0]
    if op == "+":
        return alo + blo, ahi + bhi
    if op == "-":
        return alo - bhi, ahi - blo
    if op == "*":
        c = (alo * blo, alo * bhi, ahi * blo, ahi * bhi)
        return min(c), max(c)
    if blo != bhi or blo == 0:
        raise ValueError("index_map divides by a non-constant or zero divisor")
    if op == "//":
        c = (alo // blo, ahi // blo)
        return min(c), max(c)
    if blo > 0 and alo >= 0 and ahi < blo:  # % of a value already below the divisor
        return alo, ahi
    return (0, blo - 1) if blo > 0 else (blo + 1, 0)
