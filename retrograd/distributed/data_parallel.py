"""`data_parallel`: a training step whose parameter gradients are averaged over the workers, in buckets.

The step made by `setup_trainer` is rebuilt from the module's adjoint and `optimizer` functions (as
`setup_trainer` builds it) with, between them, `R.ccl.allreduce(bucket, op_type="avg")` calls: the
gradients, in the order the backward computes them, are flattened and concatenated into buckets of at
most `bucket` bytes (one dtype each; a larger gradient is a bucket alone), and each bucket's allreduce
stands right after the binding that computes its last gradient, so the rest of the backward can run
while it travels (PyTorch DDP's buckets). The module also gets `sync_params`, which broadcasts the
parameters (and buffers) from worker 0 (run once at the start, so every worker starts from worker 0's values).

An imported model's buffers (BatchNorm's running statistics, `num_buffer` of the step) follow DDP's
default `broadcast_buffers=True`: the step starts by broadcasting worker 0's buffers
(`R.ccl.broadcast_from_worker0`), and each worker's forward updates them from its own shard, so worker
0's statistics are those of its shards alone, and each worker returns worker 0's updated by its own.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import TrainingError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.copy import copy_seq, fresh_var
from retrograd.ir.expr import Function, Tuple, TupleGetItem, Var, const, shape_expr
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ir.well_formed import well_formed
from retrograd.ops.api import R
from retrograd.analysis.budget import parse_budget
from retrograd.passes.infra import OptionError, module_pass
from retrograd.training.assemble import LAYOUT_ATTRS
from retrograd.training.dropout_mode import DROPOUT_KEY
from retrograd.training.inline import inline_body

DEFAULT_BUCKET = 25 * 2**20  # PyTorch DDP's bucket_cap_mb


def data_parallel(mod: IRModule, func: str = "train_step", bucket=DEFAULT_BUCKET) -> IRModule:
    """`mod` (made by `setup_trainer`, not checkpointed) with `func` averaging its gradients over the
    workers before the update, and `sync_params(params..., buffers...) -> (params..., buffers...)`
    broadcasting from worker 0.

    `bucket`: bytes per bucket (an int or text such as "25MiB", "1MB"); 0 gives one allreduce per gradient.
    The input module is not changed.
    """
    cap = _bucket_bytes(bucket)
    if func not in mod:
        raise TrainingError(f"data_parallel: the module has no function '{func}' (make it with setup_trainer)")
    step = mod[func]
    try:
        n_in, n_param, n_target = (int(step.attrs[k]) for k in LAYOUT_ATTRS)
    except (KeyError, TypeError, ValueError):
        raise TrainingError(f"data_parallel: '{func}' lacks the layout attributes {', '.join(LAYOUT_ATTRS)} "
                            "(make it with setup_trainer)") from None
    n_buf = int(step.attrs.get("num_buffer", 0))
    n_data = n_in + n_param + n_target
    params = [fresh_var(p, promote=True) for p in step.params]
    bufs, state = params[n_data:n_data + n_buf], params[n_data + n_buf:]
    with_key = bool(state) and state[-1].name_hint == DROPOUT_KEY
    adjoint = _adjoint(mod, n_data + n_buf + with_key)
    if "optimizer" not in mod:
        raise TrainingError("data_parallel: the module has no 'optimizer' function (make it with setup_trainer)")
    trained = params[n_in:n_in + n_param]
    # The adjoint's forward is (loss, new buffers...) when the step updates its buffers (see assemble.py).
    updates = n_buf and isinstance(adjoint.ret_struct_info.fields[0], TupleStructInfo)

    bb = BlockBuilder(mod)
    bb.begin_scope()
    bb.begin_block(dataflow=False)
    # PyTorch DDP's broadcast_buffers: each step starts from worker 0's buffers (its running statistics),
    # which every worker then updates from its own shard, as DDP's modules do in their forward.
    synced = [bb.emit(R.ccl.broadcast_from_worker0(b), f"{b.name_hint}_0") for b in bufs]
    args = params[:n_in + n_param] + synced + params[n_in + n_param:n_data] + ([state[-1]] if with_key else [])
    body = copy_seq(adjoint.body, dict(zip(adjoint.params, args)), promote=True)
    bindings = [b for block in body.blocks for b in block.bindings]
    forward, grads = _outputs(body.body, bindings, n_param)
    for p, g in zip(trained, grads):
        if not isinstance(g.struct_info, TensorStructInfo):
            raise TrainingError(f"data_parallel: the gradient of '{p.name_hint}' is sparse (indices, rows); "
                                "average dense gradients only")
    buckets = plan_buckets(grads, bindings, cap)
    due: dict[int, list[list[int]]] = {}
    for members, pos in buckets:
        due.setdefault(pos, []).append(members)
    reduced: list = [None] * n_param
    for members in due.get(-1, []):
        _emit_bucket(bb, grads, members, reduced, trained)
    for pos, b in enumerate(bindings):
        bb.emit_binding(b)
        for members in due.get(pos, []):
            _emit_bucket(bb, grads, members, reduced, trained)
    bb.end_block()

    loss, new_bufs = forward, synced
    if updates:
        bb.begin_block(dataflow=False)
        loss = _field(bb, forward, 0)
        new_bufs = [_field(bb, forward, 1 + i) for i in range(n_buf)]
        bb.end_block()
    opt_state = state[:-1] if with_key else state
    packed = [_bound_alone(bb, Tuple(vals), name) for vals, name in
              ((trained, "params"), (reduced, "grads"), (opt_state, "state"))]
    result = inline_body(bb, mod["optimizer"], packed)
    bb.begin_block(dataflow=False)
    new_params, new_state = (_field(bb, result, i) for i in (0, 1))
    if with_key:
        next_key = bb.emit(R.add(state[-1], const(1, "int64")), "next_key")
        new_state = Tuple([_field(bb, new_state, i) for i in range(len(opt_state))] + [next_key])
    out = bb.emit(Tuple([loss, new_params, new_state] + ([Tuple(new_bufs)] if n_buf else [])), "step_out")
    bb.end_block()
    seq = bb.end_scope(out)
    attrs = {**dict(step.attrs), "data_parallel_bucket": cap}
    new_step = Function(tuple(params), seq, seq.struct_info, False, step.private, attrs, span=step.span)
    result_mod = mod.with_function(func, new_step).with_function("sync_params", _sync_params(trained + bufs))
    # Only what this pass made is checked: setup_trainer's loss-less module shares parameter vars
    # between backbone and backbone_loss, which well_formed reports of the whole module.
    problems = well_formed(IRModule({func: new_step, "sync_params": result_mod["sync_params"]}))
    if problems:
        raise TrainingError(f"data_parallel produced an ill-formed module (a bug): {problems[0]}")
    return result_mod


@module_pass(name="data-parallel")
class DataParallel:
    """The pass form of `data_parallel` (pipelines: `data-parallel(func=train_step, bucket=25MiB)`)."""

    def __init__(self, func: str = "train_step", bucket: int | str = "25MiB"):
        try:
            self.bucket = _bucket_bytes(bucket)
        except TrainingError as err:
            raise OptionError("bucket", str(err)) from None
        self.func = func

    def transform_module(self, mod: IRModule, ctx=None) -> IRModule:
        return data_parallel(mod, self.func, self.bucket)


def plan_buckets(grads: list, bindings: list, cap: int) -> list[tuple[list[int], int]]:
    """Buckets as (gradient indices, position of the binding after which all are computed; -1: from the
    start), in the order the backward completes them. A bucket holds one dtype and at most `cap` bytes
    unless one gradient alone is larger."""
    where = {b.var: i for i, b in enumerate(bindings)}
    ready = sorted(range(len(grads)), key=lambda i: (where.get(grads[i], -1), -i))
    out: list[list[int]] = []
    open_: dict[str, tuple[list[int], int]] = {}
    for i in ready:
        s = grads[i].struct_info
        size = _nbytes(s)
        members, used = open_.get(s.dtype, ([], 0))
        if members and used + size > cap:
            out.append(members)
            members, used = [], 0
        open_[s.dtype] = (members + [i], used + size)
        if used + size >= cap:
            out.append(open_.pop(s.dtype)[0])
    out.extend(m for m, _ in open_.values())
    planned = [(m, max(where.get(grads[i], -1) for i in m)) for m in out]
    return sorted(planned, key=lambda mp: mp[1])


def _nbytes(s: TensorStructInfo) -> int:
    if s.shape is None or not all(isinstance(d, int) for d in s.shape) or not s.dtype:
        raise TrainingError(f"data_parallel: gradients need static shapes and dtypes, got {s}")
    return int(np.prod(s.shape, dtype=np.int64)) * np.dtype(s.dtype).itemsize


def _bucket_bytes(bucket) -> int:
    if isinstance(bucket, int) and not isinstance(bucket, bool):
        if bucket < 0:
            raise TrainingError(f"data_parallel: bucket must be a number of bytes >= 0, got {bucket}")
        return bucket
    try:
        budget = parse_budget(bucket)
    except Exception as err:  # parse_budget's own error names the accepted forms
        raise TrainingError(f"data_parallel: bucket {bucket!r}: {err}") from None
    if budget is None or budget.nbytes is None:
        raise TrainingError(f"data_parallel: bucket must be bytes (an int, '25MiB', '1MB'), got {bucket!r}")
    return budget.nbytes


def _adjoint(mod: IRModule, n_args: int) -> Function:
    names = [n for n in ("backbone_loss_train_adjoint", "backbone_loss_adjoint") if n in mod]
    for name in names:
        if len(mod[name].params) == n_args:
            return mod[name]
    raise TrainingError("data_parallel: the module has no adjoint of its loss taking the step's "
                        f"{n_args} data and parameters (make it with setup_trainer)")


def _outputs(result, bindings, n_param: int):
    """The adjoint's loss and gradients (vars or other leaves), looking through tuples bound to vars."""
    value_of = {b.var: b.value for b in bindings}

    def tuple_of(e):
        while isinstance(e, Var) and isinstance(value_of.get(e), Tuple | Var):
            e = value_of[e]
        return e if isinstance(e, Tuple) else None

    top = tuple_of(result)
    grads = tuple_of(top.fields[1]) if top is not None and len(top.fields) == 2 else None
    if grads is None or len(grads.fields) != n_param:
        raise TrainingError("data_parallel: the adjoint does not return (loss, (one gradient per parameter))")
    return top.fields[0], list(grads.fields)


def _emit_bucket(bb: BlockBuilder, grads: list, members: list[int], reduced: list, trained: list) -> None:
    if len(members) == 1:
        i = members[0]
        reduced[i] = bb.emit(R.ccl.allreduce(grads[i], op_type="avg"), f"{trained[i].name_hint}_grad_avg")
        return
    shapes = [tuple(grads[i].struct_info.shape) for i in members]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    flat = [bb.emit(R.reshape(grads[i], shape_expr([n])), "flat") for i, n in zip(members, sizes)]
    joined = bb.emit(R.concat(Tuple(flat), axis=0), "bucket")
    avg = bb.emit(R.ccl.allreduce(joined, op_type="avg"), "bucket_avg")
    parts = bb.emit(R.split(avg, [int(c) for c in np.cumsum(sizes)[:-1]], axis=0), "parts")
    for k, (i, shape) in enumerate(zip(members, shapes)):
        part = bb.emit(TupleGetItem(parts, k), "part")
        reduced[i] = bb.emit(R.reshape(part, shape_expr(list(shape))), f"{trained[i].name_hint}_grad_avg")


def _bound_alone(bb: BlockBuilder, value, name: str) -> Var:
    """`value` bound to a var in a block of its own (the optimizer's inlined blocks follow)."""
    bb.begin_block(dataflow=False)
    var = bb.emit(value, name)
    bb.end_block()
    return var


def _field(bb: BlockBuilder, value, index: int):
    return value.fields[index] if isinstance(value, Tuple) else bb.emit(TupleGetItem(value, index))


def _sync_params(trained: list) -> Function:
    params = [fresh_var(p) for p in trained]
    bb = BlockBuilder()
    bb.begin_scope()
    bb.begin_block(dataflow=False)
    outs = [bb.emit(R.ccl.broadcast_from_worker0(p), f"{p.name_hint}_0") for p in params]
    bb.end_block()
    seq = bb.end_scope(Tuple(outs))
    return Function(tuple(params), seq, seq.struct_info, False, False, {"global_symbol": "sync_params"})
