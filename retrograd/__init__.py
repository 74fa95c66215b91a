"""retrograd: parse, transform (above all: differentiate), print and run TVMScript-style Relax IR."""

from __future__ import annotations

import importlib

from retrograd import ops  # noqa: F401  (registers every op)
from retrograd import parser as _parser  # noqa: F401  (installs the printer behind IRModule.script)
from retrograd.errors import DiagnosticError
from retrograd.ir import IRModule

__version__ = "0.1.0"


def parse(text: str, source_name: str = "<string>") -> IRModule:
    """Parse TVMScript-style text into an IRModule (never evaluates Python)."""
    from retrograd.parser import parse as _parse

    return _parse(text, source_name=source_name)


def parse_file(path) -> IRModule:
    """Parse a script file; errors name the file."""
    from retrograd.parser import parse_file as _parse_file

    return _parse_file(path)


def structural_equal(a, b, map_free_vars: bool = False) -> bool:
    """Equality of modules or expressions modulo variable renaming."""
    from retrograd.ir.structural import structural_equal as _eq

    return _eq(a, b, map_free_vars=map_free_vars)


def assert_structural_equal(a, b, map_free_vars: bool = False) -> None:
    """Raise AssertionError naming the path of the first difference."""
    from retrograd.ir.structural import assert_structural_equal as _assert

    _assert(a, b, map_free_vars=map_free_vars)


def build(mod: IRModule, **options):
    """Lower a module to NumPy kernels: `build(mod)["main"](*arrays)`."""
    from retrograd.runtime import build as _build

    return _build(mod, **options)


def lower_to_python(mod: IRModule, source_name: str = "module") -> str:
    """The module as readable standalone Python calling the executor's kernels, one statement per binding."""
    from retrograd.codegen import lower_to_python as _lower

    return _lower(mod, source_name)


def to_dot(mod: IRModule, func: str | None = None) -> str:
    """Graphviz DOT of a function's dataflow (every function when `func` is None)."""
    from retrograd.visualize import to_dot as _to_dot

    return _to_dot(mod, func)


def set_num_threads(n: int | None) -> None:
    """Threads the big kernels (convolutions, pooling, large elementwise results) split their work over;
    None: RETROGRAD_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may use."""
    from retrograd.ops.kernels.parallel import set_num_threads as _set

    _set(n)


def get_num_threads() -> int:
    from retrograd.ops.kernels.parallel import get_num_threads as _get

    return _get()


def save_params(path, params: dict) -> str:
    """Write {name: array} (an importer's params, PyTorch's dotted names kept) to one .npz archive."""
    from retrograd.runtime.params_io import save_params as _save

    return _save(path, params)


def load_params(path) -> dict:
    """{name: array} from an .npz archive written by save_params; nothing is unpickled."""
    from retrograd.runtime.params_io import load_params as _load

    return _load(path)


_LAZY = ("passes", "runtime", "parser", "testing", "ir", "cli", "analysis", "lower")


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"retrograd.{name}")
    raise AttributeError(f"module 'retrograd' has no attribute {name!r}")
