"""Passes: the infrastructure (Pass, Sequential, PassContext, registry, instruments) and one file per pass."""

from retrograd.passes.infra import (  # noqa: F401
    FunctionPass,
    ModulePass,
    Pass,
    PassContext,
    PassInfo,
    Sequential,
    function_pass,
    get_pass,
    list_passes,
    module_pass,
    parse_pipeline,
    pass_factory,
    pass_options,
    register_pass,
    unregister_pass,
)
from retrograd.passes.instrument import (  # noqa: F401
    PassInstrument,
    PrintBeforeAfter,
    PrintChanged,
    Timing,
    VerifyAfterEach,
)

# One import line per pass below (each pass registers itself where it is defined, by its decorator).
from retrograd.passes.dce import DeadCodeElimination  # noqa: F401,E402
from retrograd.passes.fold_constant import FoldConstant  # noqa: F401,E402
from retrograd.passes.simplify import Simplify  # noqa: F401,E402
from retrograd.passes.gradient import Gradient  # noqa: F401,E402
from retrograd.passes.gradient import densify_sparse_grad, merge_sparse_grad  # noqa: F401,E402
from retrograd.passes.cse import CommonSubexprElimination  # noqa: F401,E402
from retrograd.passes.checkpoint import Checkpoint, PlanReport, plan_checkpoint  # noqa: F401,E402
from retrograd.passes.cast_floats import CastFloats  # noqa: F401,E402
