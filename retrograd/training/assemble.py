"""`setup_trainer`: one module holding the backbone, its loss, the loss's adjoint, the optimizer and a fused train step."""

from __future__ import annotations

from retrograd.errors import TrainingError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.copy import fresh_var
from retrograd.ir.expr import Function, Tuple, TupleGetItem, Var, const
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ir.text import format_sinfo
from retrograd.ops.api import R
from retrograd.passes.gradient import Gradient
from retrograd.training.buffers import buffer_layout, inference_mode, last_first, reset_values, with_buffer_outputs
from retrograd.training.dropout_mode import count_dropouts, eval_mode
from retrograd.training.dropout_mode import train_mode as train_mode_of
from retrograd.training.inline import inline_body
from retrograd.training.losses import Loss, append_loss
from retrograd.training.optimizers import Optimizer
from retrograd.training.specialize import batch_dims, bind_dims, symbolic_dims

# Attributes of `train_step` that give its parameter layout: inputs, trained parameters, targets, state.
LAYOUT_ATTRS = ("num_input", "num_param", "num_target")


def setup_trainer(mod: IRModule, loss: Loss | None, optimizer: Optimizer, checkpoint=None,
                  func: str | None = None, num_inputs: int | None = None, inputs: list[str] | None = None,
                  sparse: list[str] | None = None, train_mode: bool = True, batch_size: int | None = None,
                  buffers: list[str] | None = None) -> IRModule:
    """A module with `backbone`, `backbone_loss`, `backbone_loss_adjoint`, `optimizer` and `train_step`.

    `func` names the backbone (default: `backbone`, else `main`, else the only function). Its first
    `num_inputs` parameters (default: its `num_input` attribute, else 1) are the data; the others are
    trained. With `loss=None` the backbone itself returns the scalar loss (its last parameters are then
    data too: pass `num_inputs` as the parameters that are not trained, targets included). `inputs`
    names the data parameters instead, wherever they are: they are moved first, in the given order.
    `sparse` names embedding tables read only by `take(table, indices, axis=0)`: their gradients are
    (indices, rows) pairs, and plain SGD updates only those rows.
    `train_step(inputs..., params..., targets..., state...) -> (loss, (new params), (new state))`
    is forward, backward and update in one function; `checkpoint` (a budget for the checkpoint pass, or
    True to let its policy choose) lets it recompute values instead of keeping them. The planner sizes
    every value, so a train step with a symbolic batch dim is first specialized to `batch_size` (its
    inputs' and targets' symbolic leading dims bound; it then takes batches of exactly that size, and
    `fit` leaves out a shorter last batch); `backbone` and `backbone_loss` stay symbolic for predict and
    evaluate. The input module is not changed.

    Dropout: `backbone` and `backbone_loss` (predict, evaluate) run every dropout call in inference
    mode. With `train_mode` and dropout calls, the differentiated function is `backbone_loss_train`
    (its adjoint `backbone_loss_train_adjoint`): the calls in training mode with a last parameter
    `dropout_key`, which `train_step` takes as its last state entry and returns plus one, so each step
    draws fresh masks (see dropout_mode.py). Without `train_mode`, training runs them in inference mode.

    Buffers (an imported model's: `buffers=None` reads the backbone's `buffers` / `mutated_buffers`
    attributes, see buffers.py; a list names them, `[]` none) are neither trained nor given to the
    optimizer: `train_step(inputs..., params..., targets..., buffers..., state...) -> (loss, (new
    params), (new state), (new buffers))` with attributes `num_buffer` and `buffer_init` (how each
    starts). With `train_mode`, the buffers' new values are the backbone's (BatchNorm's running
    statistics; `backbone_loss_train` returns `(loss, new buffers...)`); without, they pass unchanged.
    `backbone` and `backbone_loss` take the buffers after the parameters and run every batch_norm
    reading them in inference mode (model.eval()), returning the model's outputs only.
    """
    name = _backbone_name(mod, func)
    backbone = mod[name]
    if inputs is not None:
        backbone, num_inputs = _inputs_first(backbone, name, list(inputs)), len(inputs)
    n_in = _num_inputs(backbone, num_inputs)
    buf_names, mutated = buffer_layout(backbone, name, buffers, [p.name_hint for p in backbone.params[:n_in]])
    by_name = {p.name_hint: p for p in backbone.params}
    bufs = [by_name[b] for b in buf_names]
    backbone = last_first(backbone, backbone.params[:n_in], bufs)
    n_user = _num_outputs(backbone) - len(mutated)
    with_key = train_mode and count_dropouts(backbone) > 0
    keeps = train_mode and any(b in mutated for b in buf_names)  # the train step computes new values
    if keeps and loss is None:
        carried = ", ".join(b for b in buf_names if b in mutated)
        raise TrainingError(f"'{name}' updates the buffers {carried}: train it with a loss (loss=None takes "
                            "a backbone returning its scalar loss alone)")
    train_backbone = eval_mode(backbone)
    backbone = inference_mode(train_backbone, bufs, n_user) if mutated else train_backbone
    out = IRModule({"backbone": _renamed(backbone, "backbone")})
    if loss is None:
        n_targets = 0
        out = out.with_function("backbone_loss", _renamed(backbone, "backbone_loss"))
    else:
        out = append_loss(out, loss, "backbone")
        n_targets = 1
    loss_func = out["backbone_loss"]
    ret = loss_func.ret_struct_info
    if not (isinstance(ret, TensorStructInfo) and ret.ndim == 0 and is_float_dtype(ret.dtype or "")):
        hint = " (a reduction of 'none' keeps one loss per element)" if loss is not None else ""
        raise TrainingError(f"the loss must be a float scalar to be trained, got {format_sinfo(ret, brief=True)}{hint}")
    n_param = len(backbone.params) - n_in - len(bufs)
    if n_param <= 0:
        raise TrainingError(f"'{name}' has no parameter to train: its {len(backbone.params)} parameters are all "
                            f"inputs{' or buffers' if bufs else ''}")
    trained = list(range(n_in, n_in + n_param))
    params = [loss_func.params[i] for i in trained]
    _check_trainable(name, params, n_in)
    sparse_idx = _sparse_indices(params, trained, sparse or [])
    trained_loss = "backbone_loss"
    if keeps:
        trained_loss = "backbone_loss_train"
        tmp = out.with_function("backbone_train", with_buffer_outputs(train_backbone, bufs, mutated, n_user))
        tmp = append_loss(tmp, loss, "backbone_train", new_name=trained_loss,
                          also_return=list(range(n_user, n_user + len(bufs))))
        out = out.with_function(trained_loss, _renamed(train_mode_of(tmp[trained_loss]) if with_key else tmp[trained_loss],
                                                       trained_loss))
    elif with_key:
        trained_loss = "backbone_loss_train"
        out = out.with_function(trained_loss, _renamed(train_mode_of(loss_func), trained_loss))
    out = Gradient(trained_loss, require_grads=trained, sparse_grads=sparse_idx or None)(out)
    adjoint = out[trained_loss + "_adjoint"]
    grad_sinfo = [_bindable(g) for g in adjoint.ret_struct_info.fields[1].fields]
    out = out.with_function("optimizer", optimizer.function(params, grad_sinfo))
    step = _train_step(adjoint, optimizer, n_in, n_param, n_targets, with_key,
                       reset_values(train_backbone, bufs, mutated), keeps)
    out = out.with_function("train_step", step)
    if checkpoint is not None:
        out = _checkpointed(_static_step(out, n_in, n_targets, batch_size), checkpoint)
    return out


def _static_step(mod: IRModule, n_in: int, n_targets: int, batch_size: int | None) -> IRModule:
    step = mod["train_step"]
    if not symbolic_dims(step):
        return mod
    if batch_size is None:
        raise TrainingError(f"checkpointing plans static shapes: 'train_step' has the symbolic dims "
                            f"{', '.join(sorted(symbolic_dims(step)))}; pass batch_size= to bind its batch dims")
    n_param = int(step.attrs["num_param"])
    data = list(step.params[:n_in]) + list(step.params[n_in + n_param:n_in + n_param + n_targets])
    return mod.with_function("train_step", bind_dims(step, batch_dims(data, symbolic_dims(step), batch_size)))


def _bindable(sinfo):
    """A sparse gradient's (indices, rows) types with sizes like `12 * n`, which no argument can bind,
    relaxed to their rank: the standalone optimizer takes them as arguments."""
    if not isinstance(sinfo, TupleStructInfo):
        return sinfo
    return TupleStructInfo(tuple(
        s if s.shape is None or all(isinstance(d, int) for d in s.shape) else TensorStructInfo(None, s.dtype, s.ndim)
        for s in sinfo.fields))


def _sparse_indices(params: list, trained: list[int], names: list[str]) -> list[int]:
    by_name = {p.name_hint: i for p, i in zip(params, trained)}
    for n in names:
        if n not in by_name:
            raise TrainingError(f"sparse: '{n}' is not a trained parameter (parameters: {', '.join(by_name)})")
    return [by_name[n] for n in names]


def _checkpointed(mod: IRModule, budget) -> IRModule:
    try:
        from retrograd.passes import Checkpoint
    except ImportError:
        raise TrainingError("checkpoint=: the checkpoint pass is not available in this version of retrograd") from None
    return Checkpoint("train_step", budget=None if budget is True else budget)(mod)


def _backbone_name(mod: IRModule, func: str | None) -> str:
    if func is not None:
        if func not in mod:
            raise TrainingError(f"the module has no function '{func}' (functions: {', '.join(mod.keys())})")
        return func
    for candidate in ("backbone", "main"):
        if candidate in mod:
            return candidate
    names = [n for n, f in mod.items() if isinstance(f, Function)]
    if len(names) != 1:
        raise TrainingError(f"name the backbone with func= (functions: {', '.join(names) or 'none'})")
    return names[0]


def _check_trainable(name: str, params: list, n_in: int) -> None:
    """Every trained parameter is a float tensor. An imported model's integer buffers (BatchNorm's
    num_batches_tracked, BERT's position_ids) are not: they go with the data (inputs=)."""
    fixed = [p for p in params
             if not (isinstance(p.struct_info, TensorStructInfo) and is_float_dtype(p.struct_info.dtype or ""))]
    if fixed:
        kinds = ", ".join(f"'{p.name_hint}' ({format_sinfo(p.struct_info, brief=True)})"
                          for p in fixed[:4]) + (f" and {len(fixed) - 4} more" if len(fixed) > 4 else "")
        raise TrainingError(f"'{name}' has parameters that cannot be trained, not being float tensors: {kinds}; "
                            f"name them in inputs= with the {n_in} data input(s), to be passed unchanged with each batch")


def _num_outputs(func: Function) -> int:
    ret = func.ret_struct_info
    return len(ret.fields) if isinstance(ret, TupleStructInfo) else 1


def _num_inputs(backbone: Function, num_inputs: int | None) -> int:
    n = num_inputs if num_inputs is not None else backbone.attrs.get("num_input", 1)
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise TrainingError(f"num_inputs must be an integer, got {n!r}") from None
    if not 0 <= n <= len(backbone.params):
        raise TrainingError(f"num_inputs={n} but the backbone has {len(backbone.params)} parameters")
    return n


def _inputs_first(func: Function, name: str, inputs: list[str]) -> Function:
    by_name = {p.name_hint: p for p in func.params}
    for n in inputs:
        if n not in by_name or inputs.count(n) > 1:
            why = "is named twice" if n in by_name else "is not a parameter"
            raise TrainingError(f"input '{n}' {why} of '{name}' (parameters: {', '.join(by_name)})")
    first = [by_name[n] for n in inputs]
    params = first + [p for p in func.params if p not in first]
    return Function(params, func.body, func.ret_struct_info, func.is_pure, func.private, dict(func.attrs), span=func.span)


def _renamed(func: Function, name: str) -> Function:
    # The functions made here return the model's outputs alone (or the loss): no buffer values after them.
    attrs = {k: v for k, v in func.attrs.items() if k not in ("num_input", "mutated_buffers")}
    if "global_symbol" in attrs:
        attrs["global_symbol"] = name
    return Function(func.params, func.body, func.ret_struct_info, func.is_pure, func.private, attrs, span=func.span)


def _field(bb: BlockBuilder, value, index: int):
    return value.fields[index] if isinstance(value, Tuple) else bb.emit(TupleGetItem(value, index))


def _train_step(adjoint: Function, optimizer: Optimizer, n_in: int, n_param: int, n_targets: int,
                with_key: bool = False, buffer_init: list[str] = (), keeps: bool = False) -> Function:
    """The adjoint's bindings inlined, then the optimizer's update of the parameters with their gradients
    (`with_key`: the adjoint's last parameter, the dropout key, is the last state entry, returned + 1).

    Buffers (one per `buffer_init` entry, the adjoint's parameters after the trained ones) come after the
    targets and are returned last: the adjoint's new values of them (`keeps`: it returns `(loss, new
    buffers...)`), else themselves."""
    params = [fresh_var(p, promote=True) for p in adjoint.params]
    n_buf = len(buffer_init)
    trained = params[n_in:n_in + n_param]
    bufs = params[n_in + n_param:n_in + n_param + n_buf]
    names = optimizer.state_names([p.name_hint for p in trained])
    sinfos = optimizer.state_sinfo([p.struct_info for p in trained])
    state = [Var(n, s) for n, s in zip(names, sinfos)]
    bb = BlockBuilder()
    bb.begin_scope()
    result = inline_body(bb, adjoint, params)
    bb.begin_block(dataflow=True)
    forward = _field(bb, result, 0)
    loss = _field(bb, forward, 0) if keeps else forward
    new_bufs = [_field(bb, forward, 1 + i) for i in range(n_buf)] if keeps else bufs
    grads_tuple = _field(bb, result, 1)
    grads = [_field(bb, grads_tuple, i) for i in range(n_param)]
    new_params, new_state = optimizer.emit_update(bb, trained, grads, state)
    if with_key:
        key = params.pop()
        state.append(key)
        new_state = [*new_state, bb.emit(R.add(key, const(1, "int64")), "next_key")]
    outs = [loss, Tuple(new_params), Tuple(new_state)] + ([Tuple(new_bufs)] if n_buf else [])
    result = bb.emit_output(Tuple(outs), "step_out")
    bb.end_block()
    seq = bb.end_scope(result)
    attrs = {"global_symbol": "train_step", "num_input": n_in, "num_param": n_param, "num_target": n_targets}
    if n_buf:
        attrs.update(num_buffer=n_buf, buffer_init=tuple(buffer_init))
    del params[n_in + n_param:n_in + n_param + n_buf]  # the step takes them after the targets
    data = params[:n_in + n_param + n_targets]
    return Function(tuple(data) + tuple(bufs) + tuple(state), seq, seq.struct_info, True, False, attrs)
