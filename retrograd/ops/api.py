"""`R`: build op calls from Python the way scripts spell them (`R.add(a, b)`, `R.nn.relu(x)`)."""

from __future__ import annotations

from retrograd.ops.registry import lookup


class _Namespace:
    __slots__ = ("_prefix", "_found")

    def __init__(self, prefix: str):
        self._prefix = prefix
        self._found: dict = {}  # name -> op: rules spell ops through R on every call they build

    def __getattr__(self, name: str):
        op = self._found.get(name)
        if op is not None:
            return op
        if name.startswith("_"):
            raise AttributeError(name)
        op = lookup(f"{self._prefix}.{name}")
        if op is not None:
            self._found[name] = op
            return op
        if name in ("nn", "grad", "image", "memory", "ccl"):
            ns = self._found[name] = _Namespace(f"{self._prefix}.{name}")
            return ns
        raise AttributeError(f"no op R.{self._prefix[len('relax.'):] + '.' if '.' in self._prefix else ''}{name}")


R = _Namespace("relax")
