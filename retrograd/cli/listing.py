"""`retrograd passes` and `retrograd ops`: the registries, with options, attributes, kernels and gradients."""

from __future__ import annotations

import fnmatch
import inspect
import re

from retrograd.errors import UsageError, did_you_mean


def pipeline_value(value) -> str:
    """A default value as pipeline text writes it (true, none, "text", [1, 2])."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, str):
        return value if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", value) else '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(pipeline_value(v) for v in value) + "]"
    return str(value)


def pass_lines(name: str) -> list[str]:
    """A pass's entry: its name and one-line description, then one line per option."""
    from retrograd.passes.infra.registry import entry, pass_options, type_name

    found = entry(name)
    lines = [f"{name}  {found.doc}" if found.doc else name]
    alias_of = {real: short for short, real in found.aliases.items()}
    for opt, (hint, default) in pass_options(name).items():
        alias = f" (or {alias_of[opt]})" if opt in alias_of else ""
        value = "required" if default is inspect.Parameter.empty else f"default {pipeline_value(default)}"
        lines.append(f"    {opt}{alias}: {type_name(hint)}, {value}")
    return lines


def cmd_passes(args) -> int:
    from retrograd.passes import list_passes

    for name in list_passes():
        print("\n".join(pass_lines(name)))
    return 0


def op_lines(op) -> list[str]:
    """An op's entry: its call with arguments ([optional] ones bracketed), kernel and gradient, then its attributes."""
    from retrograd.ops.registry import REQUIRED, no_gradient

    args = ", ".join(f"[{a.name}]" if a.optional else a.name for a in op.args)
    grad = "yes" if op.grad not in (None, no_gradient) else "none needed" if op.grad is no_gradient else "no"
    lines = [f"{op.script_name}({args})  kernel: {'yes' if op.kernel is not None else 'no'}  gradient: {grad}"]
    if op.attrs_schema:
        attrs = [a.name if a.default is REQUIRED else f"{a.name}={a.default!r}" for a in op.attrs_schema]
        lines.append("    attributes: " + ", ".join(attrs))
    return lines


def matching_ops(pattern: str | None) -> list:
    """Registered ops whose name contains `pattern` (or matches it as a glob with * ? [), either spelling."""
    from retrograd.ops.registry import all_ops

    ops = sorted(all_ops(), key=lambda op: op.name)
    if not pattern:
        return ops
    pat = pattern.lower()
    glob = any(c in pat for c in "*?[")

    def hit(op) -> bool:
        names = (op.name.lower(), op.script_name.lower(), op.name[len("relax."):].lower())
        return any(fnmatch.fnmatchcase(n, pat) if glob else pat in n for n in names)

    found = [op for op in ops if hit(op)]
    if not found:
        names = [op.script_name for op in ops]
        hint = did_you_mean(pattern if pattern.startswith("R.") else "R." + pattern, names)
        raise UsageError(f"no op matches '{pattern}'{hint} (`retrograd ops` lists all {len(ops)})")
    return found


def cmd_ops(args) -> int:
    for op in matching_ops(args.pattern):
        print("\n".join(op_lines(op)))
    return 0


def add_parsers(sub) -> None:
    ls = sub.add_parser(
        "passes", help="list the registered passes with their options",
        description="List every registered pass: its one-line description, then its options with types and defaults.",
    )
    ls.set_defaults(run=cmd_passes)
    ops = sub.add_parser(
        "ops", help="list the registered ops with attributes, kernel and gradient",
        description="List registered ops: arguments, attributes with defaults, and whether each has a kernel "
        "and a gradient rule.",
    )
    ops.add_argument(
        "pattern", nargs="?", help="only ops whose name contains this text (or matches it, with * ? [ as in globs)"
    )
    ops.set_defaults(run=cmd_ops)
