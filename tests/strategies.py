"""Hypothesis strategies shared by tests: random well-formed modules built through BlockBuilder."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from retrograd.errors import DiagnosticError
from retrograd.ir import (
    BlockBuilder,
    Call,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    const,
    prim_value,
    shape_expr,
)
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops.registry import lookup
from retrograd.ops.shape_utils import broadcast_shapes

# -- profiles: CI (HYPOTHESIS_PROFILE=ci) runs 300+ examples, derandomized; "dev" a quick 30 ------

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# CI is derandomized: a run fails or passes the same way each time (the by-hand "thorough" explores).
settings.register_profile("ci", max_examples=300, derandomize=True, **_COMMON)
settings.register_profile("dev", max_examples=30, **_COMMON)
settings.register_profile("thorough", max_examples=2000, **_COMMON)
if os.environ.get("HYPOTHESIS_PROFILE") in ("ci", "dev", "thorough"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

UNARY = ("exp", "sin", "cos", "tanh", "negative", "abs", "sqrt", "log", "sigmoid", "nn.relu", "nn.silu", "nn.gelu")
BINARY = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power")
COMPARE = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
REDUCE = ("sum", "mean", "max", "min", "variance")
SYMBOLS = ("n", "m")


def op(name: str):
    """The registered op `relax.<name>` or None (colleagues add families over time)."""
    return lookup(f"relax.{name}")


def _present(names) -> list[str]:
    return [n for n in names if op(n) is not None]


# -- shapes ------------------------------------------------------------------------------


@st.composite
def base_shapes(draw):
    """A function's base shape; every tensor parameter broadcasts against it."""
    rank = draw(st.integers(1, 3))
    dims = []
    for _ in range(rank):
        if draw(st.integers(0, 5)) == 0:
            dims.append(draw(st.sampled_from(SYMBOLS)))
        else:
            dims.append(draw(st.integers(1, 4)))
    return tuple(dims)


@st.composite
def sub_shapes(draw, base):
    """A suffix of `base` with some dims replaced by 1: broadcast-compatible with base."""
    k = len(base) if draw(st.booleans()) else draw(st.integers(0, len(base)))
    suffix = base[len(base) - k :]
    return tuple(1 if draw(st.integers(0, 3)) == 0 else d for d in suffix)


def _static(shape) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _size(shape) -> int:
    return int(np.prod(shape)) if shape else 1


@st.composite
def constant_values(draw, shape, dtype="float32"):
    """A constant: mostly small finite floats; some integers-valued, a few special values."""
    n = _size(shape)
    if dtype.startswith("int"):
        vals = draw(st.lists(st.integers(-100, 100), min_size=n, max_size=n))
    else:
        elems = st.one_of(
            st.floats(-10, 10, width=32),
            st.integers(-5, 5).map(float),
            st.sampled_from([0.5, -0.0, 1e-7, 3.25e6]),
        )
        vals = draw(st.lists(elems, min_size=n, max_size=n))
    return const(np.array(vals, dtype=dtype).reshape(shape), dtype)


# -- function bodies ------------------------------------------------------------------------


class _Body:
    """The state while drawing one function: a builder and the values that are in scope."""

    def __init__(self, draw, bb: BlockBuilder, base, callees: dict):
        self.draw = draw
        self.bb = bb
        self.base = base
        self.callees = callees  # name -> Function already drawn (callable from this one)
        self.tensors: list[Var] = []  # tensor values in scope
        self.others: list[Var] = []  # tuples, shapes, prim values, strings
        self.cond: Var | None = None

    # picking values --------------------------------------------------------------------
    def pick(self, pred=lambda v: True):
        cands = [v for v in self.tensors if pred(v)]
        return self.draw(st.sampled_from(cands)) if cands else None

    def float_tensor(self):
        return self.pick(lambda v: v.struct_info.dtype in ("float32", "float64"))

    def partner(self, a):
        """A value that broadcasts with `a` and has its dtype (maybe a fresh constant)."""
        sa = a.struct_info

        def fits(v):
            s = v.struct_info
            return (
                s.dtype == sa.dtype
                and s.shape is not None
                and sa.shape is not None
                and broadcast_shapes(s.shape, sa.shape) is not None
            )

        if self.draw(st.integers(0, 4)) == 0 and sa.shape is not None:
            # A constant broadcasting against `a`: 1 in symbolic positions.
            shape = tuple(d if isinstance(d, int) else 1 for d in self.draw(sub_shapes(sa.shape)))
            if _size(shape) <= 16:
                return self.draw(constant_values(shape, sa.dtype))
        return self.pick(fits)

    # emitting ------------------------------------------------------------------------------
    def emit(self, expr, name="lv"):
        """Emit through the builder; inference errors mean this proposal does not fit: None."""
        try:
            var = self.bb.emit(expr, name)
        except DiagnosticError:
            return None
        s = var.struct_info
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            self.tensors.append(var)
        else:
            self.others.append(var)
        return var

    def step(self):
        """One binding (or a few): a random proposal among the available kinds."""
        kinds = ["unary", "binary", "binary", "compare", "const", "tuple", "reduce", "matmul", "permute",
                 "reshape", "softmax", "call", "call", "misc", "big_const"]
        kind = self.draw(st.sampled_from(kinds))
        getattr(self, "p_" + kind)()

    def p_unary(self):
        names = _present(UNARY)
        a = self.float_tensor()
        if names and a is not None:
            self.emit(op(self.draw(st.sampled_from(names)))(a))

    def p_binary(self):
        names = _present(BINARY)
        a = self.float_tensor()
        if not names or a is None:
            return
        b = self.partner(a)
        if b is not None:
            args = (a, b) if self.draw(st.booleans()) else (b, a)
            self.emit(op(self.draw(st.sampled_from(names)))(*args))

    def p_compare(self):
        names = _present(COMPARE)
        a = self.float_tensor()
        if names and a is not None:
            b = self.partner(a)
            if b is not None:
                self.emit(op(self.draw(st.sampled_from(names)))(a, b), "cmp")

    def p_const(self):
        shape = tuple(d if isinstance(d, int) else 1 for d in self.draw(sub_shapes(self.base)))
        if _size(shape) <= 16:
            dtype = self.draw(st.sampled_from(["float32", "float32", "float64", "int32"]))
            self.emit(self.draw(constant_values(shape, dtype)), "c")

    def p_big_const(self):
        # More than 16 elements: the printer's metadata section.
        shape = (self.draw(st.integers(17, 40)),) if self.draw(st.booleans()) else (5, self.draw(st.integers(4, 6)))
        c = self.emit(self.draw(constant_values(shape)), "big")
        a = self.float_tensor()
        if c is not None and a is not None and op("add") is not None:
            self.emit(op("add")(a, c))

    def p_tuple(self):
        a, b = self.pick(), self.pick()
        if a is None:
            return
        fields = [a, b] if b is not None else [a]
        if self.others and self.draw(st.booleans()):
            fields.append(self.draw(st.sampled_from(self.others)))
        t = self.emit(Tuple(fields), "t")
        if t is None:
            return
        if self.draw(st.booleans()):
            t = self.emit(Tuple([t, a]), "nested") or t
        idx = self.draw(st.integers(0, len(t.struct_info.fields) - 1))
        item = self.emit(TupleGetItem(t, idx), "item")
        if item is not None and isinstance(item.struct_info, TupleStructInfo):
            self.emit(TupleGetItem(item, self.draw(st.integers(0, len(item.struct_info.fields) - 1))), "inner")

    def p_reduce(self):
        names = _present(REDUCE)
        a = self.float_tensor()
        if not names or a is None:
            return
        nd = a.struct_info.ndim
        axis = None
        if nd > 0 and self.draw(st.booleans()):
            axes = self.draw(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd, unique_by=lambda i: i % nd))
            axis = axes
        self.emit(op(self.draw(st.sampled_from(names)))(a, axis=axis, keepdims=self.draw(st.booleans())))

    def p_matmul(self):
        mm = op("matmul")
        a = self.pick(lambda v: v.struct_info.ndim >= 1 and v.struct_info.dtype == "float32"
                      and isinstance(v.struct_info.shape[-1], int))
        if mm is None or a is None:
            return
        k = a.struct_info.shape[-1]
        cols = self.draw(st.integers(1, 3))
        w = self.draw(constant_values((k, cols) if self.draw(st.booleans()) else (k,)))
        self.emit(mm(a, w, out_dtype=None) if self.draw(st.booleans()) else mm(a, w))

    def p_permute(self):
        pd = op("permute_dims")
        a = self.pick(lambda v: v.struct_info.ndim >= 2)
        if pd is None or a is None:
            return
        nd = a.struct_info.ndim
        axes = None if self.draw(st.booleans()) else self.draw(st.permutations(range(nd)))
        self.emit(pd(a, axes=axes))

    def p_reshape(self):
        rs = op("reshape")
        a = self.pick(lambda v: _static(v.struct_info.shape))
        if rs is None or a is None:
            return
        size = _size(a.struct_info.shape)
        target = [size] if self.draw(st.booleans()) or size % 2 else [2, size // 2]
        self.emit(rs(a, shape_expr(target)))

    def p_softmax(self):
        names = _present(("nn.softmax", "nn.log_softmax"))
        a = self.pick(lambda v: v.struct_info.ndim >= 1 and v.struct_info.dtype in ("float32", "float64"))
        if names and a is not None:
            axis = self.draw(st.integers(-a.struct_info.ndim, a.struct_info.ndim - 1))
            self.emit(op(self.draw(st.sampled_from(names)))(a, axis=axis))

    def p_call(self):
        """Call a function drawn earlier with values in scope that fit its parameters (else constants)."""
        if not self.callees:
            return
        name = self.draw(st.sampled_from(sorted(self.callees)))
        args = [self.fit(p.struct_info) for p in self.callees[name].params]
        if all(a is not None for a in args):
            self.emit(Call(GlobalVar(name), args), "call")

    def fit(self, s):
        """An argument for a parameter of struct info `s`: a value in scope, or a constant / tuple of them."""
        if isinstance(s, TupleStructInfo):
            fields = [self.fit(f) for f in s.fields]
            return Tuple(fields) if all(f is not None for f in fields) else None
        if not isinstance(s, TensorStructInfo) or s.shape is None:
            return None
        if s.dtype == "bool" and s.ndim == 0 and self.cond is not None:
            return self.cond
        cands = [v for v in self.tensors if v.struct_info.ndim == s.ndim and v.struct_info.dtype == s.dtype]
        if cands and self.draw(st.integers(0, 3)):
            return self.draw(st.sampled_from(cands))
        shape = tuple(d if isinstance(d, int) else 2 for d in s.shape)
        if s.dtype == "bool":
            return const(np.zeros(shape, dtype="bool"))
        return self.draw(constant_values(shape, s.dtype)) if _size(shape) <= 16 else None

    def p_misc(self):
        """Shape, prim and string values (kept in scope for tuples and results)."""
        kind = self.draw(st.sampled_from(["shape", "prim", "str"]))
        if kind == "shape":
            self.emit(shape_expr(self.draw(st.lists(st.integers(1, 5), min_size=0, max_size=3))), "s")
        elif kind == "prim":
            self.emit(prim_value(self.draw(st.integers(-3, 9))), "p")
        else:
            self.emit(StringImm(self.draw(st.sampled_from(["hello", "a b", "x_1"]))), "str")

    # control flow -------------------------------------------------------------------------------
    def if_(self):
        """An If on the bool parameter whose branches each apply unary ops to a value in scope."""
        a = self.float_tensor()
        names = _present(UNARY)
        if self.cond is None or a is None or not names:
            return
        branches = []
        for _ in range(2):
            self.bb.begin_scope()
            v = a
            for _ in range(self.draw(st.integers(0, 2))):
                v = self.bb.emit(op(self.draw(st.sampled_from(names)))(v), "br")
            branches.append(self.bb.end_scope(v))
        self.emit(If(self.cond, branches[0], branches[1]), "r")

    def dataflow_block(self):
        """A dataflow block of a few steps; its DataflowVars leave scope except the outputs."""
        before_t, before_o = len(self.tensors), len(self.others)
        self.bb.begin_block(dataflow=True)
        for _ in range(self.draw(st.integers(1, 5))):
            self.step()
        new = self.tensors[before_t:] + self.others[before_o:]
        outputs = []
        if new:
            picks = self.draw(st.lists(st.sampled_from(new), min_size=1, max_size=2, unique=True))
            for v in picks:
                outputs.append(self.bb.emit_output(v, "gv"))
        self.bb.end_block()
        self.tensors = [v for v in self.tensors if not isinstance(v, DataflowVar)]
        self.others = [v for v in self.others if not isinstance(v, DataflowVar)]
        for v in outputs:
            (self.tensors if isinstance(v.struct_info, TensorStructInfo) else self.others).append(v)

    def plain_block(self):
        self.bb.begin_block(dataflow=False)
        for _ in range(self.draw(st.integers(1, 3))):
            if self.draw(st.integers(0, 2)) == 0:
                self.if_()
            else:
                self.step()
        self.bb.end_block()

    def result(self):
        vals = self.tensors + self.others
        shape = self.draw(st.sampled_from(["one", "tuple", "nested"]))
        if shape == "one" or len(vals) < 2:
            return self.draw(st.sampled_from(self.tensors))
        items = self.draw(st.lists(st.sampled_from(vals), min_size=1, max_size=3))
        if shape == "nested":
            items = [Tuple(items[:1]), *items[1:]]
        return Tuple(items)


@st.composite
def functions(draw, callees: dict | None = None):
    """One function: tensor params broadcasting against a base shape, maybe a tuple param and a
    bool condition param, then dataflow and plain blocks in random order."""
    callees = dict(callees or {})
    global_sinfo = {name: f.struct_info for name, f in callees.items()}
    bb = BlockBuilder(global_sinfo=global_sinfo)
    base = draw(base_shapes())
    dtype = draw(st.sampled_from(["float32", "float32", "float64"]))
    params = []
    body = _Body(draw, bb, base, callees)
    for i in range(draw(st.integers(1, 3))):
        v = Var(f"x{i}" if i else "x", TensorStructInfo(draw(sub_shapes(base)), dtype))
        params.append(v)
        body.tensors.append(v)
    if draw(st.integers(0, 3)) == 0:
        t = Var("pair", TupleStructInfo([TensorStructInfo(base, dtype), TensorStructInfo((2,), dtype)]))
        params.append(t)
        body.others.append(t)
    if draw(st.booleans()):
        body.cond = Var("cond", TensorStructInfo((), "bool"))
        params.append(body.cond)
    bb.begin_scope()
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            body.dataflow_block()
        else:
            body.plain_block()
    seq = bb.end_scope(body.result())
    return Function(params, seq, seq.struct_info)


@st.composite
def modules(draw, max_functions: int = 3):
    """A random well-formed module; later functions may call earlier ones; the last is `main`."""
    n = draw(st.integers(1, max_functions))
    funcs: dict[str, Function] = {}
    for i in range(n):
        name = "main" if i == n - 1 else f"f{i}"
        funcs[name] = draw(functions(callees=funcs))
    return IRModule(funcs)
