"""The pass registry by kebab-case name, and the typed conversion of options given as pipeline text."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any

from retrograd.errors import PassError, Span, did_you_mean
from retrograd.passes.infra.pass_base import Pass

class OptionError(ValueError):
    """A pass's complaint about the value of one option: pipeline errors point at that option."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


class _Entry:
    __slots__ = ("name", "factory", "aliases", "doc")

    def __init__(self, name, factory, aliases, doc):
        self.name, self.factory, self.aliases, self.doc = name, factory, dict(aliases or {}), doc


_REGISTRY: dict[str, _Entry] = {}


def register_pass(name: str, factory=None, *, aliases: dict[str, str] | None = None, override: bool = False):
    """Register a pass factory under a kebab-case name (passes defined with `module_pass` or
    `function_pass` register themselves; this is for factory functions and late registration).

    `factory` is a Pass (no options), a pass class, or a function returning a Pass; its keyword
    parameters (with type annotations) are the options `get_pass` and `parse_pipeline` accept.
    `aliases` maps short option names to parameter names (`{"func": "func_name"}`).
    Usable as a decorator: `@register_pass("dce")`.
    """
    if factory is None:
        return lambda f: register_pass(name, f, aliases=aliases, override=override) or f
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        raise ValueError(f"pass name {name!r} is not kebab-case")
    old = _REGISTRY.get(name)
    if old is not None and not override and old.factory is not factory and not same_definition(old.factory, factory):
        raise ValueError(f"pass '{name}' registered twice")
    if not (isinstance(factory, Pass) or callable(factory)):
        raise TypeError(f"cannot register {factory!r} as a pass")
    doc = inspect.getdoc(factory) or ""
    _REGISTRY[name] = _Entry(name, factory, aliases, doc.splitlines()[0] if doc else "")
    return factory


def same_definition(a, b) -> bool:
    """Whether two factories come from the same source definition (a module executed again: reload, notebook)."""
    where = [(getattr(f, "__module__", None), getattr(f, "__qualname__", None)) for f in (a, b)]
    return where[0] == where[1] and None not in where[0]


def unregister_pass(name: str) -> None:
    _REGISTRY.pop(name, None)


def list_passes() -> list[str]:
    """Registered pass names, sorted."""
    return sorted(_REGISTRY)


def pass_factory(name: str):
    """The definition registered under `name`: a pass class, a Pass instance, or a factory function."""
    return entry(name).factory


def entry(name: str, span: Span | None = None) -> _Entry:
    """The registry entry of a pass; an unknown name is a PassError suggesting close names."""
    found = _REGISTRY.get(name)
    if found is None:
        hint = did_you_mean(name, _REGISTRY)
        known = ", ".join(sorted(_REGISTRY)) or "none registered"
        raise PassError(f"unknown pass '{name}'{hint} (known passes: {known})", span)
    return found


def pass_options(name: str) -> dict[str, tuple[Any, Any]]:
    """The options of a registered pass: name -> (type annotation, default or inspect.Parameter.empty)."""
    found = entry(name)
    params, hints = _factory_params(found.factory)
    return {p.name: (hints.get(p.name, Any), p.default) for p in params}


def _factory_params(factory) -> tuple[list[inspect.Parameter], dict]:
    if isinstance(factory, Pass):
        return [], {}
    if inspect.isclass(factory):
        hints = getattr(factory, "_option_hints", None)
        sig = inspect.signature(factory)
        if hints is None:
            hints = option_hints(factory.__init__)
    else:
        sig = inspect.signature(factory)
        hints = option_hints(factory)
    params = [
        p for p in sig.parameters.values() if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    return params, hints


def option_hints(fn) -> dict:
    """The resolved type annotations of a callable (empty when they cannot be resolved)."""
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to no conversion
        return {}


def get_pass(name: str, *args, **options) -> Pass:
    """Instantiate a registered pass with options (`get_pass("gradient", func_name="main")`)."""
    return instantiate(entry(name), list(args), options, convert=False)


def instantiate(
    item: _Entry, args: list, options: dict, convert: bool, spans: dict | None = None, span: Span | None = None
) -> Pass:
    """A pass from a registry entry and its options (aliases resolved, converted from text if `convert`)."""
    factory = item.factory
    params, hints = _factory_params(factory)
    by_name = {p.name: p for p in params}
    spans = spans or {}
    resolved: dict[str, Any] = {}
    for key, value in options.items():
        real = item.aliases.get(key, key)
        if real not in by_name:
            known = ", ".join(list(by_name) + [f"{a} (= {t})" for a, t in item.aliases.items()]) or "none"
            hint = did_you_mean(key, list(by_name) + list(item.aliases))
            raise PassError(f"pass '{item.name}' has no option '{key}'{hint} (options: {known})", spans.get(key))
        if real in resolved:
            raise PassError(f"pass '{item.name}': option '{real}' given twice", spans.get(key))
        resolved[real] = value
    if len(args) > len(params):
        raise PassError(f"pass '{item.name}' takes at most {len(params)} positional options, got {len(args)}", spans.get(len(params)))
    for i, value in enumerate(args):
        pname = params[i].name
        if pname in resolved:
            raise PassError(f"pass '{item.name}': option '{pname}' given twice", spans.get(i))
        resolved[pname] = value
    if convert:
        for key, value in list(resolved.items()):
            hint = hints.get(key, Any)
            if hint is Any and by_name[key].default not in (inspect.Parameter.empty, None):
                hint = type(by_name[key].default)
            try:
                resolved[key] = _convert(value, hint)
            except (TypeError, ValueError) as err:
                where = spans.get(key) or spans.get(next((i for i, p in enumerate(params) if p.name == key), -1))
                raise PassError(
                    f"option '{key}' of pass '{item.name}' expects {type_name(hint)}, got {value!r} ({err})",
                    where,
                ) from None
    missing = [p.name for p in params if p.default is inspect.Parameter.empty and p.name not in resolved]
    if missing:
        raise PassError(f"pass '{item.name}' needs option(s) {', '.join(repr(m) for m in missing)}", span)
    if isinstance(factory, Pass):
        return factory
    try:
        result = factory(**resolved)
    except PassError:
        raise
    except (TypeError, ValueError) as err:
        where = spans.get(err.option, span) if isinstance(err, OptionError) else span
        raise PassError(f"pass '{item.name}': {err}", where) from None
    if not isinstance(result, Pass):
        raise PassError(f"factory of pass '{item.name}' returned {type(result).__name__}, not a Pass", span)
    return result


# -- typed option conversion -----------------------------------------------------


def type_name(hint) -> str:
    """An option's type annotation as `retrograd passes` and option errors spell it (`int | None`)."""
    if hint is Any:
        return "any value"
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _convert(value, hint):
    """Coerce a parsed pipeline value to a parameter's annotation; ValueError/TypeError if it cannot."""
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        if value is None and type(None) in args:
            return None
        errors = []
        for member in args:
            if member is type(None):
                continue
            try:
                return _convert(value, member)
            except (TypeError, ValueError) as err:
                errors.append(str(err))
        raise ValueError("; ".join(dict.fromkeys(errors)) or "no alternative fits")
    if origin is typing.Literal:
        if value in args:
            return value
        raise ValueError(f"expected one of {', '.join(repr(a) for a in args)}")
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        items = list(value) if isinstance(value, list | tuple) else [value]
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(items) != len(args):
                raise ValueError(f"expected {len(args)} items")
            return tuple(_convert(v, t) for v, t in zip(items, args))
        item_hint = args[0] if args else Any
        converted = [_convert(v, item_hint) for v in items]
        container = origin or hint
        return converted if container is list else container(converted)
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise TypeError("expected a mapping")
        return value
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise TypeError("expected true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise TypeError("expected an integer")
    if hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise TypeError("expected a number")
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise TypeError("expected a name or a string")
    if hint is type(None):
        if value is None:
            return None
        raise TypeError("expected none")
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise TypeError(f"expected {hint.__name__}")
    return value


