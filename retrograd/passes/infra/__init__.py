"""Pass infrastructure: the pass base and decorators, the context, the registry with typed options, pipelines."""

from retrograd.passes.infra.context import PassContext
from retrograd.passes.infra.decorators import function_pass, kebab_case, module_pass
from retrograd.passes.infra.pass_base import FunctionPass, ModulePass, Pass, PassInfo, check_pass_result, map_functions
from retrograd.passes.infra.pipeline import Sequential, parse_pipeline
from retrograd.passes.infra.registry import (
    OptionError,
    get_pass,
    list_passes,
    pass_factory,
    pass_options,
    register_pass,
    type_name,
    unregister_pass,
)

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
    "unregister_pass",
    "get_pass",
    "list_passes",
    "pass_factory",
    "pass_options",
    "type_name",
    "OptionError",
    "parse_pipeline",
    "kebab_case",
    "check_pass_result",
    "map_functions",
]
