"""`retrograd run`: execute a function on given or random inputs; results, memory, profile, timing, --save."""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from retrograd.cli.common import STDIO, function_named, load_verified
from retrograd.cli.inputs import RandomInputs, check_dtypes, parse_dims, read_inputs
from retrograd.errors import UsageError
from retrograd.runtime.malloc import keep_freed_memory


def cmd_run(args) -> int:
    import retrograd

    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    if args.repeat < 0 or args.warmup < 0:
        raise UsageError("--repeat and --warmup must be non-negative integers")
    if args.inputs == STDIO and args.file == STDIO:
        raise UsageError("the script and --inputs cannot both come from standard input")
    if args.save not in (None, STDIO) and not args.save.endswith(".npz"):
        raise UsageError(f"--save {args.save}: the outputs are written as an .npz archive; name the file *.npz")
    mod = load_verified(args.file)
    function_named(mod, args.func, args.file)
    if isinstance(args.cast, str):
        mod = _cast_module(mod, args.cast)
    func = mod[args.func]
    dims = parse_dims(args.dim, func, args.func)
    given = check_dtypes(read_inputs(args.inputs, func, args.func), func, bool(args.cast)) if args.inputs else {}
    random = RandomInputs(func, dims, args.seed)
    inputs = [given[p.name_hint] if p.name_hint in given else random.make(p.struct_info, p.name_hint) for p in func.params]
    keep_freed_memory()  # a run of its own: repeated calls reuse their pages (runtime/malloc.py)
    ex = retrograd.build(mod, profile=args.profile)
    fn = ex[args.func]
    result = fn(*inputs)
    # With the outputs on standard output, the report goes to standard error.
    out = sys.stderr if args.save == STDIO else sys.stdout
    _print_value(result, "result", out)
    stats = getattr(ex, "stats", None)
    if stats is not None and getattr(stats, "peak_live_bytes", None) is not None:
        from retrograd.analysis.memory import human_bytes

        print(
            f"peak live bytes: {stats.peak_live_bytes} ({human_bytes(stats.peak_live_bytes)}; "
            f"parameters {stats.param_bytes}, intermediates {stats.peak_intermediate_bytes})",
            file=out,
        )
    if args.profile and hasattr(ex, "profile_report"):
        print(ex.profile_report(), file=out)
    if args.repeat:
        print(time_report(lambda: fn(*inputs), args.repeat, args.warmup), file=out)
    if args.save:
        _save(result, args.save)
    return 0


def _cast_module(mod, dtype: str):
    """The module computing in `dtype` (the cast-floats pass), or a usage error naming the float dtypes."""
    from retrograd.ir.struct_info import FLOAT_DTYPES
    from retrograd.passes import CastFloats

    if dtype not in FLOAT_DTYPES:
        raise UsageError(f"--cast {dtype}: give a float dtype to run in ({', '.join(FLOAT_DTYPES)}), or --cast alone")
    return CastFloats(dtype=dtype)(mod)


def time_report(call, repeat: int, warmup: int) -> str:
    """Run `call` `warmup` times untimed, then `repeat` times timed: median, mean, spread (as TVM's time_evaluator)."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    ms = [t * 1e3 for t in times]
    std = statistics.pstdev(ms) if len(ms) > 1 else 0.0
    return (
        f"time over {repeat} run(s) after {warmup} warm-up(s): median {statistics.median(ms):.4f} ms, "
        f"mean {statistics.fmean(ms):.4f} ms, min {min(ms):.4f} ms, max {max(ms):.4f} ms, std {std:.4f} ms"
    )


def output_arrays(value, label: str = "result") -> dict[str, np.ndarray]:
    """The result's arrays keyed as --save writes them: `result`, or `result_0`, `result_1_0`, ... for tuples."""
    if isinstance(value, tuple):
        out: dict[str, np.ndarray] = {}
        for i, v in enumerate(value):
            out.update(output_arrays(v, f"{label}_{i}"))
        return out
    return {label: np.asarray(value)}


def _save(result, path: str) -> None:
    arrays = output_arrays(result)
    if path == STDIO:
        sys.stdout.flush()
        np.savez(sys.stdout.buffer, **arrays)
        return
    np.savez(path, **arrays)


def _print_value(value, label, out) -> None:
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            _print_value(v, f"{label}[{i}]", out)
        return
    arr = np.asarray(value)
    flat = arr.ravel()
    preview = np.array2string(flat[:6], precision=6, separator=", ")
    print(f"{label}: shape={arr.shape} dtype={arr.dtype} first={preview}", file=out)


def add_parser(sub) -> None:
    r = sub.add_parser(
        "run", help="execute a function on given or random inputs",
        description="Execute a function on inputs from --inputs or random ones (seeded), and report its "
        "results and peak memory.",
    )
    r.add_argument("file", help="script file, or - for standard input")
    r.add_argument("--func", default="main", help="the function to run (default: main)")
    r.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: 0)")
    r.add_argument(
        "--dim", action="append", metavar="NAME=SIZE", help="the size of a symbolic dim of the parameters (repeatable)"
    )
    r.add_argument(
        "--inputs", metavar="FILE",
        help="an .npz of arrays named after the parameters (the others are random), or an .npy for a "
        "function of one parameter; - reads standard input",
    )
    r.add_argument(
        "--cast", nargs="?", const=True, default=False, metavar="DTYPE",
        help="convert --inputs arrays to their parameters' dtypes instead of refusing them; with a float DTYPE "
        "(bfloat16, float16, float8_e4m3fn, ...), first run the module in it: every float32 tensor becomes DTYPE",
    )
    r.add_argument(
        "--save", metavar="OUT.npz",
        help="write the outputs to an .npz archive (result, or result_0, result_1, ... for tuples); - for standard output",
    )
    r.add_argument("--profile", action="store_true", help="time every op and print a table per op")
    r.add_argument(
        "--repeat", type=int, default=0, metavar="N", help="time N more runs and print median, mean, min, max and std"
    )
    r.add_argument("--warmup", type=int, default=1, metavar="N", help="untimed runs before the --repeat runs (default: 1)")
    r.set_defaults(run=cmd_run)
