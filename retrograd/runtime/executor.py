"""build(mod) -> Executable: every function lowered once to kernel calls; `ex["main"](*arrays)` runs it."""

from __future__ import annotations

import threading

import numpy as np

from retrograd.errors import ExecutionError, UnsupportedError
from retrograd.ir.functor import module_if_depth, stack_room
from retrograd.runtime.interp import Meter, invoke, run_code, run_code_profiled
from retrograd.runtime.program import lower_from, module_programs
from retrograd.runtime.stats import RunStats, format_profile
from retrograd.runtime.threads import call_scope


class FunctionTable:
    """`ex[name]`, `name in ex` and `ex.function_names()` over a built module's programs, each function
    made once by `make_function` (the NumPy and the torch executables share this)."""

    _programs: dict
    _functions: dict

    def __getitem__(self, name: str):
        fn = self._functions.get(name)
        if fn is None:
            prog = self._programs.get(name)
            if prog is None:
                known = ", ".join(self._programs) or "none"
                raise ExecutionError(f"the module has no function '{name}' (functions: {known})")
            fn = self._functions[name] = self.make_function(prog)
        return fn

    def __contains__(self, name) -> bool:
        return name in self._programs

    def function_names(self) -> list[str]:
        return list(self._programs)


class Executable(FunctionTable):
    """A built module. `ex[name](*args)` runs a function; `ex.stats` describes the last call.

    Options: `profile=True` records per-op time, calls and output bytes (`ex.profile_report()` returns
    the table as text); `check=True` verifies every kernel result against its binding's struct info.
    """

    def __init__(self, mod, *, profile: bool = False, check: bool = False):
        self.mod = mod
        # Every function is checked here and lowered on its first use (runtime/precheck.py).
        self._programs = module_programs(mod, check=check)
        self._check = check
        self._lock = threading.Lock()
        self._skip: set[int] = set()  # the lowered functions' constant buffers (see Meter)
        self._splitting = False  # a lowered function splits its work: see runtime/threads.py
        for prog in self._programs.values():
            if prog.block is not None:
                self._lowered(prog)
        self._run = run_code_profiled if profile else run_code
        # Running a nested If recurses (run_code -> run_if -> run_block): calls make stack room for the deepest.
        self._if_levels = module_if_depth(mod)
        self.profile = {} if profile else None  # op -> [calls, seconds, output bytes]
        self.stats: RunStats | None = None
        self._functions: dict[str, BuiltFunction] = {}

    def _lowered(self, prog) -> None:
        self._skip.update(prog.const_roots)
        self._splitting = self._splitting or prog.splits

    @property
    def _splits(self) -> bool:
        """Whether a function of the module splits its work over threads (lowering every function)."""
        for name in self._programs:
            self._ready(name)
        return self._splitting

    def _ready(self, name: str) -> None:
        """Lower `name` and the functions it may call, unless done."""
        if self._programs[name].block is None:
            with self._lock:
                for prog in lower_from(self.mod, self._programs, name, self._check):
                    self._lowered(prog)

    @property
    def last_stats(self) -> RunStats | None:
        return self.stats

    def make_function(self, prog) -> "BuiltFunction":
        self._ready(prog.name)
        return BuiltFunction(self, prog)

    def profile_report(self) -> str:
        if self.profile is None:
            return "profiling is off: build with retrograd.build(mod, profile=True)"
        return format_profile(self.profile)

    def reset_profile(self) -> None:
        if self.profile is not None:
            self.profile.clear()

    def __repr__(self) -> str:
        return f"<Executable {list(self._programs)}>"


class BuiltFunction:
    """One function of an Executable, callable with NumPy arrays (nested tuples for tuple parameters)."""

    __slots__ = ("exe", "prog", "__name__")

    def __init__(self, exe: Executable, prog):
        self.exe = exe
        self.prog = prog
        self.__name__ = prog.name

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = bind_arguments(self.prog, args, kwargs)
        exe = self.exe
        exe.stats = None
        m = Meter(exe._skip, exe._run, exe.profile)
        try:
            # inf and nan are results here (IEEE, as in TVM), not warnings: whether a kernel wrote in
            # place (runtime/inplace.py) or not, one errstate per call keeps NumPy quiet about them.
            with np.errstate(all="ignore"), call_scope(exe._splitting), stack_room(exe._if_levels):
                result = invoke(self.prog, args, m, True)
        except RecursionError:
            raise ExecutionError(
                f"{self.prog.name}: calls between functions nest deeper than Python's recursion limit allows"
            ) from None
        exe.stats = RunStats(self.prog.name, m.peak, m.param_bytes)
        return result

    def __repr__(self) -> str:
        return f"<BuiltFunction {self.prog.name}({', '.join(self.prog.param_names)})>"


def build(mod, *, profile: bool = False, check: bool = False, backend: str = "numpy", device=None,
          compile: bool = False, numpy_outputs: bool = False):
    """Lower every function of `mod` to kernel calls; errors (an op without kernel...) name the binding.

    backend "numpy" (the default and the reference) or "torch": PyTorch tensors on `device` ("cpu",
    "cuda", ...; runtime/torch_exec.py), `compile=True` running it through torch.compile, and results
    as torch tensors unless `numpy_outputs=True`."""
    if backend == "torch":
        from retrograd.runtime.torch_exec import build_torch

        return build_torch(mod, device or "cpu", numpy_outputs=numpy_outputs, compile=compile)
    if backend != "numpy":
        raise UnsupportedError(f"unknown backend {backend!r} (backends: numpy, torch)")
    if device not in (None, "cpu") or compile:
        raise UnsupportedError("the numpy backend runs on the CPU without compilation (device and compile are torch options)")
    return Executable(mod, profile=profile, check=check)


def bind_arguments(prog, args: tuple, kwargs: dict) -> tuple:
    """Positional arguments, then keyword ones in parameter order (as a Python call binds them)."""
    names = prog.param_names
    for key in kwargs:
        if key not in names:
            raise ExecutionError(f"{prog.name}: no parameter named '{key}' (parameters: {', '.join(names)})")
        if names.index(key) < len(args):
            raise ExecutionError(f"{prog.name}: parameter '{key}' is given both by position and by name")
    missing = [n for n in names[len(args):] if n not in kwargs]
    if missing:
        raise ExecutionError(f"{prog.name}: missing argument(s) for {', '.join(repr(n) for n in missing)}")
    return tuple(args) + tuple(kwargs[n] for n in names[len(args):])
