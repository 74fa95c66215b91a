"""IRModule: an immutable ordered map from function names to functions."""

from __future__ import annotations

import sys
import weakref
from typing import Callable, Iterator

from retrograd.ir.expr import Function, GlobalVar

# The printer lives in the parser package, above the IR: it installs itself here when imported
# (`import retrograd` imports it), so the IR never imports upward.
_printer: Callable[["IRModule"], str] | None = None
_function_printer: Callable[[Function, str], str] | None = None

# The name each function last had in a module, so `mod["main"].script()` prints `def main`.
_names: "weakref.WeakKeyDictionary[Function, str]" = weakref.WeakKeyDictionary()


def set_printer(printer: Callable[["IRModule"], str], function_printer: Callable[[Function, str], str] | None = None) -> None:
    """Install the functions behind `IRModule.script()` and `Function.script()`."""
    global _printer, _function_printer
    _printer = printer
    _function_printer = function_printer


def function_script(func: Function, name: str | None = None) -> str:
    """`Function.script()`: the function as a script of its own, named `name` or its name in its module."""
    if _function_printer is None:  # pragma: no cover - `import retrograd` installs the parser's printer
        raise RuntimeError("no printer installed: import retrograd.parser")
    return _function_printer(func, name or func.attrs.get("global_symbol") or _names.get(func, "main"))


def show(text: str, file=None) -> None:
    """Print script text, highlighted when `file` is a terminal and pygments is installed."""
    stream = sys.stdout if file is None else file
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        try:
            from pygments import highlight
            from pygments.formatters import TerminalFormatter
            from pygments.lexers import PythonLexer
        except ImportError:
            pass  # pygments is optional: plain text
        else:
            text = highlight(text, PythonLexer(), TerminalFormatter())
    stream.write(text if text.endswith("\n") else text + "\n")


class IRModule:
    """Ordered name -> Function; `with_function` / `without` return new modules.

    `tir` holds the module's TIR functions (`@T.prim_func`) as opaque source text, name -> text:
    printed back, never run or differentiated; they are not among the (Relax) functions.
    """

    __slots__ = ("_functions", "attrs", "_gvars", "tir")

    def __init__(self, functions: dict[str, Function] | None = None, attrs: dict | None = None, tir: dict | None = None):
        self._functions: dict[str, Function] = dict(functions or {})
        self.attrs: dict = dict(attrs or {})
        self.tir: dict[str, str] = dict(tir or {})
        self._gvars: dict[str, GlobalVar] = {}
        for name, func in self._functions.items():
            if isinstance(func, Function):
                _names[func] = name

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
        return IRModule(functions, self.attrs, self.tir)

    def without(self, name: str) -> "IRModule":
        functions = dict(self._functions)
        functions.pop(name)
        return IRModule(functions, self.attrs, self.tir)

    def with_attrs(self, attrs: dict) -> "IRModule":
        return IRModule(self._functions, attrs, self.tir)

    # -- text ---------------------------------------------------------------
    def script(self) -> str:
        if _printer is None:  # pragma: no cover - `import retrograd` installs the parser's printer
            raise RuntimeError("no printer installed: import retrograd.parser")
        return _printer(self)

    def show(self, file=None) -> None:
        """Print the script (to standard output by default), highlighted on a terminal when pygments is installed."""
        show(self.script(), file)

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"<IRModule {list(self._functions)}>"
