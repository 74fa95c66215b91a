"""`retrograd memory`: the memory timeline of a function as a picture (PNG/SVG/PDF, or interactive HTML)."""

from __future__ import annotations

import io
import os

from retrograd.cli.common import STDIO, function_named, load_verified, write_output
from retrograd.errors import UsageError

FORMATS = ("png", "svg", "pdf")


def cmd_memory(args) -> int:
    if args.output is None:
        raise UsageError("give the picture's file with -o timeline.png (or .svg, .pdf; .html with --html)")
    ext = os.path.splitext(args.output)[1].lower().lstrip(".") if args.output != STDIO else ""
    if args.html and ext not in ("html", "htm", ""):
        raise UsageError(f"-o {args.output}: --html writes an HTML page; name the file *.html")
    if not args.html and ext not in FORMATS:
        raise UsageError(f"-o {args.output}: the picture is written as {', '.join(FORMATS)} (by its extension); "
                         "--html writes an interactive page")
    from retrograd.visualize.memory_plot import memory_curves, memory_figure, memory_html

    mod = load_verified(args.file)
    function_named(mod, args.func, args.file)
    curves = memory_curves(mod, args.func, _budget(args.budget))
    if args.html:
        write_output(memory_html(mod, args.func, curves=curves), args.output)
        return 0
    fig = memory_figure(mod, args.func, curves=curves)
    buf = io.BytesIO()
    fig.savefig(buf, format=ext, dpi=args.dpi)
    write_output(buf.getvalue(), args.output)
    for curve in curves.curves:
        t = curve.timeline
        print(f"{curve.label}: peak {t.peak} bytes at {t.peak_name or 'the parameters'} "
              f"(parameters {t.param_bytes} bytes, {len(t.names)} bindings)")
    return 0


def _budget(text: str | None):
    """The budget as the checkpoint pass takes it: a plain number of bytes becomes an int."""
    if text is None:
        return None
    return int(text) if text.strip().isdigit() else text


def add_parser(sub) -> None:
    m = sub.add_parser(
        "memory", help="draw the memory timeline of a function (live bytes per binding), planned under a budget",
        description="Draw the live bytes of a function binding by binding, as the executor's meter reads them "
        "(the exact memory model), its peak and the values live there; with --budget, also the curve of the "
        "function as the checkpoint pass plans it for that budget, and the budget line.",
    )
    m.add_argument("file", help="script file, or - for standard input")
    m.add_argument("--func", default="main", help="the function (default: main)")
    m.add_argument("--budget", help="plan with the checkpoint pass for this budget: bytes, '40%%', '12MiB', ...")
    m.add_argument("-o", "--output", help="the picture: FILE.png, .svg or .pdf (matplotlib); FILE.html with --html")
    m.add_argument("--html", action="store_true", help="write an interactive page to hover (needs plotly)")
    m.add_argument("--dpi", type=int, default=110, help="resolution of a PNG (default: 110)")
    m.set_defaults(run=cmd_memory)
