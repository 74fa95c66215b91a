"""Optimizers as IR: `(params, grads, state) -> (new params, new state)` with explicit, printable state.

Each optimizer emits its update into a BlockBuilder (`emit_update`), which `function()` wraps as a
module function and `setup_trainer` inlines into the fused train step. Hyperparameters are
constants of the IR. The state starts with `step` (a float64 scalar counting the updates done),
followed by the per-parameter buffers. The arithmetic follows torch.optim's single-tensor path.
"""

from __future__ import annotations

import numpy as np

from retrograd.errors import TrainingError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Expr, Function, Tuple, TupleGetItem, Var, const
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops.api import R

STEP_DTYPE = "float64"


class Optimizer:
    """Base: hyperparameters, the state layout, and gradient clipping by global norm (`clip_norm`)."""

    name = "optimizer"
    buffers: tuple[str, ...] = ()  # per-parameter state, in this order, each shaped like its parameter

    def __init__(self, lr: float, weight_decay: float = 0.0, clip_norm: float | None = None):
        if not lr >= 0:
            raise TrainingError(f"{self.name}: the learning rate must be >= 0, got {lr}")
        if not weight_decay >= 0:
            raise TrainingError(f"{self.name}: weight_decay must be >= 0, got {weight_decay}")
        if clip_norm is not None and not clip_norm > 0:
            raise TrainingError(f"{self.name}: clip_norm must be positive, got {clip_norm}")
        self.lr = float(lr)
        self.weight_decay = float(weight_decay)
        self.clip_norm = None if clip_norm is None else float(clip_norm)

    # -- state ----------------------------------------------------------------
    def state_names(self, names: list[str]) -> list[str]:
        return ["step"] + [f"{p}_{b}" for b in self.buffers for p in names]

    def state_sinfo(self, params: list[TensorStructInfo]) -> list[TensorStructInfo]:
        return [TensorStructInfo((), STEP_DTYPE)] + [s for _ in self.buffers for s in params]

    def init_state(self, params: list[np.ndarray]) -> list[np.ndarray]:
        return [np.zeros((), STEP_DTYPE)] + [np.zeros_like(p) for _ in self.buffers for p in params]

    # -- IR -------------------------------------------------------------------
    def function(self, params: list[Var], grad_sinfo: list | None = None) -> Function:
        """`optimizer(params, grads, state) -> (new params, new state)`, each a tuple. `grad_sinfo` gives
        the gradients' types where some are sparse (indices, rows) pairs; by default each is its parameter's."""
        sinfos = [p.struct_info for p in params]
        _check_params(self.name, params)
        pv = Var("params", TupleStructInfo(tuple(sinfos)))
        gv = Var("grads", TupleStructInfo(tuple(grad_sinfo or sinfos)))
        sv = Var("state", TupleStructInfo(tuple(self.state_sinfo(sinfos))))
        bb = BlockBuilder()
        bb.begin_scope()
        bb.begin_block(dataflow=True)
        ps = [bb.emit(TupleGetItem(pv, i), p.name_hint) for i, p in enumerate(params)]
        gs = [bb.emit(TupleGetItem(gv, i), f"{p.name_hint}_grad") for i, p in enumerate(params)]
        names = self.state_names([p.name_hint for p in params])
        ss = [bb.emit(TupleGetItem(sv, i), n) for i, n in enumerate(names)]
        new_p, new_s = self.emit_update(bb, ps, gs, ss)
        out = bb.emit_output(Tuple([Tuple(new_p), Tuple(new_s)]), "updated")
        bb.end_block()
        body = bb.end_scope(out)
        return Function((pv, gv, sv), body, body.struct_info, True, False, {"global_symbol": "optimizer"})

    def emit_update(self, bb: BlockBuilder, params: list[Expr], grads: list[Expr], state: list[Expr]):
        """Emit the update; return (new params, new state) as lists of leaves.

        A gradient may be sparse, an (indices, rows) pair from the Gradient pass's `sparse_grads`: plain
        SGD then adds the scaled rows into the table (only those rows change); every other update (momentum,
        weight decay, Adam, clipping) first densifies it.
        """
        scal = _Scalars(bb)
        step = bb.emit(R.add(state[0], const(1.0, STEP_DTYPE)), "step")
        grads = [g if _dense(g) or self.rows_only() else _densify(bb, p, g) for p, g in zip(params, grads)]
        if self.clip_norm is not None:
            grads = self._clip(bb, scal, grads)
        n = len(params)
        buffers = [state[1 + k * n: 1 + (k + 1) * n] for k in range(len(self.buffers))]
        new_params, new_buffers = [], [[] for _ in self.buffers]
        for i, (p, g) in enumerate(zip(params, grads)):
            name = p.name_hint if isinstance(p, Var) else f"p{i}"
            newp, bufs = self.update_one(bb, scal, name, p, g, [b[i] for b in buffers], state[0], step)
            new_params.append(bb.emit(newp, f"{name}_new"))
            for k, b in enumerate(bufs):
                new_buffers[k].append(b)
        return new_params, [step] + [b for bufs in new_buffers for b in bufs]

    def update_one(self, bb, scal, name, p, g, bufs, old_step, step):  # pragma: no cover - overridden
        raise NotImplementedError

    def rows_only(self) -> bool:
        """Whether a sparse gradient can update its rows alone (no state, no decay, no clipping)."""
        return False

    def _clip(self, bb, scal, grads):
        # As torch.nn.utils.clip_grad_norm_: scale by min(1, max_norm / (total_norm + 1e-6)).
        total = None
        for g in grads:
            sq = bb.emit(R.astype(bb.emit(R.sum(bb.emit(R.multiply(g, g)))), STEP_DTYPE))
            total = sq if total is None else bb.emit(R.add(total, sq))
        norm = bb.emit(R.sqrt(total), "grad_norm")
        coef = bb.emit(R.divide(const(self.clip_norm, STEP_DTYPE), bb.emit(R.add(norm, const(1e-6, STEP_DTYPE)))))
        coef = bb.emit(R.minimum(coef, const(1.0, STEP_DTYPE)), "clip_coef")
        return [bb.emit(R.multiply(g, scal.cast(coef, g.struct_info.dtype)), "clipped") for g in grads]

    def _decayed(self, bb, p, g):
        if not self.weight_decay:
            return g
        return bb.emit(R.add(g, R.multiply(p, const(self.weight_decay, p.struct_info.dtype))), "decayed")


class SGD(Optimizer):
    """torch.optim.SGD: weight decay, momentum with dampening, Nesterov."""

    name = "sgd"

    def __init__(self, lr: float, momentum: float = 0.0, dampening: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0, clip_norm: float | None = None):
        super().__init__(lr, weight_decay, clip_norm)
        if not momentum >= 0:
            raise TrainingError(f"sgd: momentum must be >= 0, got {momentum}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise TrainingError("sgd: Nesterov momentum needs a momentum and zero dampening")
        self.momentum, self.dampening, self.nesterov = float(momentum), float(dampening), bool(nesterov)
        self.buffers = ("momentum",) if momentum else ()

    def rows_only(self) -> bool:
        return not (self.momentum or self.weight_decay or self.clip_norm)

    def update_one(self, bb, scal, name, p, g, bufs, old_step, step):
        dtype = p.struct_info.dtype
        if not _dense(g):
            idx, rows = (bb.emit(TupleGetItem(g, i)) for i in range(2))
            scaled = bb.emit(R.multiply(rows, const(-self.lr, dtype)), f"{name}_rows_step")
            return _add_rows(bb, p, idx, scaled), []
        d = self._decayed(bb, p, g)
        new_bufs = []
        if self.momentum:
            # The first step sets the buffer to d (no dampening): the buffer starts at zero, so scale d by
            # 1 - dampening * min(step_before, 1).
            first = bb.emit(R.minimum(old_step, const(1.0, STEP_DTYPE)))
            keep = scal.cast(bb.emit(R.subtract(const(1.0, STEP_DTYPE),
                                                R.multiply(first, const(self.dampening, STEP_DTYPE)))), dtype)
            buf = bb.emit(R.add(R.multiply(bufs[0], const(self.momentum, dtype)), R.multiply(d, keep)),
                          f"{name}_momentum")
            new_bufs.append(buf)
            d = bb.emit(R.add(d, R.multiply(buf, const(self.momentum, dtype)))) if self.nesterov else buf
        return R.subtract(p, R.multiply(d, const(self.lr, dtype))), new_bufs

    def __repr__(self) -> str:
        return (f"SGD(lr={self.lr}, momentum={self.momentum}, dampening={self.dampening}, nesterov={self.nesterov}, "
                f"weight_decay={self.weight_decay}, clip_norm={self.clip_norm})")


def MomentumSGD(lr: float, momentum: float = 0.9, **options) -> SGD:
    """SGD with momentum (TVM's name)."""
    return SGD(lr, momentum=momentum, **options)


class Adam(Optimizer):
    """torch.optim.Adam (L2 weight decay added to the gradient) with bias correction; eps outside the sqrt."""

    name = "adam"
    buffers = ("m", "v")
    decoupled = False

    def __init__(self, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, clip_norm: float | None = None):
        super().__init__(lr, weight_decay, clip_norm)
        b1, b2 = betas
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise TrainingError(f"{self.name}: betas must be in [0, 1), got {betas}")
        if not eps >= 0:
            raise TrainingError(f"{self.name}: eps must be >= 0, got {eps}")
        self.betas, self.eps = (float(b1), float(b2)), float(eps)

    def update_one(self, bb, scal, name, p, g, bufs, old_step, step):
        dtype = p.struct_info.dtype
        b1, b2 = self.betas
        if self.decoupled and self.weight_decay:
            p = bb.emit(R.multiply(p, const(1.0 - self.lr * self.weight_decay, dtype)), f"{name}_decayed")
        elif not self.decoupled:
            g = self._decayed(bb, p, g)
        m = bb.emit(R.add(bufs[0], R.multiply(R.subtract(g, bufs[0]), const(1.0 - b1, dtype))), f"{name}_m")
        v = bb.emit(R.add(R.multiply(bufs[1], const(b2, dtype)), R.multiply(R.multiply(g, g), const(1.0 - b2, dtype))),
                    f"{name}_v")
        step_size, bc2_sqrt = scal.adam(self.lr, b1, b2, step, dtype)
        denom = bb.emit(R.add(R.divide(R.sqrt(v), bc2_sqrt), const(self.eps, dtype)), f"{name}_denom")
        return R.subtract(p, R.multiply(R.divide(m, denom), step_size)), [m, v]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(lr={self.lr}, betas={self.betas}, eps={self.eps}, "
                f"weight_decay={self.weight_decay}, clip_norm={self.clip_norm})")


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay (parameters scaled by 1 - lr * wd before the Adam step)."""

    name = "adamw"
    decoupled = True

    def __init__(self, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 clip_norm: float | None = None):
        super().__init__(lr, betas, eps, weight_decay, clip_norm)


class _Scalars:
    """Scalar terms of one update, computed once in float64 and cast once per parameter dtype."""

    def __init__(self, bb: BlockBuilder):
        self.bb = bb
        self.casts: dict = {}
        self.adam_terms = None

    def cast(self, value: Expr, dtype: str) -> Expr:
        if dtype == STEP_DTYPE:
            return value
        key = (value, dtype)
        if key not in self.casts:
            self.casts[key] = self.bb.emit(R.astype(value, dtype))
        return self.casts[key]

    def adam(self, lr, b1, b2, step, dtype):
        bb = self.bb
        if self.adam_terms is None:
            one = const(1.0, STEP_DTYPE)
            bc1 = bb.emit(R.subtract(one, R.power(const(b1, STEP_DTYPE), step)), "bias_correction1")
            bc2 = bb.emit(R.subtract(one, R.power(const(b2, STEP_DTYPE), step)), "bias_correction2")
            step_size = bb.emit(R.divide(const(lr, STEP_DTYPE), bc1), "step_size")
            self.adam_terms = (step_size, bb.emit(R.sqrt(bc2), "bias_correction2_sqrt"))
        return tuple(self.cast(t, dtype) for t in self.adam_terms)


def _dense(g: Expr) -> bool:
    return not isinstance(g.struct_info, TupleStructInfo)


def _densify(bb: BlockBuilder, p: Expr, g: Expr) -> Expr:
    """The dense gradient of table `p` from its sparse (indices, rows) form (repeated rows add up)."""
    idx, rows = (bb.emit(TupleGetItem(g, i)) for i in range(2))
    return bb.emit(_add_rows(bb, bb.emit(R.zeros_like(p)), idx, rows), "dense_grad")


def _add_rows(bb: BlockBuilder, table: Expr, idx: Expr, rows: Expr) -> Expr:
    """`table` with `rows[k]` added to row `idx[k]` (repeated indices add up): ONNX-style scatter_nd."""
    return R.scatter_nd(table, bb.emit(R.expand_dims(idx, axis=[1])), rows, reduction="add")


def _check_params(who: str, params) -> None:
    for p in params:
        s = p.struct_info
        if not isinstance(s, TensorStructInfo) or not is_float_dtype(s.dtype or ""):
            raise TrainingError(f"{who}: parameter '{p.name_hint}' must be a float tensor to be trained")
