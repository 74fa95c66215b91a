"""The `retrograd` command's parser and entry point: global options, plugins, exit codes and error reports."""

from __future__ import annotations

import argparse
import sys
import traceback
import warnings

from retrograd.errors import DiagnosticError, ScriptWarning, Span

DESCRIPTION = """Check, transform (mlir-opt style pipelines), lower, draw, run and train IR scripts.

Exit status: 0 on success, 1 when the input or an option's value is wrong (a located message on
standard error), 2 when the command line itself is malformed."""

LOAD_HELP = (
    "run the Python file FILE.py before the command, so that the passes and ops it registers can be "
    "used (like opt -load-pass-plugin); it runs that file's code with your permissions (repeatable)"
)
TRACEBACK_HELP = "on an error, also print the Python traceback (for reporting bugs)"


def _global_options(p: argparse.ArgumentParser, suppress: bool) -> None:
    # Given before the subcommand or after it: the subcommand's copies default to SUPPRESS so that
    # they do not overwrite what was given before it.
    default = argparse.SUPPRESS if suppress else None
    p.add_argument("--load", action="append", metavar="FILE.py", dest="load_after" if suppress else "load",
                   default=default, help=LOAD_HELP)
    p.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS if suppress else False,
                   help=TRACEBACK_HELP)


def build_parser() -> argparse.ArgumentParser:
    import retrograd
    from retrograd.cli import importer, listing, memory, run, transform
    from retrograd.examples.command import add_train_arguments, run_train

    p = argparse.ArgumentParser(prog="retrograd", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"retrograd {retrograd.__version__}",
                   help="print the version and exit")
    _global_options(p, suppress=False)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of:")
    transform.add_parsers(sub)
    run.add_parser(sub)
    listing.add_parsers(sub)
    importer.add_parser(sub)
    memory.add_parser(sub)
    t = sub.add_parser("train", help="train the digits example, or a script's function returning a loss")
    add_train_arguments(t)
    t.set_defaults(run=run_train)
    for command in sub.choices.values():
        _global_options(command, suppress=True)
    return p


def load_plugin(path: str) -> None:
    """Run a user's Python file (it registers passes or ops); its failures are reported as errors."""
    import runpy

    try:
        runpy.run_path(path, run_name="__retrograd_plugin__")
    except (DiagnosticError, OSError):
        raise
    except SyntaxError as err:
        # Python leaves the position out for some errors (null bytes): the file's start, never line 0.
        span = Span(err.filename or path, max(1, err.lineno or 1), max(1, err.offset or 1))
        raise _PluginError(f"the plugin loaded with --load has a syntax error: {err.msg}", err, span) from None
    except Exception as err:  # noqa: BLE001 - the user's code may raise anything
        raise _PluginError(f"--load {path}: the plugin failed: {type(err).__name__}: {err}", err) from None


class _PluginError(DiagnosticError):
    kind = "error"

    def __init__(self, message: str, cause: BaseException, span: Span | None = None):
        super().__init__(message, span)
        self.cause = cause


def _report(err: BaseException, show_traceback: bool) -> None:
    if show_traceback:
        cause = getattr(err, "cause", None) or err
        traceback.print_exception(type(cause), cause, cause.__traceback__, file=sys.stderr)


def _script_warnings_as_lines(showwarning):
    """A warnings.showwarning printing a ScriptWarning as one `warning: file:line:col: ...` line: its
    message is already located in the user's script, and the Python frame it is attributed to (the
    command's own, under runpy) means nothing to a command-line user. Other warnings go to `showwarning`."""

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, ScriptWarning):
            sys.stderr.write(f"warning: {message}\n")
        else:
            showwarning(message, category, filename, lineno, file, line)

    return show


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    show = bool(getattr(args, "traceback", False))
    previous = warnings.showwarning
    warnings.showwarning = _script_warnings_as_lines(previous)
    try:
        for path in (args.load or []) + getattr(args, "load_after", []):
            load_plugin(path)
        return args.run(args)
    except BrokenPipeError:
        return 0
    except DiagnosticError as err:
        _report(err, show)
        sys.stderr.write(f"{err}\n")
        return 1
    except FileNotFoundError as err:
        _report(err, show)
        sys.stderr.write(f"error: {err.filename}: no such file\n")
        return 1
    except IsADirectoryError as err:
        _report(err, show)
        sys.stderr.write(f"error: {err.filename}: is a directory, not a file\n")
        return 1
    except OSError as err:  # permissions, a full disk, ...
        _report(err, show)
        sys.stderr.write(f"error: {err.filename or ''}: {err.strerror or err}\n")
        return 1
    except Exception as err:  # noqa: BLE001 - a bug: one line, and the traceback on request
        _report(err, show)
        hint = "" if show else "; rerun with --traceback and report it"
        sys.stderr.write(f"internal error: {type(err).__name__}: {err}{hint}\n")
        return 1
    finally:
        warnings.showwarning = previous  # main() is also called in-process (tests, embedding tools)
