"""ONNX RNN, GRU and LSTM, unrolled over the (static) sequence into matmuls and activations, so that
their gradients are those of the ops they are made of. The input projection of every step is one
matmul; `sequence_lens` masks each batch entry past its length (its state kept, its output zero), which
in the reverse direction starts each entry at its own last step, as onnxruntime does."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.frontend.onnx_ops import converter, dtype_of, prim, reshape, scalar
from retrograd.frontend.onnx_ops_shape import static_shape
from retrograd.ir.expr import Tuple, TupleGetItem
from retrograd.ops.api import R


def _hard_sigmoid(g, x, a, b):
    y = g.emit(R.add(R.multiply(x, scalar(g, a, x)), scalar(g, b, x)))
    return R.minimum(g.emit(R.maximum(y, scalar(g, 0, x))), scalar(g, 1, x))


def _elu(g, x, a, b):
    neg = g.emit(R.multiply(scalar(g, a, x), g.emit(R.subtract(g.emit(R.exp(x)), scalar(g, 1, x)))))
    return R.where(g.emit(R.greater(x, scalar(g, 0, x))), x, neg)


# name -> (default alpha or None when it takes none, default beta or None, the function)
_ACTIVATIONS = {
    "sigmoid": (None, None, lambda g, x, a, b: R.sigmoid(x)),
    "tanh": (None, None, lambda g, x, a, b: R.tanh(x)),
    "relu": (None, None, lambda g, x, a, b: R.nn.relu(x)),
    "softsign": (None, None, lambda g, x, a, b: R.divide(x, g.emit(R.add(g.emit(R.abs(x)), scalar(g, 1, x))))),
    "softplus": (None, None, lambda g, x, a, b: R.log(g.emit(R.add(g.emit(R.exp(x)), scalar(g, 1, x))))),
    "affine": (1.0, 0.0, lambda g, x, a, b: R.add(g.emit(R.multiply(x, scalar(g, a, x))), scalar(g, b, x))),
    "leakyrelu": (0.01, None, lambda g, x, a, b: R.nn.leakyrelu(x, alpha=a)),
    "thresholdedrelu": (1.0, None, lambda g, x, a, b: R.where(g.emit(R.greater(x, scalar(g, a, x))), x, scalar(g, 0, x))),
    "scaledtanh": (1.0, 1.0, lambda g, x, a, b: R.multiply(scalar(g, a, x), g.emit(R.tanh(g.emit(R.multiply(x, scalar(g, b, x))))))),
    "hardsigmoid": (0.2, 0.5, _hard_sigmoid),
    "elu": (1.0, None, _elu),
}


def _activations(attrs, defaults: list[str], directions: int) -> list[list]:
    """Per direction, its activation functions as callables of (g, x); alpha and beta values are taken
    in order by the functions that have them."""
    names = attrs.get("activations") or defaults * directions
    if len(names) != len(defaults) * directions:
        raise UnsupportedError(f"{len(names)} activations given, {len(defaults) * directions} expected")
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    funcs = []
    for name in names:
        entry = _ACTIVATIONS.get(str(name).lower())
        if entry is None:
            raise UnsupportedError(f"activation {name!r} is not supported (supported: {', '.join(sorted(_ACTIVATIONS))})")
        da, db, fn = entry
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        funcs.append(lambda g, x, fn=fn, a=a, b=b: g.emit(fn(g, x, a, b)))
    k = len(defaults)
    return [funcs[d * k:(d + 1) * k] for d in range(directions)]


def _direction_part(g, w, d: int):
    """w[d], w of shape (directions, ...)."""
    return g.emit(R.take(w, g.const(d, "int64"), axis=0))


def _split(g, x, n: int) -> list:
    parts = g.emit(R.split(x, indices_or_sections=n, axis=-1))
    return [g.emit(TupleGetItem(parts, i)) for i in range(n)]


class _Recurrence:
    """What RNN, GRU and LSTM share: inputs, layout, directions, sequence masks and the outputs."""

    def __init__(self, g, node, inputs, attrs, gates: int, states: int):
        self.g = g
        inputs = list(inputs) + [None] * (8 - len(inputs))
        x, self.w, self.r, self.b, lens = inputs[:5]
        self.initial = inputs[5:5 + states]
        self.extra = inputs[5 + states:]
        self.layout = int(attrs.get("layout", 0))
        if self.layout:
            x = g.emit(R.permute_dims(x, axes=[1, 0, 2]))
            self.initial = [None if h is None else g.emit(R.permute_dims(h, axes=[1, 0, 2])) for h in self.initial]
        self.x = x
        self.steps, self.batch, _ = static_shape(x)
        self.hidden = int(attrs.get("hidden_size", static_shape(self.r)[-1]))
        direction = attrs.get("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise UnsupportedError(f"direction {direction!r} is not one of forward, reverse, bidirectional")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        self.gates = gates
        self.clip = attrs.get("clip")
        self.lens = None if lens is None or self._full_length(g, node) else lens
        self.lens_column = None  # lens as (batch, 1) int64, emitted once when first needed

    def _full_length(self, g, node) -> bool:
        """Whether sequence_lens is a constant of the full length everywhere (no mask needed)."""
        if not g.known(node.input[4]):
            return False
        return bool(np.all(np.asarray(g.value_of(node.input[4])) == self.steps))

    def projected(self, d: int):
        """X W^T + Wb + Rb of every step: (steps, batch, gates * hidden)."""
        g, n = self.g, self.gates * self.hidden
        wt = g.emit(R.permute_dims(_direction_part(g, self.w, d), axes=[1, 0]))
        xw = g.emit(R.matmul(self.x, wt))
        if self.b is not None:
            bias = _direction_part(g, self.b, d)
            bias = g.emit(R.add(g.emit(R.strided_slice(bias, axes=[0], begin=[0], end=[n])),
                                g.emit(R.strided_slice(bias, axes=[0], begin=[n], end=[2 * n]))))
            xw = g.emit(R.add(xw, bias))
        return xw

    def recurrent(self, d: int):
        """R^T of direction d: (hidden, gates * hidden)."""
        return self.g.emit(R.permute_dims(_direction_part(self.g, self.r, d), axes=[1, 0]))

    def start(self, d: int, k: int):
        """Initial state k (h, or c) of direction d, zeros when not given."""
        g, h0 = self.g, self.initial[k] if k < len(self.initial) else None
        if h0 is None:
            return g.const(np.zeros((self.batch, self.hidden), dtype=dtype_of(self.x)))
        return _direction_part(g, h0, d)

    def clipped(self, x):
        if self.clip is None:
            return x
        c = float(self.clip)
        return self.g.emit(R.clip(x, prim(-c, dtype_of(x)), prim(c, dtype_of(x))))

    def order(self, d: int) -> range:
        return range(self.steps) if self.directions[d] == "forward" else range(self.steps - 1, -1, -1)

    def inside(self, t: int):
        """Per batch entry (batch, 1), whether step t is within its length; None without sequence_lens."""
        if self.lens is None:
            return None
        g = self.g
        if self.lens_column is None:
            self.lens_column = g.emit(reshape(g.emit(R.astype(self.lens, dtype="int64")), (self.batch, 1)))
        return g.emit(R.less(g.const(t, "int64"), self.lens_column))

    def run(self, step, states: int) -> list:
        """Y, then each final state (Y_h, Y_c), in the node's layout; step(d, t, x_t, state) -> new state."""
        g = self.g
        ys, finals = [], [[] for _ in range(states)]
        for d in range(len(self.directions)):
            xw = self.projected(d)
            state = [self.start(d, k) for k in range(states)]
            outs = [None] * self.steps
            for t in self.order(d):
                x_t = g.emit(R.take(xw, g.const(t, "int64"), axis=0))
                new = step(d, x_t, state)
                inside = self.inside(t)
                if inside is None:
                    outs[t], state = new[0], new
                else:  # past an entry's length: its output zero, its states kept
                    outs[t] = g.emit(R.where(inside, new[0], scalar(g, 0, new[0])))
                    state = [g.emit(R.where(inside, n, o)) for n, o in zip(new, state)]
            ys.append(g.emit(R.stack(Tuple(tuple(outs)), axis=0)))
            for k in range(states):
                finals[k].append(state[k])
        y = g.emit(R.stack(Tuple(tuple(ys)), axis=1))  # (steps, directions, batch, hidden)
        finals = [g.emit(R.stack(Tuple(tuple(f)), axis=0)) for f in finals]
        if self.layout:
            y = g.emit(R.permute_dims(y, axes=[2, 0, 1, 3]))
            finals = [g.emit(R.permute_dims(f, axes=[1, 0, 2])) for f in finals]
        return [y, *finals]


@converter("RNN")
def _rnn(g, node, inputs, attrs):
    rec = _Recurrence(g, node, inputs, attrs, 1, 1)
    acts = _activations(attrs, ["Tanh"], len(rec.directions))
    rts = [rec.recurrent(d) for d in range(len(rec.directions))]

    def step(d, x_t, state):
        pre = rec.clipped(g.emit(R.add(x_t, g.emit(R.matmul(state[0], rts[d])))))
        return [acts[d][0](g, pre)]

    return rec.run(step, 1)


@converter("GRU")
def _gru(g, node, inputs, attrs):
    rec = _Recurrence(g, node, inputs, attrs, 3, 1)
    acts = _activations(attrs, ["Sigmoid", "Tanh"], len(rec.directions))
    linear_before_reset = int(attrs.get("linear_before_reset", 0))
    n = rec.hidden
    rs = [_split(g, rec.recurrent(d), 3) for d in range(len(rec.directions))]
    rbh = []
    for d in range(len(rec.directions)):  # Rb of the h gate: inside the reset product when linear before reset
        if rec.b is None:
            rbh.append(None)
        else:
            rbh.append(g.emit(R.strided_slice(_direction_part(g, rec.b, d), axes=[0], begin=[5 * n], end=[6 * n])))

    def step(d, x_t, state):
        f, act = acts[d]
        h = state[0]
        xz, xr, xh = _split(g, x_t, 3)
        rz, rr, rh = rs[d]
        z = f(g, rec.clipped(g.emit(R.add(xz, g.emit(R.matmul(h, rz))))))
        r = f(g, rec.clipped(g.emit(R.add(xr, g.emit(R.matmul(h, rr))))))
        if linear_before_reset:
            # xh holds Wbh + Rbh: Rbh belongs inside r * (h Rh^T + Rbh), the sum is the same
            hr = g.emit(R.matmul(h, rh))
            if rbh[d] is not None:
                hr = g.emit(R.add(hr, rbh[d]))
                xh = g.emit(R.subtract(xh, rbh[d]))
            pre = g.emit(R.add(xh, g.emit(R.multiply(r, hr))))
        else:
            pre = g.emit(R.add(xh, g.emit(R.matmul(g.emit(R.multiply(r, h)), rh))))
        cand = act(g, rec.clipped(pre))
        one = scalar(g, 1, h)
        return [g.emit(R.add(g.emit(R.multiply(g.emit(R.subtract(one, z)), cand)), g.emit(R.multiply(z, h))))]

    return rec.run(step, 1)


@converter("LSTM")
def _lstm(g, node, inputs, attrs):
    rec = _Recurrence(g, node, inputs, attrs, 4, 2)
    acts = _activations(attrs, ["Sigmoid", "Tanh", "Tanh"], len(rec.directions))
    coupled = int(attrs.get("input_forget", 0))
    rts = [rec.recurrent(d) for d in range(len(rec.directions))]
    peep = rec.extra[0] if rec.extra else None
    peeps = [None if peep is None else _split(g, _direction_part(g, peep, d), 3) for d in range(len(rec.directions))]

    def step(d, x_t, state):
        f, act_g, act_h = acts[d]
        h, c = state
        i, o, fg, cg = _split(g, g.emit(R.add(x_t, g.emit(R.matmul(h, rts[d])))), 4)
        if peeps[d] is not None:
            pi, po, pf = peeps[d]
            i = g.emit(R.add(i, g.emit(R.multiply(pi, c))))
            fg = g.emit(R.add(fg, g.emit(R.multiply(pf, c))))
        i = f(g, rec.clipped(i))
        fg = g.emit(R.subtract(scalar(g, 1, i), i)) if coupled else f(g, rec.clipped(fg))
        new_c = g.emit(R.add(g.emit(R.multiply(fg, c)), g.emit(R.multiply(i, act_g(g, rec.clipped(cg))))))
        if peeps[d] is not None:
            o = g.emit(R.add(o, g.emit(R.multiply(peeps[d][1], new_c))))
        o = f(g, rec.clipped(o))
        return [g.emit(R.multiply(o, act_h(g, new_c))), new_c]

    return rec.run(step, 2)
