"""IRModule: an immutable ordered map from function names to functions."""

from __future__ import annotations

from typing import Callable, Iterator

from retrograd.ir.expr import Function, GlobalVar

# The printer lives in the parser package, above the IR: it installs itself here when imported
# (`import retrograd` imports it), so the IR never imports upward.
_printer: Callable[["IRModule"], str] | None = None


def set_printer(printer: Callable[["IRModule"], str]) -> None:
    """Install the function behind `IRModule.script()`."""
    global _printer
    _printer = printer


class IRModule:
    """Ordered name -> Function; `with_function` / `without` return new modules."""

    __slots__ = ("_functions", "attrs", "_gvars")

    def __init__(self, functions: dict[str, Function] | None = None, attrs: dict | None = None):
        self._functions: dict[str, Function] = dict(functions or {})
        self.attrs: dict = dict(attrs or {})
        self._gvars: dict[str, GlobalVar] = {}

    # -- mapping protocol ---------------------------------------------------
    def __getitem__(self, name: str) -> Function:
        if isinstance(name, GlobalVar):
            name = name.name_hint
        return self._functions[name]

    def __contains__(self, name) -> bool:
        if isinstance(name, GlobalVar):
            name = name.name_hint
        return name in self._functions

    def __iter__(self) -> Iterator[str]:
        return iter(self._functions)

    def __len__(self) -> int:
        return len(self._functions)

    def items(self):
        return self._functions.items()

    def keys(self):
        return self._functions.keys()

    def functions(self) -> dict[str, Function]:
        return dict(self._functions)

    def get_global_var(self, name: str) -> GlobalVar:
        """The GlobalVar naming a function of this module, with its signature as struct info."""
        gv = self._gvars.get(name)
        if gv is None:
            func = self._functions[name]
            gv = GlobalVar(name, func.struct_info)
            self._gvars[name] = gv
        return gv

    # -- functional updates -------------------------------------------------
    def with_function(self, name: str, func: Function) -> "IRModule":
        functions = dict(self._functions)
        functions[name] = func
        return IRModule(functions, self.attrs)

    def without(self, name: str) -> "IRModule":
        functions = dict(self._functions)
        functions.pop(name)
        return IRModule(functions, self.attrs)

    def with_attrs(self, attrs: dict) -> "IRModule":
        return IRModule(self._functions, attrs)

    # -- text ---------------------------------------------------------------
    def script(self) -> str:
        if _printer is None:  # pragma: no cover - `import retrograd` installs the parser's printer
            raise RuntimeError("no printer installed: import retrograd.parser")
        return _printer(self)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"<IRModule {list(self._functions)}>"
