"""Pass infrastructure: Pass, module/function pass decorators, Sequential, PassContext, a registry by name."""

from __future__ import annotations

import difflib
import functools
import inspect
import re
import threading
import types
import typing
from typing import Any, Callable

from retrograd.errors import PassError, Span
from retrograd.ir.expr import Function
from retrograd.ir.module import IRModule

__all__ = [
    "Pass",
    "PassInfo",
    "ModulePass",
    "FunctionPass",
    "Sequential",
    "PassContext",
    "module_pass",
    "function_pass",
    "register_pass",
    "get_pass",
    "list_passes",
    "pass_options",
    "parse_pipeline",
    "kebab_case",
]


def kebab_case(name: str) -> str:
    """`DeadCodeElimination` and `dead_code_elimination` both become `dead-code-elimination`."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name)
    return name.replace("_", "-").strip("-").lower()


class PassInfo:
    """What identifies a pass: its name, the opt level it needs, the passes it requires, its options."""

    __slots__ = ("name", "opt_level", "required", "options")

    def __init__(self, name: str, opt_level: int = 0, required=(), options: dict | None = None):
        self.name = name
        self.opt_level = opt_level
        self.required = tuple(required)
        self.options = dict(options or {})

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{self.name}({opts})" if opts else self.name


# -- the context --------------------------------------------------------------

_state = threading.local()


class PassContext:
    """Settings for running passes: `with PassContext(opt_level=2, verify=True): seq(mod)`.

    config: free-form options keyed by "<pass>.<option>" (read with `ctx.config.get`).
    instruments: objects with any of enter_pass_ctx(), exit_pass_ctx(), should_run(mod, info),
    run_before_pass(mod, info), run_after_pass(mod, info) (the module after the pass).
    verify: run the well-formedness check after every pass; an ill-formed result is a PassError.
    """

    def __init__(
        self,
        opt_level: int = 2,
        config: dict | None = None,
        instruments=(),
        verify: bool = False,
        required_pass=(),
        disabled_pass=(),
    ):
        self.opt_level = opt_level
        self.config: dict[str, Any] = dict(config or {})
        self.instruments = list(instruments or ())
        self.verify = verify
        self.required_pass = set(required_pass)
        self.disabled_pass = set(disabled_pass)

    @staticmethod
    def _stack() -> list:
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        return stack

    @classmethod
    def current(cls) -> "PassContext":
        """The innermost active context, or a default one."""
        stack = cls._stack()
        if stack:
            return stack[-1]
        default = getattr(_state, "default", None)
        if default is None:
            default = _state.default = cls()
        return default

    def __enter__(self) -> "PassContext":
        self._stack().append(self)
        for inst in self.instruments:
            _hook(inst, "enter_pass_ctx")()
        return self

    def __exit__(self, *exc) -> None:
        try:
            for inst in self.instruments:
                _hook(inst, "exit_pass_ctx")()
        finally:
            self._stack().pop()

    def pass_enabled(self, info: PassInfo) -> bool:
        """TVM's rule, applied by Sequential: disabled wins, then required, then opt_level."""
        if info.name in self.disabled_pass:
            return False
        if info.name in self.required_pass:
            return True
        return self.opt_level >= info.opt_level

    def __repr__(self) -> str:
        return f"<PassContext opt_level={self.opt_level} verify={self.verify} instruments={len(self.instruments)}>"


def _noop(*_args, **_kwargs):
    return None


def _hook(inst, name: str) -> Callable:
    return getattr(inst, name, None) or _noop


# -- passes -------------------------------------------------------------------


class Pass:
    """A module -> module transformation. Call it: `new_mod = p(mod)`; the input module is never changed."""

    # Containers (Sequential) are not instrumented themselves: their members are.
    _instrumented = True

    def __init__(self, info: PassInfo):
        self.info = info

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def opt_level(self) -> int:
        return self.info.opt_level

    @property
    def required(self) -> tuple:
        return self.info.required

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:  # pragma: no cover - abstract
        raise NotImplementedError

    def __call__(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        ctx = ctx or PassContext.current()
        if not isinstance(mod, IRModule):
            raise PassError(f"pass '{self.name}' expects an IRModule, got {type(mod).__name__}")
        if not self._instrumented:
            return self.transform(mod, ctx)
        instruments = ctx.instruments
        for inst in instruments:
            if _hook(inst, "should_run")(mod, self.info) is False:
                return mod
        for inst in instruments:
            _hook(inst, "run_before_pass")(mod, self.info)
        # Snapshot the input's function identities: a cheap check that the pass did not mutate it.
        before = _fingerprint(mod)
        out = self.transform(mod, ctx)
        if not isinstance(out, IRModule):
            raise PassError(f"pass '{self.name}' returned {type(out).__name__}, expected an IRModule")
        if _fingerprint(mod) != before:
            raise PassError(f"pass '{self.name}' mutated its input module (passes must return a new module)")
        if ctx.verify:
            check_pass_result(self.info, out)
        for inst in instruments:
            _hook(inst, "run_after_pass")(out, self.info)
        return out

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info!r}>"


def _fingerprint(mod: IRModule) -> tuple:
    return tuple((name, id(func)) for name, func in mod.items()) + (tuple(mod.attrs.items()),)


def check_pass_result(info: PassInfo, mod: IRModule) -> None:
    """Raise PassError naming the pass when its output is not well formed."""
    from retrograd.ir.well_formed import well_formed

    problems = well_formed(mod)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise PassError(f"pass '{info.name}' produced an ill-formed module ({len(problems)} problem(s)):\n{listing}{more}")


class ModulePass(Pass):
    """Wraps `fn(mod, ctx) -> mod`."""

    def __init__(self, fn: Callable, info: PassInfo):
        super().__init__(info)
        self.fn = fn
        functools.update_wrapper(self, fn, updated=())

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self.fn(mod, ctx)


class FunctionPass(Pass):
    """Wraps `fn(func, mod, ctx) -> func`, applied to every Relax function of the module."""

    def __init__(self, fn: Callable, info: PassInfo):
        super().__init__(info)
        self.fn = fn
        functools.update_wrapper(self, fn, updated=())

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod
        for name, func in mod.items():
            if not isinstance(func, Function):
                continue
            new = self.fn(func, mod, ctx)
            if new is None:
                raise PassError(f"function pass '{self.name}' returned None for function '{name}'")
            if new is not func:
                out = out.with_function(name, new)
        return out


class Sequential(Pass):
    """Runs passes in order; a member runs when the context enables it (opt_level, required, disabled)."""

    _instrumented = False

    def __init__(self, passes=(), name: str = "sequential", opt_level: int = 0, required=()):
        super().__init__(PassInfo(name, opt_level, required))
        self.passes = list(passes)
        for p in self.passes:
            if not isinstance(p, Pass):
                raise PassError(f"Sequential '{name}' got {p!r}, which is not a Pass")

    def transform(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            if not ctx.pass_enabled(p.info):
                continue
            for req in p.required:
                req_pass = get_pass(req)
                if ctx.pass_enabled(req_pass.info):
                    mod = req_pass(mod, ctx)
            mod = p(mod, ctx)
        return mod

    def __repr__(self) -> str:
        return f"<Sequential {self.name}: {', '.join(repr(p.info) for p in self.passes)}>"


# -- decorators ---------------------------------------------------------------


def _make_decorator(kind: str, wrapper_cls, method: str):
    def decorator(fn_or_cls=None, *, name: str | None = None, opt_level: int = 0, required=()):
        def wrap(target):
            pass_name = name or kebab_case(target.__name__)
            if inspect.isclass(target):
                return _pass_class(target, wrapper_cls, method, pass_name, opt_level, required)
            if not callable(target):
                raise TypeError(f"{kind} decorates a function or a class, not {target!r}")
            return wrapper_cls(target, PassInfo(pass_name, opt_level, required))

        if fn_or_cls is None:
            return wrap
        return wrap(fn_or_cls)

    decorator.__name__ = kind
    return decorator


def _pass_class(cls, wrapper_cls, method: str, pass_name: str, opt_level: int, required):
    """A Pass subclass whose constructor arguments are the pass's typed options."""
    if not hasattr(cls, method):
        raise TypeError(f"a {wrapper_cls.__name__} class needs a '{method}' method")
    base_init = cls.__init__ if cls.__init__ is not object.__init__ else None

    def __init__(self, *args, **kwargs):
        if base_init is not None:
            options = _bound_options(base_init, args, kwargs, pass_name, skip_self=True)
            base_init(self, *args, **kwargs)
        else:
            if args or kwargs:
                raise PassError(f"pass '{pass_name}' takes no options")
            options = {}
        Pass.__init__(self, PassInfo(pass_name, opt_level, required, options))

    def transform(self, mod, ctx):
        if wrapper_cls is ModulePass:
            return self.transform_module(mod, ctx)
        return FunctionPass.transform(self, mod, ctx)

    namespace = {"__init__": __init__, "transform": transform, "__doc__": cls.__doc__, "__module__": cls.__module__}
    if wrapper_cls is FunctionPass:
        namespace["fn"] = property(lambda self: self.transform_function)
    new_cls = type(cls.__name__, (cls, wrapper_cls), namespace)
    new_cls.__qualname__ = cls.__qualname__
    # The options' signature, for the registry and the pipeline parser.
    new_cls.__signature__ = _signature_without_self(base_init) if base_init else inspect.Signature()
    new_cls._option_hints = _hints(base_init) if base_init else {}
    return new_cls


def _signature_without_self(fn) -> inspect.Signature:
    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _bound_options(fn, args, kwargs, pass_name: str, skip_self: bool = False) -> dict:
    sig = _signature_without_self(fn) if skip_self else inspect.signature(fn)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as err:
        raise PassError(f"pass '{pass_name}': {err}") from None
    options = {}
    for key, value in bound.arguments.items():
        if sig.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
            options.update(value)
        else:
            options[key] = value
    return options


module_pass = _make_decorator("module_pass", ModulePass, "transform_module")
module_pass.__doc__ = """Make a module pass from `fn(mod, ctx) -> mod`, or from a class with
`transform_module(self, mod, ctx)` whose constructor arguments are the pass options.
Usable bare (`@module_pass`) or with arguments (`@module_pass(name="dce", opt_level=1)`)."""

function_pass = _make_decorator("function_pass", FunctionPass, "transform_function")
function_pass.__doc__ = """Make a pass applied to each function from `fn(func, mod, ctx) -> func`,
or from a class with `transform_function(self, func, mod, ctx)`."""


# -- registry -----------------------------------------------------------------


class _Entry:
    __slots__ = ("name", "factory", "aliases", "doc")

    def __init__(self, name, factory, aliases, doc):
        self.name, self.factory, self.aliases, self.doc = name, factory, dict(aliases or {}), doc


_REGISTRY: dict[str, _Entry] = {}


def register_pass(name: str, factory=None, *, aliases: dict[str, str] | None = None, override: bool = False):
    """Register a pass under a kebab-case name.

    `factory` is a Pass (no options), a pass class, or a function returning a Pass; its keyword
    parameters (with type annotations) are the options `get_pass` and `parse_pipeline` accept.
    `aliases` maps short option names to parameter names (`{"func": "func_name"}`).
    Usable as a decorator: `@register_pass("dce")`.
    """
    if factory is None:
        return lambda f: register_pass(name, f, aliases=aliases, override=override) or f
    if not re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", name):
        raise ValueError(f"pass name {name!r} is not kebab-case")
    if name in _REGISTRY and not override and _REGISTRY[name].factory is not factory:
        raise ValueError(f"pass '{name}' registered twice")
    if not (isinstance(factory, Pass) or callable(factory)):
        raise TypeError(f"cannot register {factory!r} as a pass")
    doc = inspect.getdoc(factory) or ""
    _REGISTRY[name] = _Entry(name, factory, aliases, doc.splitlines()[0] if doc else "")
    return factory


def unregister_pass(name: str) -> None:
    _REGISTRY.pop(name, None)


def list_passes() -> list[str]:
    """Registered pass names, sorted."""
    return sorted(_REGISTRY)


def _entry(name: str, span: Span | None = None) -> _Entry:
    entry = _REGISTRY.get(name)
    if entry is None:
        close = difflib.get_close_matches(name, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        known = ", ".join(sorted(_REGISTRY)) or "none registered"
        raise PassError(f"unknown pass '{name}'{hint} (known passes: {known})", span)
    return entry


def pass_options(name: str) -> dict[str, tuple[Any, Any]]:
    """The options of a registered pass: name -> (type annotation, default or inspect.Parameter.empty)."""
    entry = _entry(name)
    params, hints = _factory_params(entry.factory)
    return {p.name: (hints.get(p.name, Any), p.default) for p in params}


def _factory_params(factory) -> tuple[list[inspect.Parameter], dict]:
    if isinstance(factory, Pass):
        return [], {}
    if inspect.isclass(factory):
        hints = getattr(factory, "_option_hints", None)
        sig = inspect.signature(factory)
        if hints is None:
            hints = _hints(factory.__init__)
    else:
        sig = inspect.signature(factory)
        hints = _hints(factory)
    params = [
        p for p in sig.parameters.values() if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    return params, hints


def _hints(fn) -> dict:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to no conversion
        return {}


def get_pass(name: str, *args, **options) -> Pass:
    """Instantiate a registered pass with options (`get_pass("gradient", func_name="main")`)."""
    return _instantiate(_entry(name), list(args), options, convert=False)


class OptionError(ValueError):
    """A pass's complaint about the value of one option: pipeline errors point at that option."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


def _instantiate(
    entry: _Entry, args: list, options: dict, convert: bool, spans: dict | None = None, span: Span | None = None
) -> Pass:
    factory = entry.factory
    params, hints = _factory_params(factory)
    by_name = {p.name: p for p in params}
    spans = spans or {}
    resolved: dict[str, Any] = {}
    for key, value in options.items():
        real = entry.aliases.get(key, key)
        if real not in by_name:
            known = ", ".join(list(by_name) + [f"{a} (= {t})" for a, t in entry.aliases.items()]) or "none"
            raise PassError(f"pass '{entry.name}' has no option '{key}' (options: {known})", spans.get(key))
        if real in resolved:
            raise PassError(f"pass '{entry.name}': option '{real}' given twice", spans.get(key))
        resolved[real] = value
    if len(args) > len(params):
        raise PassError(f"pass '{entry.name}' takes at most {len(params)} positional options, got {len(args)}", spans.get(len(params)))
    for i, value in enumerate(args):
        pname = params[i].name
        if pname in resolved:
            raise PassError(f"pass '{entry.name}': option '{pname}' given twice", spans.get(i))
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
                    f"option '{key}' of pass '{entry.name}' expects {_type_name(hint)}, got {value!r} ({err})",
                    where,
                ) from None
    missing = [p.name for p in params if p.default is inspect.Parameter.empty and p.name not in resolved]
    if missing:
        raise PassError(f"pass '{entry.name}' needs option(s) {', '.join(repr(m) for m in missing)}", span)
    if isinstance(factory, Pass):
        return factory
    try:
        result = factory(**resolved)
    except PassError:
        raise
    except (TypeError, ValueError) as err:
        where = spans.get(err.option, span) if isinstance(err, OptionError) else span
        raise PassError(f"pass '{entry.name}': {err}", where) from None
    if not isinstance(result, Pass):
        raise PassError(f"factory of pass '{entry.name}' returned {type(result).__name__}, not a Pass")
    return result


# -- typed option conversion -----------------------------------------------------


def _type_name(hint) -> str:
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
        raise ValueError("; ".join(errors) or "no alternative fits")
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


# -- pipeline text ------------------------------------------------------------------

_PIPE_TOKEN = re.compile(
    r"""\s*(?:
        (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<num>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![A-Za-z_\d.%]))
      | (?P<qty>(?:\d+\.\d*|\.\d+|\d+)(?:%|[A-Za-z]+))
      | (?P<word>[A-Za-z_][A-Za-z0-9_.\-]*)
      | (?P<punct>[(),=\[\]])
    )""",
    re.VERBOSE,
)


class _PipelineParser:
    """`name(opt=value, ...), name, ...`; values: numbers, quantities (40%, 12MiB, kept as text),
    true/false/none, names, strings, [lists]."""

    def __init__(self, text: str, source_name: str):
        self.text = text
        self.source_name = source_name
        self.toks: list[tuple[str, Any, int, int]] = []
        pos = 0
        while True:
            m = _PIPE_TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                rest = text[pos:]
                if rest.strip():
                    col = pos + (len(rest) - len(rest.lstrip()))
                    raise self.error(f"unexpected character {text[col]!r}", col, col + 1)
                break
            kind = m.lastgroup
            start, end = m.start(kind), m.end(kind)
            self.toks.append((kind, m.group(kind), start, end))
            pos = m.end()
        self.i = 0

    def span(self, start: int, end: int) -> Span:
        return Span(self.source_name, 1, start + 1, 1, max(end, start + 1) + 1, source=self.text)

    def error(self, message: str, start: int, end: int | None = None) -> PassError:
        return PassError(message, self.span(start, end if end is not None else start + 1))

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "", len(self.text), len(self.text))

    def take(self, kind: str, value: str | None = None):
        tok = self.peek()
        if tok[0] != kind or (value is not None and tok[1] != value):
            want = repr(value) if value else {"word": "a pass name", "eof": "the end"}.get(kind, kind)
            got = "the end of the pipeline" if tok[0] == "eof" else repr(tok[1])
            raise self.error(f"expected {want}, got {got}", tok[2], tok[3])
        self.i += 1
        return tok

    def pipeline(self) -> list[tuple]:
        items = []
        if self.peek()[0] == "eof":
            return items
        while True:
            items.append(self.item())
            tok = self.peek()
            if tok[0] == "eof":
                return items
            self.take("punct", ",")

    def item(self):
        _, name, start, end = self.take("word")
        args, kwargs, spans = [], {}, {}
        if self.peek()[:2] == ("punct", "("):
            self.take("punct", "(")
            if self.peek()[:2] != ("punct", ")"):
                while True:
                    tok = self.peek()
                    after = self.toks[self.i + 1] if self.i + 1 < len(self.toks) else None
                    if tok[0] == "word" and after is not None and after[:2] == ("punct", "="):
                        self.i += 2
                        vstart = self.peek()[2]
                        value = self.value()
                        if tok[1] in kwargs:
                            raise self.error(f"option '{tok[1]}' given twice", tok[2], tok[3])
                        kwargs[tok[1]] = value
                        spans[tok[1]] = self.span(tok[2], max(self.toks[self.i - 1][3], vstart))
                    else:
                        if kwargs:
                            raise self.error("positional option after keyword options", tok[2], tok[3])
                        spans[len(args)] = self.span(tok[2], tok[3])
                        args.append(self.value())
                    if self.peek()[:2] == ("punct", ","):
                        self.take("punct", ",")
                        continue
                    self.take("punct", ")")
                    break
            else:
                self.take("punct", ")")
        return name, self.span(start, end), args, kwargs, spans

    def value(self):
        kind, text, start, end = self.peek()
        if kind == "punct" and text == "[":
            self.i += 1
            items = []
            if self.peek()[:2] == ("punct", "]"):
                self.i += 1
                return items
            while True:
                items.append(self.value())
                if self.peek()[:2] == ("punct", ","):
                    self.i += 1
                    if self.peek()[:2] == ("punct", "]"):
                        self.i += 1
                        return items
                    continue
                self.take("punct", "]")
                return items
        self.i += 1
        if kind == "str":
            return bytes(text[1:-1], "utf-8").decode("unicode_escape")
        if kind == "qty":
            return text  # a number with a unit (40%, 12MiB): the pass reads it
        if kind == "num":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "word":
            lowered = text.lower()
            if lowered == "true":
                return True
            if lowered == "false":
                return False
            if lowered == "none":
                return None
            return text
        got = "the end of the pipeline" if kind == "eof" else repr(text)
        raise self.error(f"expected an option value, got {got}", start, end)


def parse_pipeline(text: str, source_name: str = "<pipeline>") -> Sequential:
    """Build a Sequential from `"gradient(func=main, target_index=0), dce"`, converting option types.

    Errors (unknown pass or option, ill-typed value, bad syntax) are PassErrors pointing into the text.
    """
    parser = _PipelineParser(text, source_name)
    passes = []
    for name, span, args, kwargs, spans in parser.pipeline():
        entry = _entry(name, span)
        passes.append(_instantiate(entry, args, kwargs, convert=True, spans=spans, span=span))
    return Sequential(passes, name="pipeline")
