"""`to_tvm`: a retrograd IRModule as a TVM IRModule, through the script text TVM parses."""

from __future__ import annotations

from retrograd.errors import UnsupportedError
from retrograd.ir.expr import Function, Op
from retrograd.ir.functor import ExprVisitor

_NOTE = "# not loadable in TVM: "


class _OpNames(ExprVisitor):
    def __init__(self):
        super().__init__()
        self.names: set[str] = set()

    def visit_call(self, call) -> None:
        if isinstance(call.op, Op):
            self.names.add(call.op.name)
        super().visit_call(call)


def ops_used(mod) -> set[str]:
    """The names of the ops a module calls."""
    visitor = _OpNames()
    for func in mod.functions().values():
        if isinstance(func, Function):
            visitor.visit_expr(func)
    return visitor.names


def to_tvm(mod):
    """The TVM IRModule of `mod`: its script (constants in the metadata section, which TVM's parser
    evaluates before the module) read by `tvm.script.from_source`. Needs apache-tvm.

    A module calling an op TVM does not define (retrograd's fused backward ops, such as
    `relax.grad.layer_norm_backward` in a Gradient's output) or using a form TVM cannot read is an
    UnsupportedError naming them."""
    try:
        import tvm
        from tvm import script as tvm_script
    except ImportError as err:
        raise UnsupportedError(f"to_tvm needs TVM (the oracle extra: pip install apache-tvm): {err}") from None
    known = set(map(str, tvm.ir.Op.list_op_names()))
    missing = sorted(ops_used(mod) - known)
    if missing:
        raise UnsupportedError(f"to_tvm: TVM defines no op {', '.join(missing)} (retrograd's own)")
    text = mod.script()
    notes = [line[len(_NOTE):] for line in text.splitlines() if line.startswith(_NOTE)]
    if notes:
        raise UnsupportedError("to_tvm: the module has no TVM spelling: " + "; ".join(notes))
    return tvm_script.from_source(text)
