"""`from_tvm`: a TVM Relax IRModule held in Python, walked object by object into a retrograd IRModule."""

from __future__ import annotations

import warnings

from retrograd.errors import DiagnosticError, TypeInferenceError, UnsupportedError
from retrograd.frontend.tvm_types import attr_fields, constant_data, dim, field, kind, shape_values, to_sinfo, type_of
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
    Expr,
    Function,
    GlobalVar,
    If,
    PrimValue,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import FuncStructInfo, PrimStructInfo, TensorStructInfo, TupleStructInfo, is_base_of
from retrograd.ir.text import format_sinfo
from retrograd.ops.registry import lookup

# Function attributes that hold TVM objects with no retrograd value: "params" is the frontend's
# weights (read them with tvm_params); others are dropped with a warning naming them.
_WEIGHTS_ATTR = "params"
_NO_RETROGRAD_FORM = {
    "relax.call_tir": "calls a TIR PrimFunc",
    "relax.call_tir_with_grad": "calls a TIR PrimFunc",
    "relax.call_tir_inplace": "calls a TIR PrimFunc",
    "relax.call_dps_packed": "calls an external packed function",
    "relax.call_pure_packed": "calls an external packed function",
    "relax.call_packed": "calls an external packed function",
}


class _Literal:
    """An argument only valid where retrograd takes an attribute (R.dtype("float32"), Python values)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def from_tvm(tvm_mod) -> IRModule:
    """The retrograd IRModule of a TVM Relax IRModule (`tvm.IRModule`), constants included.

    Relax functions are rebuilt binding by binding with retrograd's BlockBuilder, so every call is
    checked and typed by retrograd's op definitions; a static shape or dtype retrograd infers
    differently from TVM is an error. TIR PrimFuncs and external functions are skipped with a
    warning; a call of one is an UnsupportedError naming it.
    """
    if kind(tvm_mod) == "Function":  # a bare @R.function: a module of one function, as retrograd.parse makes
        attrs = attr_fields(field(tvm_mod, "attrs", default=None))
        return _module({str(attrs.get("global_symbol", "main")): tvm_mod}, [], {})
    if not hasattr(tvm_mod, "functions"):
        raise UnsupportedError(f"from_tvm expects a TVM IRModule or Relax function, got {type(tvm_mod).__name__}")
    funcs = {}
    skipped = []
    for gvar, func in tvm_mod.functions.items():
        name = str(field(gvar, "name_hint", "name"))
        if kind(func) == "Function":
            funcs[name] = func
        else:
            skipped.append(name)
    if skipped:
        warnings.warn(f"from_tvm: skipped functions retrograd cannot hold ({', '.join(sorted(skipped))})", stacklevel=2)
    return _module(funcs, skipped, attr_fields(field(tvm_mod, "attrs", default=None)))


def _module(funcs: dict, skipped: list, mod_attrs: dict) -> IRModule:
    signatures = {name: _signature(f) for name, f in funcs.items()}
    out = {name: _FunctionImporter(signatures, skipped).run(f, name) for name, f in funcs.items()}
    return IRModule(out, {k: v for k, v in mod_attrs.items() if _printable(v)})


def tvm_params(tvm_mod, name: str = "main") -> dict:
    """The weights TVM's PyTorch frontend keeps in function `name`'s "params" attribute, as
    {parameter name: NumPy array} for the parameters after the `num_input` inputs."""
    func = tvm_mod[name]
    attrs = field(func, "attrs", default=None)
    if attrs is None or _WEIGHTS_ATTR not in attrs:
        return {}
    num_input = int(getattr(attrs["num_input"], "value", attrs["num_input"])) if "num_input" in attrs else 0
    names = [str(field(p, "name", "name_hint")) for p in func.params[num_input:]]
    return {n: t.numpy() for n, t in zip(names, attrs[_WEIGHTS_ATTR])}


def _key(obj) -> int:
    """A TVM object's identity: its handle (Python wrappers of one object are not always the same)."""
    chandle = getattr(obj, "__chandle__", None)
    return chandle() if chandle is not None else obj.handle.value


def _signature(func) -> FuncStructInfo:
    ret = field(func, "ret_ty", "ret_struct_info", default=None)
    params = tuple(to_sinfo(type_of(p)) for p in func.params)
    return FuncStructInfo(params, to_sinfo(ret), bool(field(func, "is_pure", default=True)))


def _printable(value) -> bool:
    if isinstance(value, tuple | list):
        return all(_printable(v) for v in value)
    if isinstance(value, dict):
        return all(_printable(v) for v in value.values())
    return value is None or isinstance(value, bool | int | float | str)


class _FunctionImporter:
    """Converts one Relax function; TVM variables map to retrograd ones by their object handle."""

    def __init__(self, signatures: dict, skipped: list):
        self.signatures = signatures
        self.skipped = set(skipped)
        self.bb = BlockBuilder(global_sinfo=signatures)
        self.vars: dict[int, Var] = {}

    def run(self, func, name: str) -> Function:
        params = []
        for p in func.params:
            var = Var(str(field(p, "name", "name_hint")), to_sinfo(type_of(p)))
            self.vars[_key(p)] = var
            params.append(var)
        attrs = attr_fields(field(func, "attrs", default=None), skip=(_WEIGHTS_ATTR,))
        dropped = [k for k, v in attrs.items() if not _printable(v)]
        if dropped:
            warnings.warn(f"from_tvm: function '{name}' attributes dropped (no retrograd value): {', '.join(dropped)}", stacklevel=3)
        attrs = {k: v for k, v in attrs.items() if _printable(v)}
        private = "global_symbol" not in attrs
        if attrs.get("global_symbol") == name:
            del attrs["global_symbol"]  # retrograd marks a public function by `private`, not the attribute
        try:
            body = self.seq(func.body)
        except DiagnosticError as err:
            err.notes.append(f"in function '{name}' imported from TVM")
            raise
        sig = self.signatures[name]
        return Function(tuple(params), body, _refine(sig.ret, body.struct_info), sig.purity, private, attrs)

    # -- scopes and bindings ----------------------------------------------------------------------
    def seq(self, seq_expr):
        """A TVM SeqExpr as a retrograd SeqExpr, built in a scope of its own."""
        bb = self.bb
        bb.begin_scope()
        if kind(seq_expr) != "SeqExpr":  # a body TVM left unnormalized: a SeqExpr without blocks
            return bb.end_scope(self.expr(seq_expr))
        for block in seq_expr.blocks:
            dataflow = kind(block) == "DataflowBlock"
            bb.begin_block(dataflow=dataflow)
            for binding in block.bindings:
                self.binding(binding, dataflow)
            bb.end_block()
        return bb.end_scope(self.expr(seq_expr.body))

    def binding(self, binding, dataflow: bool) -> None:
        tvm_var = binding.var
        name = str(field(tvm_var, "name", "name_hint"))
        value = self.expr(binding.value)
        want = to_sinfo(type_of(tvm_var))
        if kind(binding) == "MatchCast":
            cast = to_sinfo(field(binding, "ty", "struct_info"))
            value = self.bb.normalize_arg(value) if not isinstance(value, Var) else value
            if not is_base_of(cast, value.struct_info):
                raise UnsupportedError(
                    f"from_tvm: R.match_cast of '{name}' narrows {format_sinfo(value.struct_info, brief=True)} to "
                    f"{format_sinfo(cast, brief=True)}, a run-time check retrograd does not support"
                )
        value = self.bb.normalize(value)
        _check_agrees(name, value.struct_info, want, binding.value)
        cls = DataflowVar if dataflow and kind(tvm_var) == "DataflowVar" else Var
        var = cls(name, _refine(want, value.struct_info))
        self.bb.bind(var, value)
        self.vars[_key(tvm_var)] = var

    # -- expressions ------------------------------------------------------------------------------
    def expr(self, e) -> Expr:
        k = kind(e)
        if k == "Call":
            return self.call(e)
        if k == "If":
            cond = self.leaf(e.cond)
            return If(cond, self.seq(e.true_branch), self.seq(e.false_branch))
        if k == "SeqExpr":
            raise UnsupportedError("from_tvm: a SeqExpr outside a function body or branch is not supported")
        value = self.leaf(e)
        if isinstance(value, _Literal):
            raise UnsupportedError(f"from_tvm: {e} is only supported as an operator attribute")
        return value

    def leaf(self, e):
        k = kind(e)
        if k in ("Var", "DataflowVar"):
            var = self.vars.get(_key(e))
            if var is None and kind(type_of(e)) in ("PrimType", "PrimStructInfo"):
                return _Literal(dim(e))  # a TIR variable (TVM 0.27 spells symbolic prim values so)
            if var is None:
                raise UnsupportedError(f"from_tvm: variable '{field(e, 'name', 'name_hint')}' is used outside its scope")
            return var
        if k in ("GenericConst", "Constant", "DataTypeImm"):
            value = field(e, "value", "data")
            if kind(value) in ("Tensor", "NDArray"):
                return Constant(constant_data(e))
            return _Literal(str(value))  # R.dtype(...): a DataTypeImm
        if k in ("IntImm", "FloatImm", "PrimValue"):
            return self.prim(e)
        if k == "StringImm":
            return StringImm(str(e.value))
        if k == "ShapeExpr":
            return ShapeExpr(shape_values(e))
        if k == "Tuple":
            fields = [self.leaf(f) for f in e.fields]
            if any(isinstance(f, _Literal) for f in fields):
                return _Literal(tuple(f.value if isinstance(f, _Literal) else _literal_of(f) for f in fields))
            return Tuple(tuple(fields))
        if k == "TupleGetItem":
            return TupleGetItem(self.leaf(e.tuple_value), int(e.index))
        if k == "GlobalVar":
            name = str(field(e, "name_hint", "name"))
            if name in self.skipped:
                raise UnsupportedError(f"from_tvm: '{name}' is a TIR or external function, which retrograd cannot hold")
            return GlobalVar(name, self.signatures[name])
        if k in ("Call", "If"):
            return self.bb.normalize_arg(self.expr(e))
        if k == "Function":
            raise UnsupportedError("from_tvm: local (nested) Relax functions are not supported")
        raise UnsupportedError(f"from_tvm: TVM {k} expressions are not supported")

    def prim(self, e) -> PrimValue:
        inner = e.value if kind(e) == "PrimValue" else e
        if kind(inner) not in ("IntImm", "FloatImm"):
            return _Literal(dim(inner))  # a symbolic prim value: only read where it is an attribute
        sinfo = to_sinfo(type_of(e))
        dtype = sinfo.dtype if isinstance(sinfo, PrimStructInfo) and sinfo.dtype else str(field(inner, "dtype", default="int64"))
        value = inner.value
        value = bool(value) if dtype == "bool" else int(value) if kind(inner) == "IntImm" else float(value)
        return PrimValue(value, dtype)

    def call(self, e) -> Expr:
        op = e.op
        if kind(op) == "GlobalVar":
            return Call(self.leaf(op), tuple(self.leaf(a) for a in e.args))
        name = str(field(op, "name", default=op))
        if name in _NO_RETROGRAD_FORM:
            callee = e.args[0] if len(e.args) else None
            what = f" '{field(callee, 'name_hint', 'global_symbol', default=callee)}'" if callee is not None else ""
            raise UnsupportedError(f"from_tvm: {name}{what} {_NO_RETROGRAD_FORM[name]}, which retrograd cannot run")
        opdef = lookup(name)
        if opdef is None:
            raise UnsupportedError(f"from_tvm: op {name} has no retrograd definition")
        args = [self.leaf(a) for a in e.args]
        attrs = attr_fields(e.attrs)
        if name == "relax.assert_op":
            args, attrs = _assert_op_args(args)
        if name == "relax.arange" and any(isinstance(a, _Literal) for a in args):
            return self.symbolic_arange(args, attrs)
        args, attr_vals = opdef.bind(args, attrs)
        for i, a in enumerate(args):
            if isinstance(a, _Literal):
                raise UnsupportedError(f"from_tvm: {name} argument {i} is {a.value!r}, where retrograd takes a value")
        attr_vals = {k: _literal_of(v) for k, v in attr_vals.items()}
        return opdef(*args, **attr_vals)

    def symbolic_arange(self, args, attrs) -> Expr:
        """`R.arange(0, n, 1)` with a symbolic n (frontends build causal masks so): retrograd's prim
        values are numbers, so the positions are counted over a tensor of n ones instead."""
        start, end, step = ([_literal_of(a) for a in args] + [1, 1])[:3] if len(args) > 1 else (0, _literal_of(args[0]), 1)
        if start != 0 or step != 1 or not isinstance(end, int | str):
            raise UnsupportedError(
                f"from_tvm: relax.arange({start}, {end}, {step}) with a symbolic bound: only arange(0, n, 1) is supported"
            )
        dtype = attrs.get("dtype") or "int64"
        ones = self.bb.emit(lookup("relax.ones")(ShapeExpr((end,)), dtype=dtype), "ones")
        return lookup("relax.cumsum")(ones, axis=0, exclusive=True)


def _assert_op_args(args):
    """TVM's assert_op call holds (condition, format, *values); retrograd's keeps the format string as
    an attribute and at most one value, as TVM's parser reads them."""
    cond, fmt, values = args[0], args[1] if len(args) > 1 else StringImm(""), args[2:]
    if len(values) > 1:
        raise UnsupportedError(f"from_tvm: relax.assert_op with {len(values)} format values (retrograd takes at most one)")
    return [cond, *values], {"format": _literal_of(fmt)}


def _literal_of(value):
    """An argument TVM passes as an expression but retrograd takes as an attribute, as a Python value."""
    if isinstance(value, _Literal):
        return value.value
    if isinstance(value, PrimValue):
        return value.value
    if isinstance(value, StringImm):
        return value.value
    if isinstance(value, ShapeExpr):
        return tuple(value.values)
    if isinstance(value, Tuple):
        return tuple(_literal_of(f) for f in value.fields)
    if isinstance(value, Expr):
        raise UnsupportedError(f"from_tvm: a {type(value).__name__} where an attribute value is expected")
    return value


def _describe(tvm_value) -> str:
    op = field(tvm_value, "op", default=None)
    name = field(op, "name", "name_hint", default=None) if op is not None else None
    return f"call of {name}" if name is not None else kind(tvm_value)


def _refine(ann, inferred):
    """The struct info a variable keeps, as retrograd's parser decides it for an annotated binding:
    TVM's when it is strictly less specific than retrograd's inference, else the inferred one."""
    if ann == inferred or (is_base_of(ann, inferred) and is_base_of(inferred, ann)):
        return inferred
    return ann if is_base_of(ann, inferred) else inferred


def _check_agrees(name: str, got, want, tvm_value) -> None:
    """Retrograd's inferred struct info must match TVM's on static shapes and dtypes."""
    pairs = [(got, want)]
    while pairs:
        a, b = pairs.pop()
        if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo) and len(a.fields) == len(b.fields):
            pairs.extend(zip(a.fields, b.fields))
        elif isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
            same_dtype = not a.dtype or not b.dtype or a.dtype == b.dtype
            # TVM 0.27 infers a negative extent for an empty slice (x[:, 3:2] is (3, -1)): no shape.
            tvm_valid = b.shape is None or all(not isinstance(d, int) or d >= 0 for d in b.shape)
            same_shape = not (a.is_static and b.is_static and tvm_valid) or a.shape == b.shape
            if not (same_dtype and same_shape):
                raise TypeInferenceError(
                    f"from_tvm: retrograd infers {format_sinfo(got, brief=True)} for '{name}' "
                    f"where TVM has {format_sinfo(want, brief=True)} (a {_describe(tvm_value)})"
                )
