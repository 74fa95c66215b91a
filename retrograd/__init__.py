"""retrograd: parse, transform (above all: differentiate), print and run TVMScript-style Relax IR."""

from retrograd import ops  # noqa: F401  (registers every op)
from retrograd.errors import DiagnosticError
from retrograd.ir import IRModule

__version__ = "0.1.0"
