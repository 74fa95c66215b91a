"""PassContext: the settings passes run under (opt level, config, instruments, verification), per thread."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from retrograd.passes.infra.pass_base import PassInfo

_state = threading.local()


class PassContext:
    """Settings for running passes: `with PassContext(opt_level=2, verify=True): seq(mod)`.

    config: free-form options keyed by "<pass>.<option>" (read with `ctx.config.get`).
    instruments: objects with any of enter_pass_ctx(), exit_pass_ctx(), should_run(mod, info),
    run_before_pass(mod, info), run_after_pass(mod, info) (the module after the pass).
    verify: run the well-formedness check after every pass; an ill-formed result is a PassError.
    """

    def __init__(
        self,
        opt_level: int = 2,
        config: dict | None = None,
        instruments=(),
        verify: bool = False,
        required_pass=(),
        disabled_pass=(),
    ):
        self.opt_level = opt_level
        self.config: dict[str, Any] = dict(config or {})
        self.instruments = list(instruments or ())
        self.verify = verify
        self.required_pass = set(required_pass)
        self.disabled_pass = set(disabled_pass)

    @staticmethod
    def _stack() -> list:
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        return stack

    @classmethod
    def current(cls) -> "PassContext":
        """The innermost active context, or a default one."""
        stack = cls._stack()
        if stack:
            return stack[-1]
        default = getattr(_state, "default", None)
        if default is None:
            default = _state.default = cls()
        return default

    def __enter__(self) -> "PassContext":
        self._stack().append(self)
        for inst in self.instruments:
            hook(inst, "enter_pass_ctx")()
        return self

    def __exit__(self, *exc) -> None:
        try:
            for inst in self.instruments:
                hook(inst, "exit_pass_ctx")()
        finally:
            self._stack().pop()

    def pass_enabled(self, info: PassInfo) -> bool:
        """TVM's rule, applied by Sequential: disabled wins, then required, then opt_level."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return self.opt_level >= info.opt_level

    def __repr__(self) -> str:
        return f"<PassContext opt_level={self.opt_level} verify={self.verify} instruments={len(self.instruments)}>"


def _noop(*_args, **_kwargs):
    return None


def hook(inst, name: str) -> Callable:
    """An instrument's hook by name; instruments may define any subset of them."""
    return getattr(inst, name, None) or _noop

