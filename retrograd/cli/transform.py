"""`check`, `opt` (pipelines with mlir-opt's instruments), `lower` and `dot`: a script in, text out."""

from __future__ import annotations

import sys

from retrograd.cli.common import (
    count_bindings,
    function_named,
    load_verified,
    source_name,
    verify,
    write_output,
)
from retrograd.errors import UsageError, did_you_mean

FILE_HELP = "script file, or - for standard input"


def cmd_check(args) -> int:
    mod = load_verified(args.file)
    n = sum(count_bindings(f) for _, f in mod.items())
    print(f"{source_name(args.file)}: ok ({len(mod)} function(s), {n} binding(s))")
    return 0


def compose_pipelines(texts: list[str]):
    """One Sequential running the passes of every `-p` text in order; errors point into their own text."""
    from retrograd import distributed  # noqa: F401  (registers the data-parallel pass)
    from retrograd.passes import Sequential, parse_pipeline

    passes, spans, option_spans = [], [], []
    for i, text in enumerate(texts):
        name = "<pipeline>" if len(texts) == 1 else f"<pipeline {i + 1}>"
        seq = parse_pipeline(text, source_name=name)
        passes += seq.passes
        spans += seq.spans
        option_spans += seq.option_spans
    return Sequential(passes, name="pipeline", spans=spans, option_spans=option_spans)


def _pass_names(items: list[str] | None, option: str) -> list[str]:
    """The pass names of --print-ir-before/after (repeatable, comma-separated), each checked to exist."""
    from retrograd.passes import list_passes

    names = [n.strip() for item in items or () for n in item.split(",") if n.strip()]
    for name in names:
        if name not in list_passes():
            hint = did_you_mean(name, list_passes())
            raise UsageError(f"{option}: unknown pass '{name}'{hint} (known passes: {', '.join(list_passes())})")
    return names


def _instruments(args) -> tuple[list, object]:
    from retrograd.passes import instrument as ins

    out = []
    before = _pass_names(args.print_ir_before, "--print-ir-before")
    after = _pass_names(args.print_ir_after, "--print-ir-after")
    if args.print_ir_before_all or before:
        only = None if args.print_ir_before_all else before
        out.append(ins.PrintBeforeAfter(sys.stderr, before=True, after=False, only=only))
    if args.print_ir_after_all or after:
        only = None if args.print_ir_after_all else after
        out.append(ins.PrintBeforeAfter(sys.stderr, before=False, after=True, only=only))
    if args.print_changed:
        out.append(ins.PrintChanged(stream=sys.stderr))
    timing = ins.Timing() if args.time_passes else None
    if timing is not None:
        out.append(timing)
    return out, timing


def cmd_opt(args) -> int:
    from retrograd.parser.parse import parse_path
    from retrograd.passes import PassContext

    pipeline = compose_pipelines(args.passes or [])
    instruments, timing = _instruments(args)
    reports = PlanReports()
    instruments.append(reports)
    mod = parse_path(args.file)
    if not args.no_verify:
        verify(mod, args.file)
    with PassContext(instruments=instruments, verify=not args.no_verify):
        out = pipeline(mod)
    text = out.script()
    write_output(text if text.endswith("\n") else text + "\n", args.output)
    if timing is not None:
        sys.stderr.write(timing.report() + "\n")
    if args.plan_report:
        for report in reports.reports:
            sys.stderr.write(report.details() + "\n")
    return 0


class PlanReports:
    """An instrument collecting the reports planning passes (checkpoint) hand to `plan_report`, in order."""

    def __init__(self):
        self.reports: list = []

    def plan_report(self, report) -> None:
        self.reports.append(report)


def cmd_lower(args) -> int:
    from retrograd.codegen import lower_to_python

    mod = load_verified(args.file)
    if args.func is not None:
        from retrograd.ir.vars import reachable_functions

        function_named(mod, args.func, args.file)
        keep = set(reachable_functions(mod, [args.func]))
        for name in list(mod.keys()):
            if name not in keep:
                mod = mod.without(name)
    if getattr(args, "backend", "numpy") == "torch":
        from retrograd.runtime.torch_source import lower_to_torch

        write_output(lower_to_torch(mod, source_name=source_name(args.file)), args.output)
        return 0
    write_output(lower_to_python(mod, source_name=source_name(args.file)), args.output)
    return 0


def cmd_dot(args) -> int:
    from retrograd.visualize import render, to_dot

    mod = load_verified(args.file)
    text = to_dot(mod, args.func)
    fmt = "svg" if args.svg else "png" if args.png else None
    write_output(render(text, fmt) if fmt else text, args.output)
    return 0


def add_parsers(sub) -> None:
    c = sub.add_parser("check", help="parse and verify a script", description="Parse and verify a script.")
    c.add_argument("file", help=FILE_HELP)
    c.set_defaults(run=cmd_check)

    o = sub.add_parser(
        "opt", help="run a pass pipeline and print the result",
        description="Run pass pipelines on a script and print the resulting module (instruments write to standard error).",
    )
    o.add_argument("file", help=FILE_HELP)
    o.add_argument(
        "-p", "--passes", action="append", metavar="PIPELINE",
        help='a pipeline, e.g. "gradient(func=main), dce"; several -p run in the order given',
    )
    o.add_argument("-o", "--output", help="write the result here (- or absent: standard output)")
    o.add_argument("--print-ir-before-all", action="store_true", help="print the module before every pass")
    o.add_argument(
        "--print-ir-after-all", "--print-after-all", action="store_true", help="print the module after every pass"
    )
    o.add_argument(
        "--print-ir-before", action="append", metavar="PASS",
        help="print the module before each run of PASS (repeatable, or comma-separated names)",
    )
    o.add_argument(
        "--print-ir-after", action="append", metavar="PASS",
        help="print the module after each run of PASS (repeatable, or comma-separated names)",
    )
    o.add_argument("--print-changed", action="store_true", help="print a diff of the module after each pass that changed it")
    o.add_argument("--time-passes", action="store_true", help="print the time each pass took")
    o.add_argument(
        "--plan-report", action="store_true", help="print what checkpoint passes kept and recomputed (standard error)"
    )
    o.add_argument("--no-verify", action="store_true", help="skip the well-formedness checks")
    o.set_defaults(run=cmd_opt)

    lw = sub.add_parser("lower", help="write the module as a standalone Python/NumPy module")
    lw.add_argument("file", help=FILE_HELP)
    lw.add_argument("--func", help="only this function and the functions it calls (default: every function)")
    lw.add_argument("-o", "--output", help="write the Python source here (- or absent: standard output)")
    lw.add_argument("--backend", choices=("numpy", "torch"), default="numpy",
                    help="numpy: over the NumPy kernels (default); torch: a PyTorch module over the torch kernels")
    lw.set_defaults(run=cmd_lower)

    d = sub.add_parser("dot", help="write the dataflow graph as Graphviz DOT (or SVG/PNG)")
    d.add_argument("file", help=FILE_HELP)
    d.add_argument("--func", help="only this function (default: every function)")
    d.add_argument("-o", "--output", help="write the graph here (- or absent: standard output)")
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--svg", action="store_true", help="render SVG with Graphviz instead of writing DOT")
    fmt.add_argument("--png", action="store_true", help="render PNG with Graphviz instead of writing DOT")
    d.set_defaults(run=cmd_dot)
