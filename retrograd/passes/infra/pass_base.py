"""The pass base: PassInfo, Pass (instrumented call), ModulePass and FunctionPass, the result check."""

from __future__ import annotations

import functools
from typing import Callable

from retrograd.errors import PassError
from retrograd.ir.expr import Function
from retrograd.ir.functor import module_if_depth, stack_room
from retrograd.ir.module import IRModule
from retrograd.ir.well_formed import well_formed
from retrograd.passes.infra.context import PassContext, hook

class PassInfo:
    """What identifies a pass: its name, the opt level it needs, the passes it requires, its options."""

    __slots__ = ("name", "opt_level", "required", "options")

    def __init__(self, name: str, opt_level: int = 0, required=(), options: dict | None = None):
        self.name = name
        self.opt_level = opt_level
        self.required = tuple(required)
        self.options = dict(options or {})

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{self.name}({opts})" if opts else self.name


class Pass:
    """A module -> module transformation. Call it: `new_mod = p(mod)`; the input module is never changed."""

    # Containers (Sequential) are not instrumented themselves: their members are.
    _instrumented = True

    def __init__(self, info: PassInfo):
        # object.__setattr__: a pass class whose options are frozen fields still gets its info.
        object.__setattr__(self, "info", info)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def opt_level(self) -> int:
        return self.info.opt_level

    @property
    def required(self) -> tuple:
        return self.info.required

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        ctx = ctx or PassContext.current()
        if not isinstance(mod, IRModule):
            raise PassError(f"pass '{self.name}' expects an IRModule, got {type(mod).__name__}")
        # Analyses and rewrites recurse once per nested If: room for the module's deepest nest.
        with stack_room(module_if_depth(mod)):
            return self._run(mod, ctx)

    def _run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        if not self._instrumented:
            return self.transform(mod, ctx)
        instruments = ctx.instruments
        for inst in instruments:
            if hook(inst, "should_run")(mod, self.info) is False:
                return mod
        for inst in instruments:
            hook(inst, "run_before_pass")(mod, self.info)
        # Snapshot the input's function identities: a cheap check that the pass did not mutate it.
        before = _fingerprint(mod)
        out = self.transform(mod, ctx)
        if not isinstance(out, IRModule):
            raise PassError(f"pass '{self.name}' returned {type(out).__name__}, expected an IRModule")
        if _fingerprint(mod) != before:
            raise PassError(f"pass '{self.name}' mutated its input module (passes must return a new module)")
        if ctx.verify:
            check_pass_result(self.info, out)
        for inst in instruments:
            hook(inst, "run_after_pass")(out, self.info)
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info!r}>"


def _fingerprint(mod: IRModule) -> tuple:
    return tuple((name, id(func)) for name, func in mod.items()) + (tuple(mod.attrs.items()),)


def check_pass_result(info: PassInfo, mod: IRModule) -> None:
    """Raise PassError naming the pass when its output is not well formed."""
    problems = well_formed(mod)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise PassError(f"pass '{info.name}' produced an ill-formed module ({len(problems)} problem(s)):\n{listing}{more}")


class _WrappedPass(Pass):
    """A pass made from a function, which it wraps (name, docstring, module)."""

    def __init__(self, fn: Callable, info: PassInfo):
        super().__init__(info)
        self.fn = fn
        functools.update_wrapper(self, fn, updated=())


class ModulePass(_WrappedPass):
    """Wraps `fn(mod, ctx) -> mod`."""

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fn(mod, ctx)


class FunctionPass(_WrappedPass):
    """Wraps `fn(func, mod, ctx) -> func`, applied to every Relax function of the module."""

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return map_functions(mod, lambda func: self.fn(func, mod, ctx), self.name)


def map_functions(mod: IRModule, fn: Callable, pass_name: str) -> IRModule:
    """`mod` with `fn(func)` in place of every Relax function (the same module if nothing changed)."""
    out = mod
    for name, func in mod.items():
        if not isinstance(func, Function):
            continue
        new = fn(func)
        if new is None:
            raise PassError(f"function pass '{pass_name}' returned None for function '{name}'")
        if new is not func:
            out = out.with_function(name, new)
    return out

