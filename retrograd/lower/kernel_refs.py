"""How lowered source names an op's registered kernel (an import, a factory call, or a registry lookup)."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import inspect
import keyword
import math
import types

import numpy as np


def literal(v) -> str:
    """Python source evaluating to `v` (numbers exactly, non-finite floats through np, NumPy scalars typed)."""
    if isinstance(v, bool) or v is None or isinstance(v, str | int):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "np.nan"
        if math.isinf(v):
            return "np.inf" if v > 0 else "-np.inf"
        return repr(v)
    if isinstance(v, np.generic):
        return f"np.{v.dtype.name}({literal(v.item())})"
    if isinstance(v, tuple):
        inner = ", ".join(literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, list):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    raise TypeError(f"no source literal for a {type(v).__name__}")


def _resolve(module: str, qualname: str):
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return obj


def _value_text(v) -> tuple[str, str | None] | None:
    """(source text, import line or None) for a value captured by a kernel factory's closure."""
    name = getattr(v, "__name__", None)
    if isinstance(name, str) and name and getattr(np, name, None) is v:
        return f"np.{v.__name__}", None
    try:
        return literal(v), None
    except TypeError:
        pass
    module, qual = getattr(v, "__module__", None), getattr(v, "__qualname__", None)
    if module and qual and "<" not in qual and _resolve(module, qual) is v:
        return qual, f"from {module} import {qual}"
    return None


def safe_name(text: str, shadow_builtins: bool = False) -> str:
    """An identifier from `text` that is no keyword, not `np` and, unless allowed, shadows no builtin."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text) or "_"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name) or (not shadow_builtins and hasattr(builtins, name)) or name == "np":
        name += "_"
    return name


def kernel_ref(op, alias: str, registry_only: bool = False) -> tuple[list[str], str | None]:
    """(import lines, setup statement or None) binding `alias` to `op.kernel` in generated source.

    Prefers what a reader can follow: the kernel's own module-level definition; else the factory
    that built it called with the same captured values (checked to rebuild the same code); else the
    one-line lambda it was registered with, copied (checked to compile to the same bytecode); else
    (or with `registry_only`) the registry's kernel, with the registering line quoted.
    """
    k = op.kernel
    module, qual = getattr(k, "__module__", None), getattr(k, "__qualname__", None)
    if registry_only:
        return _registry_ref(op, alias)
    if module == "numpy" and getattr(np, getattr(k, "__name__", ""), None) is k:
        return [], f"{alias} = np.{k.__name__}"
    if module and qual and "<" not in qual and _resolve(module, qual) is k:
        if "." not in qual:
            return [f"from {module} import {qual}" + ("" if qual == alias else f" as {alias}")], None
        head = qual.split(".")[0]
        return [f"from {module} import {head}"], f"{alias} = {qual}"
    if isinstance(k, functools.partial):
        made = _partial_ref(k, alias)
    elif getattr(k, "__code__", None) is None:
        made = None
    else:
        made = _factory_ref(k, module, qual, alias) or _lambda_ref(k, alias)
    if made is not None:
        return made
    return _registry_ref(op, alias)


def _partial_ref(k: functools.partial, alias):
    """`alias = functools.partial(f, ...)` when `f` is importable and every bound value has a source literal."""
    got = _value_text(k.func)
    if got is None:
        return None
    text, imp = got
    imports = ["import functools"] + ([imp] if imp else [])
    args = [text]
    for v in k.args:
        one = _value_text(v)
        if one is None:
            return None
        args.append(one[0])
        imports += [one[1]] if one[1] else []
    for name, v in k.keywords.items():
        one = _value_text(v)
        if one is None:
            return None
        args.append(f"{name}={one[0]}")
        imports += [one[1]] if one[1] else []
    return imports, f"{alias} = functools.partial({', '.join(args)})"


def _registry_ref(op, alias):
    k = op.kernel
    try:
        line = inspect.getsource(k).strip().splitlines()[0]
        start = line.find("lambda")
        shown = line[start:].rstrip(",") if start >= 0 else line
    except (OSError, TypeError):
        shown = "(source not available)"
    return ["from retrograd.ops.registry import get as get_op"], f'{alias} = get_op("{op.name}").kernel  # {shown}'


def _factory_ref(k, module, qual, alias):
    parts = (qual or "").split(".")
    if len(parts) != 3 or parts[1] != "<locals>" or k.__closure__ is None:
        return None
    factory = _resolve(module, parts[0])
    if not callable(factory):
        return None
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return None
    names = k.__code__.co_freevars
    if any(n not in params for n in names):
        return None
    imports, kwargs = [f"from {module} import {parts[0]}"], []
    for name, cell in zip(names, k.__closure__):
        got = _value_text(cell.cell_contents)
        if got is None:
            return None
        text, imp = got
        if imp:
            imports.append(imp)
        kwargs.append(f"{name}={text}")
    try:
        rebuilt = factory(**{n: c.cell_contents for n, c in zip(names, k.__closure__)})
    except Exception:  # a factory that does more than close over its arguments: use the registry
        return None
    if getattr(rebuilt, "__code__", None) is not k.__code__:
        return None
    return imports, f"{alias} = {parts[0]}({', '.join(kwargs)})"


def _lambda_ref(k, alias):
    """`alias = lambda ...: ...` copied from the registration, with imports for the globals it reads.

    Taken only when exactly one lambda starts on the kernel's line with its parameters, and every
    global it reads is NumPy, a builtin, or importable under its own name."""
    code = k.__code__
    if k.__closure__ or code.co_name != "<lambda>":
        return None
    try:
        text_all = inspect.getsource(inspect.getmodule(k))
    except (OSError, TypeError):
        return None
    params = list(code.co_varnames[: code.co_argcount])
    found = [n for n in ast.walk(ast.parse(text_all)) if isinstance(n, ast.Lambda)
             and n.lineno == code.co_firstlineno and [a.arg for a in n.args.args] == params]
    if len(found) != 1:
        return None
    node = found[0]
    names = {n.id for n in ast.walk(node.body) if isinstance(n, ast.Name)} - set(params)
    imports, scope = [], {"np": np}
    for name in sorted(names):
        value = k.__globals__.get(name, getattr(builtins, name, None))
        if name == "np" and value is np or name not in k.__globals__ and hasattr(builtins, name):
            continue
        if isinstance(value, types.ModuleType):
            imports.append(f"import {value.__name__} as {name}")
            scope[name] = value
            continue
        got = _value_text(value)
        if got is None or got[0] != name or got[1] is None:
            return None
        imports.append(got[1])
        scope[name] = value
    text = ast.get_source_segment(text_all, node)
    exec(f"f = {text}", scope)  # noqa: S102 - the kernel's own source text, from its module
    if scope["f"].__defaults__ != k.__defaults__:
        return None
    return imports, f"{alias} = ({text})" if "\n" in text else f"{alias} = {text}"
