"""Script text <-> IR: `parse` / `parse_file` read the TVMScript subset, `print_module` writes it."""

from retrograd.ir.module import set_printer
from retrograd.parser.parse import parse, parse_file
from retrograd.parser.printer import format_sinfo, print_expr, print_function, print_module

set_printer(print_module, print_function)  # `IRModule.script()`, `Function.script()`

__all__ = ["parse", "parse_file", "print_module", "print_function", "print_expr", "format_sinfo"]
