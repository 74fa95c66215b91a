"""ATen's tensor ops (elementwise, reductions, shapes) as retrograd ops (creation, indexing and linear
algebra: aten_index.py).

TABLE maps an op name (`add` for every overload, or `max.dim` for one) to a converter
`(cx, a) -> value`, `a` being the node's arguments by schema name. Output shapes come from the
shapes torch.export recorded (symbolic dims included), so view-like ops never recompute them.
"""

from __future__ import annotations

import math

from retrograd.errors import UnsupportedError
from retrograd.frontend.aten_common import axes, is_float, ndim, registrar
from retrograd.frontend.aten_select import torch_abs
from retrograd.ir.expr import Expr, PrimValue, ShapeExpr, Tuple
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R

TABLE: dict = {}
op = registrar(TABLE)


# -- elementwise ------------------------------------------------------------------------------
def scaled(cx, x, alpha, dtype):
    return x if alpha in (None, 1) else R.multiply(x, cx.tensor(alpha, dtype))


@op("add")
def _add(cx, a):
    dt = cx.out_dtype()
    x, y = cx.operands(a["self"], a["other"], dtype=dt)
    return R.add(x, scaled(cx, y, a.get("alpha"), dt))


@op("sub")
def _sub(cx, a):
    dt = cx.out_dtype()
    x, y = cx.operands(a["self"], a["other"], dtype=dt)
    return R.subtract(x, scaled(cx, y, a.get("alpha"), dt))


@op("rsub")
def _rsub(cx, a):
    dt = cx.out_dtype()
    x, y = cx.operands(a["self"], a["other"], dtype=dt)
    return R.subtract(y, scaled(cx, x, a.get("alpha"), dt))


@op("mul")
def _mul(cx, a):
    x, y = cx.operands(a["self"], a["other"], dtype=cx.out_dtype())
    return R.multiply(x, y)


@op("div")
def _div(cx, a):
    mode = a.get("rounding_mode")
    if mode is None:
        x, y = cx.operands(a["self"], a["other"], dtype=cx.out_dtype())
        return R.divide(x, y)
    dt = cx.common(a["self"], a["other"])
    x, y = cx.operands(a["self"], a["other"], dtype=dt)
    if mode == "floor":
        return R.floor_divide(x, y)
    if is_float(dt):
        return R.trunc(R.divide(x, y))
    q = R.floor_divide(x, y)  # integers truncate toward zero: one up where the signs differ and it is inexact
    fix = R.logical_and(R.not_equal(R.multiply(q, y), x), R.less(R.multiply(x, y), cx.tensor(0, dt)))
    return R.add(q, R.astype(fix, dtype=dt))


@op("true_divide")
def _true_div(cx, a):
    return _div(cx, {**a, "rounding_mode": None})


@op("floor_divide")
def _floor_div(cx, a):
    return _div(cx, {**a, "rounding_mode": "floor"})


@op("pow")
def _pow(cx, a):
    dt = cx.out_dtype()
    base, exp = a.get("self"), a.get("exponent")
    if isinstance(exp, int | float) and not isinstance(exp, bool):
        if exp == 2:
            return R.square(cx.tensor(base, dt))
        if exp == 0.5:
            return R.sqrt(cx.tensor(base, dt))
        if exp == 1:
            return cx.tensor(base, dt)
    x, y = cx.operands(base, exp, dtype=dt)
    return R.power(x, y)


def _binary(fn, promote=True):
    def conv(cx, a):
        other = a.get("other", a.get("exponent"))
        dt = cx.out_dtype() if promote else cx.common(a["self"], other)
        x, y = cx.operands(a["self"], other, dtype=dt)
        return fn(x, y)

    return conv


for _n, _f in (("atan2", R.atan2), ("remainder", R.floor_mod),
               ("fmod", R.mod), ("bitwise_left_shift", R.left_shift), ("bitwise_right_shift", R.right_shift),
               ("logaddexp", R.log_add_exp)):
    TABLE[_n] = _binary(_f)
for _n, _f in (("eq", R.equal), ("ne", R.not_equal), ("lt", R.less), ("le", R.less_equal), ("gt", R.greater),
               ("ge", R.greater_equal)):
    TABLE[_n] = _binary(_f, promote=False)


def _logical(fn, bitwise):
    def conv(cx, a):
        dt = cx.common(a["self"], a["other"])
        if dt != "bool" and bitwise:
            x, y = cx.operands(a["self"], a["other"], dtype=dt)
            return bitwise(x, y)
        x, y = cx.operands(a["self"], a["other"], dtype="bool")
        return fn(x, y)

    return conv


TABLE["logical_and"] = _logical(R.logical_and, None)
TABLE["logical_or"] = _logical(R.logical_or, None)
TABLE["logical_xor"] = _logical(R.logical_xor, None)
TABLE["bitwise_and"] = _logical(R.logical_and, R.bitwise_and)
TABLE["bitwise_or"] = _logical(R.logical_or, R.bitwise_or)
TABLE["bitwise_xor"] = _logical(R.logical_xor, R.bitwise_xor)


def _unary(fn, float_only=True):
    def conv(cx, a):
        x = a["self"]
        dt = cx.out_dtype()
        return fn(cx.tensor(x, dt) if float_only else x)

    return conv


for _n, _f in (("neg", R.negative), ("exp", R.exp), ("log", R.log), ("sqrt", R.sqrt),
               ("rsqrt", R.rsqrt), ("sin", R.sin), ("cos", R.cos), ("tan", R.tan), ("tanh", R.tanh),
               ("sinh", R.sinh), ("cosh", R.cosh), ("asin", R.asin), ("acos", R.acos), ("atan", R.atan),
               ("asinh", R.asinh), ("acosh", R.acosh), ("atanh", R.atanh), ("sigmoid", R.sigmoid),
               ("erf", R.erf), ("floor", R.floor), ("ceil", R.ceil), ("round", R.round), ("trunc", R.trunc),
               ("sign", R.sign), ("sgn", R.sign), ("square", R.square), ("relu", R.nn.relu), ("silu", R.nn.silu),
               ("selu", R.nn.selu)):
    TABLE[_n] = _unary(_f)
TABLE["logical_not"] = lambda cx, a: R.logical_not(cx.tensor(a["self"], "bool"))
TABLE["bitwise_not"] = lambda cx, a: (R.logical_not(a["self"]) if cx.out_dtype() == "bool" else R.bitwise_not(a["self"]))
TABLE["isnan"] = lambda cx, a: R.isnan(a["self"])
TABLE["isinf"] = lambda cx, a: R.isinf(a["self"])
TABLE["isfinite"] = lambda cx, a: R.isfinite(a["self"])


def _c(cx, v):
    return cx.tensor(v, cx.out_dtype())


TABLE["reciprocal"] = lambda cx, a: R.divide(_c(cx, 1.0), _c(cx, a["self"]))
TABLE["log2"] = lambda cx, a: R.divide(R.log(_c(cx, a["self"])), _c(cx, math.log(2.0)))
TABLE["log10"] = lambda cx, a: R.divide(R.log(_c(cx, a["self"])), _c(cx, math.log(10.0)))
TABLE["log1p"] = lambda cx, a: R.log(R.add(_c(cx, a["self"]), _c(cx, 1.0)))
TABLE["expm1"] = lambda cx, a: R.subtract(R.exp(_c(cx, a["self"])), _c(cx, 1.0))
TABLE["exp2"] = lambda cx, a: R.power(_c(cx, 2.0), _c(cx, a["self"]))


def _clip(cx, x, lo, hi):
    dt = cx.out_dtype()
    x = cx.tensor(x, dt)
    if isinstance(lo, Expr) or isinstance(hi, Expr):  # clamp.Tensor
        # min(max(x, lo), hi) as PyTorch's: x kept at a tie (the gradient is x's there), a NaN on either
        # side propagated.
        for bound, past in ((lo, R.less), (hi, R.greater)):
            if bound is not None:
                bound = cx.tensor(bound, dt)
                take = cx.emit(past(x, bound))
                if is_float(dt):
                    take = cx.emit(R.logical_or(take, cx.emit(R.isnan(bound))))
                x = cx.emit(R.where(take, bound, x))
        return x
    if lo is not None and hi is not None:
        return R.clip(x, PrimValue(float(lo) if is_float(dt) else int(lo), dt), PrimValue(float(hi) if is_float(dt) else int(hi), dt))
    if lo is not None:
        return R.maximum(x, cx.tensor(lo, dt))
    return x if hi is None else R.minimum(x, cx.tensor(hi, dt))


TABLE["clamp"] = TABLE["clip"] = lambda cx, a: _clip(cx, a["self"], a.get("min"), a.get("max"))
TABLE["clamp_min"] = lambda cx, a: _clip(cx, a["self"], a["min"], None)
TABLE["clamp_max"] = lambda cx, a: _clip(cx, a["self"], None, a["max"])
TABLE["hardtanh"] = lambda cx, a: _clip(cx, a["self"], a["min_val"], a["max_val"])
TABLE["relu6"] = lambda cx, a: _clip(cx, a["self"], 0.0, 6.0)


@op("where")
def _where(cx, a):
    dt = cx.out_dtype()
    x, y = cx.operands(a["self"], a["other"], dtype=dt)
    return R.where(cx.tensor(a["condition"], "bool"), x, y)


@op("masked_fill")
def _masked_fill(cx, a):
    dt = cx.out_dtype()
    return R.where(cx.tensor(a["mask"], "bool"), cx.tensor(a["value"], dt), cx.tensor(a["self"], dt))


@op("lerp")
def _lerp(cx, a):
    dt = cx.out_dtype()
    x, y, w = cx.operands(a["self"], a["end"], a["weight"], dtype=dt)
    return R.add(x, R.multiply(w, R.subtract(y, x)))


# -- reductions ---------------------------------------------------------------------------------
def _reduce(fn):
    def conv(cx, a):
        x = a["self"]
        dt = cx.out_dtype()
        if fn is not R.max and fn is not R.min:
            x = cx.tensor(x, dt) if is_float(dt) or dt == "int64" else x
        return fn(x, axis=axes(a.get("dim"), ndim(x)), keepdims=bool(a.get("keepdim", False)))

    return conv


TABLE["sum"] = _reduce(R.sum)
TABLE["mean"] = _reduce(R.mean)
TABLE["prod"] = _reduce(R.prod)
TABLE["amax"] = _reduce(R.max)
TABLE["amin"] = _reduce(R.min)


@op("argmax", "argmin")
def _argmax(cx, a):
    fn = R.argmax if cx.node.target._schema.name.endswith("argmax") else R.argmin
    return fn(a["self"], axis=a.get("dim"), keepdims=bool(a.get("keepdim", False)))


def _var(cx, a, std, out: int | None = None):
    dt = cx.out_dtype(out)
    x = cx.tensor(a["self"], dt)
    ax = axes(a.get("dim"), ndim(x))
    corr = a.get("correction")
    corr = (1 if a.get("unbiased", True) else 0) if corr is None else corr
    keep = bool(a.get("keepdim", False))
    v = R.variance(x, axis=ax, keepdims=keep)
    if corr:
        n = math.prod(x.struct_info.shape[i] for i in ax)
        if not isinstance(n, int):
            raise UnsupportedError("var / std with a correction over a symbolic dim")
        v = R.multiply(cx.emit(v), cx.tensor(n / (n - corr) if n > corr else math.inf, dt))
    return R.sqrt(cx.emit(v)) if std else v


def _var_mean(cx, a, std):
    x = cx.tensor(a["self"], cx.out_dtype(1))
    mean = R.mean(x, axis=axes(a.get("dim"), ndim(x)), keepdims=bool(a.get("keepdim", False)))
    return _var(cx, a, std, 0), mean


TABLE["var"] = lambda cx, a: _var(cx, a, False)
TABLE["std"] = lambda cx, a: _var(cx, a, True)
TABLE["var_mean"] = lambda cx, a: _var_mean(cx, a, False)
TABLE["std_mean"] = lambda cx, a: _var_mean(cx, a, True)


@op("all", "any")
def _all_any(cx, a):
    fn = R.min if cx.node.target._schema.name.endswith("all") else R.max
    x = cx.tensor(a["self"], "bool")
    return fn(x, axis=axes(a.get("dim"), ndim(x)), keepdims=bool(a.get("keepdim", False)))


@op("logsumexp")
def _logsumexp(cx, a):
    x = a["self"]
    ax = axes(a["dim"], ndim(x))
    m = cx.emit(R.grad.no_grad(cx.emit(R.max(x, axis=ax, keepdims=True))))
    s = cx.emit(R.sum(R.exp(cx.emit(R.subtract(x, m))), axis=ax, keepdims=bool(a["keepdim"])))
    m2 = m if a["keepdim"] else cx.emit(R.squeeze(m, axis=ax))
    return R.add(R.log(s), m2)


@op("linalg_vector_norm", "norm")
def vector_norm(cx, a):
    x = a["self"]
    p = a.get("ord", a.get("p", 2))
    p = 2 if p is None else p
    ax = axes(a.get("dim"), ndim(x))
    keep = bool(a.get("keepdim", False))
    if p == 1:
        return R.sum(cx.emit(torch_abs(x)), axis=ax, keepdims=keep)
    if p in (math.inf, -math.inf):
        return (R.max if p > 0 else R.min)(cx.emit(torch_abs(x)), axis=ax, keepdims=keep)
    dt = x.struct_info.dtype
    if p == 0:
        return R.sum(cx.emit(R.astype(R.not_equal(x, cx.tensor(0, dt)), dtype=dt)), axis=ax, keepdims=keep)
    # PyTorch's gradients are zero where a power's derivative is infinite (a zero norm; |x|^p at x = 0 for
    # p < 1): the power is taken of 1 there and the zero selected, so no infinity meets a zero cotangent.
    def power_at_nonzero(v, exponent):
        zero = cx.emit(R.equal(v, cx.tensor(0, dt)))
        safe = cx.emit(R.where(zero, cx.tensor(1, dt), v))
        raised = R.sqrt(safe) if exponent == 0.5 else R.power(safe, cx.tensor(exponent, dt))
        return R.where(zero, cx.tensor(0, dt), cx.emit(raised))

    powered = R.multiply(x, x) if p == 2 else power_at_nonzero(cx.emit(R.abs(x)), p)
    total = cx.emit(R.sum(cx.emit(powered), axis=ax, keepdims=keep))
    return power_at_nonzero(total, 1 / p)


@op("cumsum", "cumprod")
def _cumsum(cx, a):
    fn = R.cumsum if cx.node.target._schema.name.endswith("cumsum") else R.cumprod
    return fn(cx.tensor(a["self"], cx.out_dtype()), axis=a["dim"])


# -- shapes -------------------------------------------------------------------------------------
def _reshape(cx, a):
    return R.reshape(a["self"], cx.out_shape())


for _n in ("view", "reshape", "_unsafe_view", "flatten", "unflatten", "view_as", "reshape_as", "_reshape_alias",
           "squeeze", "unsqueeze"):
    TABLE[_n] = _reshape
for _n in ("contiguous", "clone", "alias", "detach", "lift_fresh_copy", "lift_fresh", "_assert_tensor_metadata",
           "dropout_identity"):
    TABLE[_n] = lambda cx, a: a["self"]


@op("copy")
def _copy(cx, a):
    src = a["src"]
    if isinstance(src, Expr) and src.struct_info.shape != a["self"].struct_info.shape:
        return R.broadcast_to(cx.tensor(src, cx.out_dtype()), cx.out_shape())
    return cx.tensor(src, cx.out_dtype())


@op("_to_copy", "to", "type_as")
def _to(cx, a):
    return cx.tensor(a["self"], cx.out_dtype())


@op("permute")
def _permute(cx, a):
    return R.permute_dims(a["self"], axes=[d % ndim(a["self"]) for d in a["dims"]])


@op("transpose")
def _transpose(cx, a):
    n = ndim(a["self"])
    order = list(range(n))
    i, j = a["dim0"] % n, a["dim1"] % n
    order[i], order[j] = order[j], order[i]
    return R.permute_dims(a["self"], axes=order)


TABLE["t"] = lambda cx, a: a["self"] if ndim(a["self"]) < 2 else R.permute_dims(a["self"], axes=[1, 0])
TABLE["numpy_T"] = lambda cx, a: R.permute_dims(a["self"])


@op("expand", "expand_as", "broadcast_to")
def _expand(cx, a):
    return R.broadcast_to(a["self"], cx.out_shape())


@op("repeat")
def _repeat(cx, a):
    x, reps = a["self"], list(a["repeats"])
    if all(isinstance(r, int) for r in reps):
        return R.tile(x, repeats=reps)
    # A symbolic count (`batch`): tile as a broadcast of x's dims interleaved with ones, (1, s0, 1, s1, ...)
    # to (r0, s0, r1, s1, ...), merged pairwise into the result's (r0 * s0, r1 * s1, ...).
    shape = x.struct_info.shape
    if shape is None:
        raise UnsupportedError("repeat by a symbolic count of a value of unknown shape")
    shape = (1,) * (len(reps) - len(shape)) + tuple(shape)
    ones = cx.emit(R.reshape(x, ShapeExpr(tuple(v for d in shape for v in (1, d)))))
    wide = cx.emit(R.broadcast_to(ones, ShapeExpr(tuple(v for r, d in zip(reps, shape) for v in (r, d)))))
    return R.reshape(wide, cx.out_shape())


@op("repeat_interleave")
def _repeat_interleave(cx, a):
    if not isinstance(a.get("repeats"), int):
        raise UnsupportedError("repeat_interleave with tensor repeats (a data-dependent size)")
    return R.repeat(a["self"], repeats=a["repeats"], axis=a.get("dim"))


@op("cat", "concat", "concatenate")
def _cat(cx, a):
    dt = cx.out_dtype()
    ts = [cx.tensor(t, dt) for t in a["tensors"] if not (t.struct_info.ndim == 1 and t.struct_info.shape == (0,))]
    n = cx.meta().dim()
    return R.concat(Tuple(tuple(ts)), axis=a["dim"] % n)


@op("stack")
def _stack(cx, a):
    dt = cx.out_dtype()
    n = cx.meta().dim()
    return R.stack(Tuple(tuple(cx.tensor(t, dt) for t in a["tensors"])), axis=a["dim"] % n)


def _split_at(cx, x, sizes, dim):
    bounds, acc = [], 0
    for s in sizes[:-1]:
        acc += s
        bounds.append(acc)
    parts = cx.emit(R.split(x, indices_or_sections=bounds, axis=dim % ndim(x)))
    from retrograd.ir.expr import TupleGetItem

    return tuple(cx.emit(TupleGetItem(parts, i)) for i in range(len(sizes)))


@op("split", "split_with_sizes", "unsafe_split", "chunk", "tensor_split", "unbind")
def _split(cx, a):
    x = a["self"]
    metas = cx.meta()
    dim = a.get("dim", 0)
    sizes = [cx.dim(m.shape[dim]) if len(m.shape) > dim % max(ndim(x), 1) and len(m.shape) == ndim(x) else 1 for m in metas]
    if any(not isinstance(s, int) for s in sizes):
        raise UnsupportedError("split along a symbolic dim")
    if cx.node.target._schema.name.endswith("unbind"):
        sizes = [1] * len(metas)
        parts = _split_at(cx, x, sizes, dim) if len(sizes) > 1 else (x,)
        return [R.squeeze(p, axis=[dim % ndim(x)]) for p in parts]
    return list(_split_at(cx, x, sizes, dim)) if len(sizes) > 1 else [x]


@op("slice")
def _slice(cx, a):
    x = a["self"]
    d = a["dim"] % ndim(x)
    size = x.struct_info.shape[d]
    start, end, step = a.get("start"), a.get("end"), a.get("step") or 1
    start = 0 if start is None else start
    if end is None or (isinstance(end, int) and isinstance(size, int) and end >= size) or end == size:
        end = size
    if start == 0 and end == size and step == 1:
        return x
    if not all(isinstance(v, int) for v in (start, end)):
        return _symbolic_slice(cx, x, d, start, end, step, tuple(cx.out_shape().values))
    return R.strided_slice(x, axes=[d], begin=[start], end=[end], strides=[step])


def _symbolic_slice(cx, x, d: int, start, end, step: int, out_shape: tuple):
    """x[..., start:end:step, ...] along axis d with bounds that are dim expressions (`seq`, `seq - 1`):
    the bounds as run-time values, then the result cast to its shape in those dims."""
    shape = x.struct_info.shape
    if shape is None or (isinstance(start, int) and start < 0) or (isinstance(end, int) and end < 0):
        raise UnsupportedError("slice with symbolic bounds counted from the end, or of a value of unknown shape")
    n = len(shape)
    begin, stop = [0] * n, list(shape)
    begin[d], stop[d] = start, end
    strides = [1] * n
    strides[d] = step
    values = [cx.emit(R.shape_to_tensor(ShapeExpr(tuple(v)))) for v in (begin, stop, strides)]
    y = cx.emit(R.dynamic_strided_slice(x, *values))
    return R.match_cast(y, struct_info=TensorStructInfo(out_shape, x.struct_info.dtype))


@op("narrow")
def _narrow(cx, a):
    return _slice(cx, {"self": a["self"], "dim": a["dim"], "start": a["start"], "end": a["start"] + a["length"], "step": 1})


@op("select")
def _select(cx, a):
    x = a["self"]
    d = a["dim"] % ndim(x)
    i = a["index"]
    if not isinstance(i, int):
        raise UnsupportedError("select at a symbolic index")
    size = x.struct_info.shape[d]
    if i < 0:
        if not isinstance(size, int):
            raise UnsupportedError("select from the end of a symbolic dim")
        i += size
    s = cx.emit(R.strided_slice(x, axes=[d], begin=[i], end=[i + 1]))
    return R.squeeze(s, axis=[d])


@op("flip")
def _flip(cx, a):
    x = a["self"]
    for d in a["dims"]:
        x = cx.emit(R.flip(x, axis=d % ndim(x)))
    return x


@op("roll")
def _roll(cx, a):
    x = a["self"]
    dims = a["dims"] or [None]
    if dims == [None]:
        flat = cx.emit(R.reshape(x, ShapeExpr((-1,))))
        return R.reshape(cx.emit(_roll_axis(cx, flat, a["shifts"][0], 0)), ShapeExpr(x.struct_info.shape))
    for s, d in zip(a["shifts"], dims):
        x = cx.emit(_roll_axis(cx, x, s, d % ndim(x)))
    return x


def _roll_axis(cx, x, shift, d):
    n = x.struct_info.shape[d]
    if not isinstance(n, int):
        raise UnsupportedError("roll along a symbolic dim")
    k = shift % n if n else 0
    if k == 0:
        return x
    head = cx.emit(R.strided_slice(x, axes=[d], begin=[n - k], end=[n]))
    tail = cx.emit(R.strided_slice(x, axes=[d], begin=[0], end=[n - k]))
    return R.concat(Tuple((head, tail)), axis=d)


@op("tril", "triu")
def _tri(cx, a):
    fn = R.tril if cx.node.target._schema.name.endswith("tril") else R.triu
    return fn(a["self"], k=a.get("diagonal", 0))


@op("diff")
def _diff(cx, a):
    x = a["self"]
    d = a["dim"] % ndim(x)
    parts = [p for p in (a.get("prepend"), x, a.get("append")) if p is not None]
    if len(parts) > 1:
        x = cx.emit(R.concat(Tuple(tuple(parts)), axis=d))
    for _ in range(a["n"]):
        size = x.struct_info.shape[d]
        if isinstance(size, int):
            hi = cx.emit(R.strided_slice(x, axes=[d], begin=[1], end=[size]))
            lo = cx.emit(R.strided_slice(x, axes=[d], begin=[0], end=[size - 1]))
        else:
            shorter = tuple(f"{size} - 1" if i == d else s for i, s in enumerate(x.struct_info.shape))
            hi = cx.emit(_symbolic_slice(cx, x, d, 1, size, 1, shorter))
            lo = cx.emit(_symbolic_slice(cx, x, d, 0, f"{size} - 1", 1, shorter))
        x = cx.emit(R.logical_xor(hi, lo) if x.struct_info.dtype == "bool" else R.subtract(hi, lo))
    return x


TABLE["__and__"] = TABLE["bitwise_and"]
TABLE["__or__"] = TABLE["bitwise_or"]
TABLE["__xor__"] = TABLE["bitwise_xor"]
TABLE["__lshift__"] = TABLE["bitwise_left_shift"]
TABLE["__rshift__"] = TABLE["bitwise_right_shift"]
