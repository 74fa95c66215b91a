"""An imported model's buffers in training: state carried from step to step, never trained.

`from_exported_program` marks `main` with the attributes `buffers` (the IR names of the parameters
that are PyTorch buffers: BatchNorm's running statistics and num_batches_tracked, BERT's position_ids)
and `mutated_buffers` (one name per output after the model's own: the buffer that output is the new
value of). `setup_trainer` takes the buffers out of the trained parameters and out of the optimizer;
`train_step` takes them after the targets and returns their new values (see assemble.py).
"""

from __future__ import annotations

from retrograd.errors import TrainingError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Call, Function, Tuple, TupleGetItem, Var
from retrograd.ir.functor import ExprMutator, ExprVisitor, if_depth, stack_room
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.passes.dce import eliminate_dead_code

BATCH_NORM = "relax.nn.batch_norm"
# What `Trainer.init_params` (and `set_params` without them) gives a buffer: PyTorch's
# reset_running_stats values; "" for a buffer with no known start (pass its value to set_params).
ZEROS, ONES = "zeros", "ones"


def _is_batch_norm(call: Call) -> bool:
    return getattr(call.op, "name", None) == BATCH_NORM


def _names(func: Function, key: str) -> list[str]:
    value = func.attrs.get(key, ())
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise TrainingError(f"the backbone's attribute '{key}' must list parameter names, got {value!r}")
    return list(value)


def buffer_layout(func: Function, name: str, buffers: list[str] | None, data: list[str]) -> tuple[list[str], list[str]]:
    """(the buffers, the buffers `func`'s trailing outputs update, in output order) of the backbone `func`.

    `buffers=None` reads them off the attributes the importer sets; a list names them (`[]`: none, every
    non-data parameter trained). A buffer named as data (`inputs=`), or left out of the list, is not
    carried: the update of it that `func` returns is dropped."""
    by_name = {p.name_hint for p in func.params}
    mutated = _names(func, "mutated_buffers")
    if buffers is None:
        buffers = _names(func, "buffers")
    else:
        for b in buffers:
            if b not in by_name:
                raise TrainingError(f"buffers: '{b}' is not a parameter of '{name}' (parameters: {', '.join(sorted(by_name))})")
    missing = [m for m in mutated if m not in by_name]
    if missing:
        raise TrainingError(f"'{name}' says it updates the buffer '{missing[0]}', which is not one of its parameters")
    ret = func.ret_struct_info
    n_out = len(ret.fields) if isinstance(ret, TupleStructInfo) else 1
    if len(mutated) >= n_out:
        raise TrainingError(f"'{name}' returns {n_out} value(s) but says the last {len(mutated)} are new buffer values "
                            "(its attribute 'mutated_buffers'): nothing would be left for the prediction")
    return [b for b in dict.fromkeys(buffers) if b not in data], mutated


def last_first(func: Function, first: list, last: list) -> Function:
    """`func` with its parameters reordered: `first`, the others, then `last` (parameters of `func`)."""
    params = list(first) + [p for p in func.params if p not in first and p not in last] + list(last)
    return Function(params, func.body, func.ret_struct_info, func.is_pure, func.private, dict(func.attrs), span=func.span)


class _StatisticRoots(ExprVisitor):
    """Which buffers each bound value's statistics come from: a batch_norm's new running mean (output 1)
    from its running mean argument's, its new variance (output 2) from its variance's, any other op's
    from all of its operands'. A module called twice reads, the second time, the first call's updates
    (in PyTorch the same buffers, written in place)."""

    def __init__(self, buffers: set):
        super().__init__()
        self.buffers, self.roots, self.calls = buffers, {}, {}

    def of(self, expr) -> frozenset:
        if isinstance(expr, Var):
            return frozenset((expr,)) if expr in self.buffers else self.roots.get(expr, frozenset())
        if isinstance(expr, TupleGetItem) and isinstance(expr.tuple_value, Var) and expr.tuple_value in self.calls:
            call = self.calls[expr.tuple_value]
            return self.of(call.args[expr.index + 2]) if expr.index in (1, 2) else frozenset()
        parts = expr.args if isinstance(expr, Call) else expr.fields if isinstance(expr, Tuple) else ()
        return frozenset().union(*(self.of(p) for p in parts))

    def visit_binding(self, binding) -> None:
        super().visit_binding(binding)
        value = binding.value
        if isinstance(value, Call) and _is_batch_norm(value):
            self.calls[binding.var] = value
        roots = self.of(value)
        if roots:
            self.roots[binding.var] = roots


class _Inference(ExprMutator):
    def __init__(self, roots: _StatisticRoots):
        super().__init__()
        self.roots = roots

    def visit_call(self, call: Call):
        stats = [self.roots.of(a) for a in call.args[3:5]] if _is_batch_norm(call) else []
        call = super().visit_call(call)
        if not (call.attrs.get("training") and len(stats) == 2 and all(len(s) == 1 for s in stats)):
            return call
        # model.eval(): normalize with the buffers themselves, whatever updates of them the call read.
        args = list(call.args[:3]) + [next(iter(s)) for s in stats] + list(call.args[5:])
        return self.builder.normalize(Call(call.op, args, dict(call.attrs, training=False), span=call.span))


def _returning(func: Function, pick) -> Function:
    """`func` returning `pick(its output fields)` as a tuple."""
    seq = func.body
    if not isinstance(seq.body, Tuple):
        raise TrainingError("a backbone that updates buffers must return a tuple (its outputs, then the buffers' new values)")
    bb = BlockBuilder()
    body = bb.normalize(type(seq)(seq.blocks, bb.normalize(Tuple(pick(list(seq.body.fields)))), span=seq.span))
    return Function(func.params, body, None, func.is_pure, func.private, dict(func.attrs), span=func.span)


def inference_mode(func: Function, buffers: list[Var], n_user: int) -> Function:
    """`func` as in PyTorch's model.eval(): every batch_norm reading its running statistics from the
    `buffers` normalizes with them, and only the first `n_user` outputs are returned (the buffers'
    updates, dead now, are dropped). A batch_norm without buffers (track_running_stats=False) keeps
    using the batch's statistics, as PyTorch's does."""
    func = _returning(func, lambda fields: fields[:n_user])
    with stack_room(if_depth(func)):
        roots = _StatisticRoots(set(buffers))
        roots.visit_expr(func.body)
        func = _Inference(roots).visit_expr(func)
    return eliminate_dead_code(func)


def with_buffer_outputs(func: Function, buffers: list[Var], mutated: list[str], n_user: int) -> Function:
    """`func` returning its first `n_user` outputs, then the new value of each of `buffers` (the buffer
    itself where the function does not update it)."""
    def pick(fields):
        new = dict(zip(mutated, fields[n_user:]))
        return fields[:n_user] + [new.get(b.name_hint, b) for b in buffers]
    return _returning(func, pick)


class _Roles(ExprVisitor):
    def __init__(self, buffers: set):
        super().__init__()
        self.buffers, self.roles = buffers, {}

    def visit_call(self, call: Call) -> None:
        if _is_batch_norm(call):
            for arg, role in ((call.args[3], ZEROS), (call.args[4], ONES)):
                if arg in self.buffers:
                    self.roles[arg.name_hint] = role
        super().visit_call(call)


def reset_values(func: Function, buffers: list[Var], mutated: list[str]) -> list[str]:
    """How each buffer starts (PyTorch's reset_running_stats): a batch_norm's running mean zeros, its
    running variance ones, an updated 0-d integer buffer (num_batches_tracked, a counter) 0; "" otherwise."""
    roles = _Roles(set(buffers))
    roles.visit_expr(func.body)
    out = []
    for b in buffers:
        s = b.struct_info
        counter = (b.name_hint in mutated and isinstance(s, TensorStructInfo) and s.ndim == 0
                   and (s.dtype or "").startswith(("int", "uint")))
        out.append(roles.roles.get(b.name_hint, ZEROS if counter else ""))
    return out
