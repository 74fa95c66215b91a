"""The executor: lower a module to NumPy kernel calls and run it, freeing values at their last use."""

from retrograd.runtime.executor import BuiltFunction, Executable, build
from retrograd.runtime.stats import RunStats

__all__ = ["build", "Executable", "BuiltFunction", "RunStats"]
