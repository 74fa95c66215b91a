"""The `retrograd` command: check, transform (mlir-opt style pipelines), print and run IR scripts."""

from __future__ import annotations

import argparse
import sys
import zipfile

import numpy as np

from retrograd.errors import DiagnosticError


def _load(path: str):
    import retrograd

    if path == "-":
        from retrograd.parser.parse import decode_source

        return retrograd.parse(decode_source(sys.stdin.buffer.read(), "<stdin>"), source_name="<stdin>")
    return retrograd.parse_file(path)


def _verify(mod, what: str) -> None:
    from retrograd.errors import WellFormedError
    from retrograd.ir import well_formed

    problems = well_formed(mod)
    if problems:
        raise WellFormedError([f"{what}: {p}" for p in problems])


def cmd_check(args) -> int:
    mod = _load(args.file)
    _verify(mod, args.file)
    n = sum(_count_bindings(f) for _, f in mod.items())
    print(f"{args.file}: ok ({len(mod)} function(s), {n} binding(s))")
    return 0


def cmd_opt(args) -> int:
    from retrograd.passes import PassContext, parse_pipeline
    from retrograd.passes import instrument as ins

    mod = _load(args.file)
    if not args.no_verify:
        _verify(mod, args.file)
    instruments = []
    if args.print_after_all:
        instruments.append(ins.PrintBeforeAfter(before=False, after=True, stream=sys.stderr))
    if args.print_changed:
        instruments.append(ins.PrintChanged(stream=sys.stderr))
    timing = ins.Timing() if args.time_passes else None
    if timing is not None:
        instruments.append(timing)
    pipeline = parse_pipeline(args.passes or "")
    with PassContext(instruments=instruments, verify=not args.no_verify):
        out = pipeline(mod)
    text = out.script()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if timing is not None:
        sys.stderr.write(timing.report() + "\n")
    if args.plan_report:
        for report in _plan_reports(pipeline):
            sys.stderr.write(report.details() + "\n")
    return 0


def _plan_reports(pipeline) -> list:
    """The plan reports of the pipeline's planning passes (checkpoint), in order."""
    out, stack = [], [pipeline]
    while stack:
        p = stack.pop()
        report = getattr(p, "last_report", None)
        if report is not None:
            out.append(report)
        stack.extend(reversed(getattr(p, "passes", ())))
    return out


def cmd_run(args) -> int:
    import retrograd
    from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo

    mod = _load(args.file)
    _verify(mod, args.file)
    if args.func not in mod:
        raise DiagnosticError(f"no function '{args.func}' in {args.file} (functions: {', '.join(mod)})")
    func = mod[args.func]
    if args.seed < 0:
        raise DiagnosticError(f"--seed must be a non-negative integer, got {args.seed}")
    rng = np.random.default_rng(args.seed)
    dims: dict[str, int] = dict(_parse_dims(args.dim))
    bounds = _index_bounds(func, dims)

    def make(sinfo, name=None):
        if isinstance(sinfo, TupleStructInfo):
            return tuple(make(f) for f in sinfo.fields)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
            raise DiagnosticError(f"cannot make a random input for {sinfo}; give concrete shapes")
        shape = []
        for d in sinfo.shape:
            if isinstance(d, str):
                if d not in dims:
                    raise DiagnosticError(f"symbolic dim '{d}' needs a value: pass --dim {d}=SIZE")
                d = dims[d]
            shape.append(d)
        if int(np.prod(shape, dtype=object)) > _MAX_DIM:
            raise DiagnosticError(f"a random input of shape {tuple(shape)} is too large; give it with --inputs")
        if sinfo.dtype.startswith(("int", "uint")):
            high = bounds.get(name) or max(1, min(shape) if shape else 2)
            return rng.integers(0, high, size=shape).astype(sinfo.dtype)
        if sinfo.dtype == "bool":
            return rng.random(shape) < 0.5
        return rng.standard_normal(shape).astype(sinfo.dtype or "float32")

    given = _load_inputs(args.inputs, [p.name_hint for p in func.params]) if args.inputs else {}
    inputs = [given[p.name_hint] if p.name_hint in given else make(p.struct_info, p.name_hint) for p in func.params]
    ex = retrograd.build(mod, profile=args.profile)
    result = ex[args.func](*inputs)
    _print_value(result, "result")
    stats = getattr(ex, "stats", None)
    if stats is not None and getattr(stats, "peak_live_bytes", None) is not None:
        from retrograd.ir.text import human_bytes

        print(
            f"peak live bytes: {stats.peak_live_bytes} ({human_bytes(stats.peak_live_bytes)}; "
            f"parameters {stats.param_bytes}, intermediates {stats.peak_intermediate_bytes})"
        )
    if args.profile and hasattr(ex, "profile_report"):
        print(ex.profile_report())
    return 0


def _load_inputs(path: str, names: list[str]) -> dict:
    """Arrays keyed by parameter name from an .npz file (np.savez(path, x=..., w=...)); no pickles."""
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("not an .npz archive (write one with np.savez(path, x=..., w=...))")
        with data:
            arrays = {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DiagnosticError(f"cannot read inputs from {path}: {err}") from None
    unknown = sorted(set(arrays) - set(names))
    if unknown:
        raise DiagnosticError(f"{path}: no parameter named {', '.join(unknown)} (parameters: {', '.join(names)})")
    return arrays


# Random inputs and --dim sizes beyond this are refused before anything is allocated.
_MAX_DIM = 2**31 - 1


def _parse_dims(items):
    for item in items or []:
        name, _, value = item.partition("=")
        if not (value.isascii() and value.isdigit()) or not name:
            raise DiagnosticError(f"--dim expects NAME=SIZE, got {item!r}")
        if len(value) > 10 or int(value) > _MAX_DIM:
            raise DiagnosticError(f"--dim {name}: {value} is larger than {_MAX_DIM}")
        yield name, int(value)


def _index_bounds(func, dims: dict) -> dict[str, int]:
    """Per integer parameter used directly as class targets or take indices: the size they index.

    Random inputs draw from [0, size), so nll_loss targets stay below the class count and take
    indices within the indexed axis.
    """
    from retrograd.ir.expr import Call, Function, Var

    bounds: dict[str, int] = {}
    params = {p: p.name_hint for p in func.params}

    def size(x, axis):
        shape = getattr(x.struct_info, "shape", None)
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        d = shape[axis]
        return dims.get(d) if isinstance(d, str) else d

    if not isinstance(func, Function):
        return bounds
    for block in func.body.blocks:
        for b in block.bindings:
            call = b.value
            if not isinstance(call, Call) or not hasattr(call.op, "args"):
                continue
            names = [a.name for a in call.op.args][: len(call.args)]
            args = dict(zip(names, call.args))
            found = None
            if "targets" in args and "predictions" in args:
                pred = args["predictions"]
                ndim = len(getattr(pred.struct_info, "shape", None) or ())
                found = args["targets"], size(pred, 1 if ndim >= 2 else 0)
            elif "indices" in args and "x" in args:
                axis = call.attrs.get("axis")
                found = args["indices"], size(args["x"], 0 if axis is None else axis)
            if found is not None and isinstance(found[0], Var) and found[0] in params and found[1]:
                name = params[found[0]]
                bounds[name] = min(bounds.get(name, found[1]), found[1])
    return bounds


def _print_value(value, label):
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _print_value(v, f"{label}[{i}]")
        return
    arr = np.asarray(value)
    flat = arr.ravel()
    preview = np.array2string(flat[:6], precision=6, separator=", ")
    print(f"{label}: shape={arr.shape} dtype={arr.dtype} first={preview}")


def _count_bindings(func) -> int:
    from retrograd.ir.expr import Function

    if not isinstance(func, Function):
        return 0
    return sum(len(b.bindings) for b in func.body.blocks)


def cmd_passes(args) -> int:
    from retrograd.passes import list_passes

    for name in list_passes():
        print(name)
    return 0


def _write(data, output: str | None) -> None:
    """Text or bytes to the file `output`, or to standard output when it is None or '-'."""
    if output in (None, "-"):
        if isinstance(data, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        else:
            sys.stdout.write(data)
        return
    with open(output, "wb" if isinstance(data, bytes) else "w") as fh:
        fh.write(data)


def cmd_lower(args) -> int:
    from retrograd.lower import lower_to_python

    mod = _load(args.file)
    _verify(mod, args.file)
    _write(lower_to_python(mod, source_name="<stdin>" if args.file == "-" else args.file), args.output)
    return 0


def cmd_dot(args) -> int:
    from retrograd.lower import render, to_dot

    mod = _load(args.file)
    _verify(mod, args.file)
    text = to_dot(mod, args.func)
    fmt = "svg" if args.svg else "png" if args.png else None
    _write(render(text, fmt) if fmt else text, args.output)
    return 0


def _add_inspection_commands(sub) -> None:
    lw = sub.add_parser("lower", help="write the module as a standalone Python/NumPy module")
    lw.add_argument("file", help="script file, or - for standard input")
    lw.add_argument("-o", "--output", help="write the Python source here (- or absent: standard output)")
    lw.set_defaults(run=cmd_lower)

    d = sub.add_parser("dot", help="write the dataflow graph as Graphviz DOT (or SVG/PNG)")
    d.add_argument("file", help="script file, or - for standard input")
    d.add_argument("--func", help="only this function (default: every function)")
    d.add_argument("-o", "--output", help="write the graph here (- or absent: standard output)")
    fmt = d.add_mutually_exclusive_group()
    fmt.add_argument("--svg", action="store_true", help="render SVG with Graphviz instead of writing DOT")
    fmt.add_argument("--png", action="store_true", help="render PNG with Graphviz instead of writing DOT")
    d.set_defaults(run=cmd_dot)


def build_parser() -> argparse.ArgumentParser:
    import retrograd

    p = argparse.ArgumentParser(prog="retrograd", description=__doc__)
    p.add_argument("--version", action="version", version=f"retrograd {retrograd.__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help="parse and verify a script")
    c.add_argument("file")
    c.set_defaults(run=cmd_check)

    o = sub.add_parser("opt", help="run a pass pipeline and print the result")
    o.add_argument("file", help="script file, or - for standard input")
    o.add_argument("-p", "--passes", help='pipeline, e.g. "gradient(func=main), dce"')
    o.add_argument("-o", "--output", help="write the result here instead of standard output")
    o.add_argument("--print-after-all", action="store_true")
    o.add_argument("--print-changed", action="store_true")
    o.add_argument("--time-passes", action="store_true")
    o.add_argument(
        "--plan-report", action="store_true", help="print what checkpoint passes kept and recomputed (standard error)"
    )
    o.add_argument("--no-verify", action="store_true", help="skip the well-formedness checks")
    o.set_defaults(run=cmd_opt)

    r = sub.add_parser("run", help="execute a function on given or random inputs")
    r.add_argument("file")
    r.add_argument("--func", default="main")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--dim", action="append", help="value of a symbolic dim, NAME=SIZE")
    r.add_argument("--inputs", help="an .npz file of arrays named after the parameters; the rest are random")
    r.add_argument("--profile", action="store_true")
    r.set_defaults(run=cmd_run)

    ls = sub.add_parser("passes", help="list the registered passes")
    ls.set_defaults(run=cmd_passes)
    _add_inspection_commands(sub)

    from retrograd.examples.command import add_train_arguments, run_train

    t = sub.add_parser("train", help="train the digits example, or a script's function returning a loss")
    add_train_arguments(t)
    t.set_defaults(run=run_train)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except DiagnosticError as err:
        sys.stderr.write(f"{err}\n")
        return 1
    except FileNotFoundError as err:
        sys.stderr.write(f"error: {err.filename}: no such file\n")
        return 1
    except IsADirectoryError as err:
        sys.stderr.write(f"error: {err.filename}: is a directory, not a file\n")
        return 1
    except OSError as err:  # permissions, a full disk, ...
        sys.stderr.write(f"error: {err.filename or ''}: {err.strerror or err}\n")
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
