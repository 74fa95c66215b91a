"""Train and eval modes of a backbone's dropout calls (PyTorch's model.train() / model.eval()), as IR rewrites."""

from __future__ import annotations

from retrograd.ir.copy import copy_expr
from retrograd.ir.expr import Call, Function, Var
from retrograd.ir.functor import ExprMutator, ExprVisitor, if_depth, stack_room
from retrograd.ir.struct_info import TensorStructInfo

DROPOUT = "relax.nn.dropout"
# The train step's last state entry when it draws dropout masks: a 0-d int64 key, +1 per step.
DROPOUT_KEY = "dropout_key"


def _is_dropout(call: Call) -> bool:
    return getattr(call.op, "name", None) == DROPOUT


class _Count(ExprVisitor):
    def __init__(self):
        super().__init__()
        self.n = 0

    def visit_call(self, call: Call) -> None:
        self.n += _is_dropout(call)
        super().visit_call(call)


def count_dropouts(func: Function) -> int:
    """How many dropout calls `func`'s body makes."""
    counter = _Count()
    counter.visit_expr(func.body)
    return counter.n


class _Mode(ExprMutator):
    """Eval (key None): training=False, no key. Train: training=True, the key operand, and the k-th call
    (binding order) of n drawing with seed `seed * n + k`, so that no two calls share a mask stream."""

    def __init__(self, key: Var | None, n: int):
        super().__init__()
        self.key, self.n, self.k = key, n, 0

    def visit_call(self, call: Call):
        call = super().visit_call(call)
        if not _is_dropout(call):
            return call
        attrs = dict(call.attrs, training=self.key is not None)
        args = call.args[:1]
        if self.key is not None:
            attrs["seed"] = attrs["seed"] * self.n + self.k
            args = (args[0], self.key)
        self.k += 1
        return self.builder.normalize(Call(call.op, args, attrs, span=call.span))


def eval_mode(func: Function) -> Function:
    """`func` with every dropout call in inference mode (the identity); `func` itself when it has none."""
    return _Mode(None, 0).visit_function(func)


def train_mode(func: Function) -> Function:
    """`func` with a last parameter `dropout_key` (0-d int64) and every dropout call in training mode
    drawing its mask from (its renumbered seed, the key): a fresh mask for each key, a pure function."""
    func = copy_expr(func, {})  # fresh variables: the copy lives beside `func` in one module
    key = Var(DROPOUT_KEY, TensorStructInfo((), "int64"))
    with stack_room(if_depth(func)):
        body = _Mode(key, count_dropouts(func)).visit_expr(func.body)
    return Function((*func.params, key), body, func.ret_struct_info, func.is_pure, func.private,
                    dict(func.attrs), span=func.span)
