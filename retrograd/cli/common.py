"""What every subcommand shares: reading a script (or standard input), verifying it, writing output."""

from __future__ import annotations

import sys

from retrograd.errors import UsageError, did_you_mean

STDIO = "-"


def source_name(path: str) -> str:
    return "<stdin>" if path == STDIO else path


def verify(mod, what: str) -> None:
    """A WellFormedError listing every problem of `mod`, if it has any."""
    from retrograd.errors import WellFormedError
    from retrograd.ir import well_formed

    problems = well_formed(mod)
    if problems:
        raise WellFormedError([f"{source_name(what)}: {p}" for p in problems])


def load_verified(path: str):
    from retrograd.parser.parse import parse_path

    mod = parse_path(path)
    verify(mod, path)
    return mod


def function_named(mod, name: str, path: str):
    """The function `name` of `mod`; an unknown name is an error suggesting the closest ones."""
    if name not in mod:
        names = list(mod.keys())
        raise UsageError(
            f"no function '{name}' in {source_name(path)}{did_you_mean(name, names)} "
            f"(functions: {', '.join(names) or 'none'})"
        )
    return mod[name]


def write_output(data, output: str | None) -> None:
    """Text or bytes to the file `output`, or to standard output when it is None or '-'."""
    if output in (None, STDIO):
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        return
    with open(output, "wb" if isinstance(data, bytes) else "w", encoding=None if isinstance(data, bytes) else "utf-8") as fh:
        fh.write(data)


def count_bindings(func) -> int:
    from retrograd.ir.expr import Function

    if not isinstance(func, Function):
        return 0
    return sum(len(b.bindings) for b in func.body.blocks)
