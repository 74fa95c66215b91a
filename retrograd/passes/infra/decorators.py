"""`module_pass` / `function_pass`: the one definition that makes, names and registers a pass."""

from __future__ import annotations

import inspect
import re
import typing
import warnings

import attrs

from retrograd.errors import PassError
from retrograd.passes.infra.pass_base import FunctionPass, ModulePass, Pass, PassInfo
from retrograd.passes.infra.registry import list_passes, option_hints, pass_factory, register_pass, same_definition


def kebab_case(name: str) -> str:
    """`DeadCodeElimination` and `dead_code_elimination` both become `dead-code-elimination`."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", name)
    return name.replace("_", "-").strip("-").lower()


def _make_decorator(kind: str, wrapper_cls, method: str):
    def decorator(
        fn_or_cls=None,
        *,
        name: str | None = None,
        opt_level: int = 0,
        required=(),
        aliases: dict[str, str] | None = None,
        register: bool | None = None,
    ):
        def wrap(target):
            pass_name = name or kebab_case(target.__name__)
            if inspect.isclass(target):
                made = _pass_class(target, wrapper_cls, method, pass_name, opt_level, required)
            elif callable(target):
                made = wrapper_cls(target, PassInfo(pass_name, opt_level, required))
            else:
                raise TypeError(f"{kind} decorates a function or a class, not {target!r}")
            if register:
                register_pass(pass_name, made, aliases=aliases)
            # A definition inside a function is made anew at every call: it names no single pass.
            elif register is None and "<locals>" not in target.__qualname__:
                _register_quietly(pass_name, made, aliases)
            return made

        if fn_or_cls is None:
            return wrap
        return wrap(fn_or_cls)

    decorator.__name__ = kind
    return decorator


def _register_quietly(name: str, made, aliases) -> None:
    """Register a module-level definition unless its name is taken by another one, which then keeps
    it (a warning says so): importing a module must not fail because two files chose the same name."""
    if name in list_passes() and not same_definition(pass_factory(name), made):
        warnings.warn(
            f"pass '{name}' is already registered by {_origin(pass_factory(name))}; {_origin(made)} is not "
            "registered (give it another name=, or register=True to make the clash an error)",
            RuntimeWarning,
            stacklevel=4,
        )
        return
    register_pass(name, made, aliases=aliases)


def _origin(factory) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', '?')}"


def _pass_class(cls, wrapper_cls, method: str, pass_name: str, opt_level: int, required):
    """A Pass subclass whose options are the class's constructor arguments, or, for a class without
    `__init__`, its annotated attributes (made typed, frozen fields, as xDSL's ModulePass dataclasses)."""
    if not hasattr(cls, method):
        raise TypeError(f"a {wrapper_cls.__name__} class needs a '{method}' method")
    hints = None
    if cls.__init__ is object.__init__ and cls.__dict__.get("__annotations__"):
        cls = attrs.define(cls, frozen=True, slots=False, eq=False, repr=False)
        hints = _field_hints(cls)
    base_init = cls.__init__ if cls.__init__ is not object.__init__ else None

    def __init__(self, *args, **kwargs):
        if base_init is not None:
            options = _bound_options(base_init, args, kwargs, pass_name)
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
    if hints is None:
        hints = option_hints(base_init) if base_init else {}
    new_cls._option_hints = hints
    return new_cls


def _field_hints(cls) -> dict:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable annotations: fall back to no conversion
        return {}
    return {f.name: hints[f.name] for f in attrs.fields(cls) if f.name in hints}


def _signature_without_self(fn) -> inspect.Signature:
    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def _bound_options(init, args, kwargs, pass_name: str) -> dict:
    sig = _signature_without_self(init)
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
module_pass.__doc__ = """Make and register a module pass from `fn(mod, ctx) -> mod`, or from a class with
`transform_module(self, mod, ctx)` whose options are its constructor arguments or annotated fields.

Usable bare (`@module_pass`) or with arguments (`@module_pass(name="dce", opt_level=1)`). The pass is
registered under `name` (default: the kebab-case definition name) unless defined inside a function
or `register=False` (a name another definition holds is left to it, with a warning; `register=True`
makes that an error); `aliases` maps short option names to real ones (`{"func": "func_name"}`)."""

function_pass = _make_decorator("function_pass", FunctionPass, "transform_function")
function_pass.__doc__ = """Make and register a pass applied to each function, from `fn(func, mod, ctx) -> func`
or from a class with `transform_function(self, func, mod, ctx)` (options as for `module_pass`)."""
