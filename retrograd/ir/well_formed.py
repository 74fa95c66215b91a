"""Well-formedness checker: scoping, dataflow rules, normal form, and struct info agreeing with inference."""

from __future__ import annotations

import functools

from retrograd.errors import DiagnosticError, WellFormedError
from retrograd.ir.vars import read_vars
from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import (
    LEAF_TYPES,
    Call,
    Constant,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    is_leaf,
)
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    is_base_of,
    is_float_dtype,
    unify,
)
from retrograd.ir.text import brief, format_sinfo, op_script_name

# Messages write the dtype positionally, TVM's short form: `R.Tensor((3,), "float32")`.
_sinfo_text = functools.partial(format_sinfo, dtype_keyword=False)

__all__ = ["well_formed", "verify"]

# Work-item kinds (an explicit stack: no recursion over bindings).
_FUNC, _FUNC_END, _SEQ, _SEQ_END, _BLOCK, _BLOCK_END, _BINDING, _DEFINE, _EXPR = range(9)


class _Def:
    """Where a var was defined: the function, a label, the order of definition, dataflow-ness."""

    __slots__ = ("func", "label", "order", "in_dataflow")

    def __init__(self, func: str, label: str, order: int, in_dataflow: bool):
        self.func, self.label, self.order, self.in_dataflow = func, label, order, in_dataflow


class _Checker:
    def __init__(self, mod: IRModule, check_struct_info: bool):
        self.mod = mod
        self.check_sinfo = check_struct_info
        self.problems: list[str] = []
        self.defs: dict[Var, _Def] = {}
        self.visible: set[Var] = set()
        # Unresolved uses, classified once every definition is known: (var, func, order, where).
        self.pending: list[tuple[Var, str, int, str]] = []
        self.order = 0
        # Tuples checked already, and the vars each reads: bindings may share the levels of one deep
        # nest, and checking each level afresh would be quadratic; a repeat only has its uses checked.
        self.checked_tuples: dict[int, Tuple] = {}
        self.tuple_reads: dict = {}
        self.bb = BlockBuilder(mod)
        self.bb.begin_scope()

    # -- reporting ----------------------------------------------------------
    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    @staticmethod
    def where(func: str, label: str | None, span) -> str:
        text = f"function '{func}'"
        if label:
            text += f", {label}"
        if span is not None:
            text = f"{span}: {text}"
        return text

    # -- driver -------------------------------------------------------------
    def run(self) -> list[str]:
        stack: list[tuple] = []
        for name, func in reversed(list(self.mod.items())):
            stack.append((_FUNC, func, name, None))
        while stack:
            item = stack.pop()
            kind = item[0]
            if kind == _BINDING:
                self.binding(item, stack)
            elif kind == _EXPR:
                self.expr(item, stack)
            elif kind == _DEFINE:
                self.define(item)
            elif kind == _BLOCK:
                self.block(item, stack)
            elif kind == _BLOCK_END:
                for var in item[1]:
                    self.visible.discard(var)
            elif kind == _SEQ:
                self.seq(item, stack)
            elif kind == _SEQ_END:
                for var in item[1]:
                    self.visible.discard(var)
            elif kind == _FUNC:
                self.function(item, stack)
            elif kind == _FUNC_END:
                for var in item[1]:
                    self.visible.discard(var)
        self.resolve_pending()
        return self.problems

    # -- functions, sequences, blocks, bindings ------------------------------
    def function(self, item, stack) -> None:
        _, func, name, label = item
        where = self.where(name, label, func.span)
        if not isinstance(func, Function):
            self.problem(where, f"is not a Relax function but {type(func).__name__}")
            return
        params = []
        for i, p in enumerate(func.params):
            pwhere = self.where(name, f"parameter '{getattr(p, 'name_hint', i)}'", getattr(p, "span", None))
            if not isinstance(p, Var):
                self.problem(pwhere, f"parameter {i} is a {type(p).__name__}, not a Var")
                continue
            if isinstance(p, DataflowVar):
                self.problem(pwhere, "a parameter cannot be a DataflowVar")
            if p.struct_info is None:
                self.problem(pwhere, "has no struct info")
            if self.declare(p, name, pwhere, in_dataflow=False):
                params.append(p)
        body = func.body
        stack.append((_FUNC_END, params))
        if not isinstance(body, SeqExpr):
            self.problem(where, f"body is a {type(body).__name__}, expected a SeqExpr")
            stack.append((_EXPR, body, name, self.where(name, "body", func.span), True))
            return
        if self.check_sinfo and func.ret_struct_info is not None and body.struct_info is not None:
            if not is_base_of(func.ret_struct_info, body.struct_info):
                self.problem(
                    where,
                    f"return annotation {_sinfo_text(func.ret_struct_info)} contradicts "
                    f"the body's {_sinfo_text(body.struct_info)}",
                )
        stack.append((_SEQ, body, name, "return value"))

    def seq(self, item, stack) -> None:
        _, seq, fname, label = item
        defined: list[Var] = []
        stack.append((_SEQ_END, defined))
        where = self.where(fname, label, seq.body.span if hasattr(seq.body, "span") else None)
        if not is_leaf(seq.body):
            self.problem(where, f"result {brief(seq.body)} is not a variable, constant or tuple of them")
        if self.check_sinfo and seq.struct_info is not None and seq.body.struct_info is not None:
            if not is_base_of(seq.struct_info, seq.body.struct_info):
                self.problem(
                    where,
                    f"struct info {_sinfo_text(seq.struct_info)} contradicts the result's "
                    f"{_sinfo_text(seq.body.struct_info)}",
                )
        stack.append((_EXPR, seq.body, fname, where, True))
        for block in reversed(seq.blocks):
            stack.append((_BLOCK, block, fname, defined))

    def block(self, item, stack) -> None:
        _, block, fname, seq_defined = item
        if not isinstance(block, BindingBlock):
            self.problem(self.where(fname, None, None), f"a {type(block).__name__} where a binding block belongs")
            return
        dataflow = isinstance(block, DataflowBlock)
        local: list[Var] = []
        stack.append((_BLOCK_END, local))
        for binding in reversed(block.bindings):
            stack.append((_BINDING, binding, fname, dataflow, local, seq_defined))

    def binding(self, item, stack) -> None:
        _, binding, fname, dataflow, local, seq_defined = item
        if not isinstance(binding, VarBinding):
            self.problem(self.where(fname, None, None), f"a {type(binding).__name__} where a VarBinding belongs")
            return
        var = binding.var
        name = getattr(var, "name_hint", "?")
        span = binding.span or getattr(var, "span", None) or getattr(binding.value, "span", None)
        where = self.where(fname, f"binding '{name}'", span)
        value = binding.value
        if dataflow:
            # TVM rejects these too: dataflow blocks are pure and straight-line.
            if isinstance(value, If):
                self.problem(where, "an If inside a dataflow block (TVM cannot parse it there)")
            elif isinstance(value, Call) and not self.pure_callee(value.op):
                self.problem(where, f"impure {_op_label(value.op)} inside a dataflow block")
        stack.append((_DEFINE, binding, fname, dataflow, local, seq_defined, where))
        stack.append((_EXPR, value, fname, where, True))

    def pure_callee(self, op) -> bool:
        if isinstance(op, GlobalVar):
            callee = self.mod[op.name_hint] if op.name_hint in self.mod else None
            return getattr(callee, "is_pure", True)
        if isinstance(op, Op):
            return getattr(op, "pure", True)
        return True

    def define(self, item) -> None:
        _, binding, fname, dataflow, local, seq_defined, where = item
        var, value = binding.var, binding.value
        if not isinstance(var, Var):
            self.problem(where, f"binds a {type(var).__name__}, not a Var")
            return
        if isinstance(var, DataflowVar) and not dataflow:
            self.problem(where, f"dataflow variable '{var.name_hint}' is bound outside a dataflow block")
        if var.struct_info is None:
            self.problem(where, f"variable '{var.name_hint}' has no struct info")
        elif self.check_sinfo and value.struct_info is not None:
            # Calls were re-inferred in expr(); their recorded struct info stands for the inferred one.
            if not is_base_of(var.struct_info, value.struct_info):
                self.problem(
                    where,
                    f"annotation {_sinfo_text(var.struct_info)} contradicts the value's "
                    f"{_sinfo_text(value.struct_info)}",
                )
        if self.declare(var, fname, where, dataflow):
            (local if isinstance(var, DataflowVar) and dataflow else seq_defined).append(var)

    def declare(self, var: Var, fname: str, where: str, in_dataflow: bool) -> bool:
        first = self.defs.get(var)
        if first is not None:
            other = "" if first.func == fname else f" of function '{first.func}'"
            self.problem(where, f"variable '{var.name_hint}' is bound twice (first as {first.label}{other})")
            return False
        self.order += 1
        label = where.split(", ", 1)[1] if ", " in where else where
        self.defs[var] = _Def(fname, label, self.order, in_dataflow)
        self.visible.add(var)
        return True

    def resolve_pending(self) -> None:
        for var, fname, order, where in self.pending:
            d = self.defs.get(var)
            name = var.name_hint
            if d is None:
                self.problem(where, f"uses undefined variable '{name}'")
            elif d.func != fname:
                self.problem(where, f"uses variable '{name}' of function '{d.func}'")
            elif d.order > order:
                self.problem(where, f"uses variable '{name}' before its definition ({d.label})")
            elif isinstance(var, DataflowVar) and d.in_dataflow:
                self.problem(where, f"uses dataflow variable '{name}' outside its dataflow block")
            else:
                self.problem(where, f"uses variable '{name}' outside the scope that defines it ({d.label})")

    # -- expressions ----------------------------------------------------------
    def use(self, var: Var, fname: str, where: str) -> None:
        if var not in self.visible:
            self.pending.append((var, fname, self.order, where))

    def expr(self, item, stack) -> None:
        _, e, fname, where, top = item
        if isinstance(e, Var):
            self.use(e, fname, where)
            return
        if e.struct_info is None and not isinstance(e, Function | SeqExpr):
            self.problem(where, f"{brief(e, 60)} has no struct info")
        if isinstance(e, Call):
            self.call(e, fname, where, stack)
        elif isinstance(e, Tuple):
            if self.checked_tuples.get(id(e)) is e:
                reads: list = []
                read_vars(e, reads, self.tuple_reads)
                for v in reads:
                    self.use(v, fname, where)
                return
            self.checked_tuples[id(e)] = e
            for i, f in enumerate(e.fields):
                # A nested tuple's own fields are checked when it is visited (checking all of them
                # here too would be quadratic in the depth of a nest).
                if not isinstance(f, LEAF_TYPES + (Tuple,)):
                    self.problem(where, f"tuple field {i} is {brief(f, 60)}, not a variable (not in A-normal form)")
            for f in reversed(e.fields):
                stack.append((_EXPR, f, fname, where, False))
            if self.check_sinfo and isinstance(e.struct_info, TupleStructInfo):
                fields = [f.struct_info for f in e.fields]
                if len(fields) != len(e.struct_info.fields) or not all(
                    s is None or is_base_of(a, s) for a, s in zip(e.struct_info.fields, fields)
                ):
                    self.problem(where, f"tuple struct info {_sinfo_text(e.struct_info)} contradicts its fields")
        elif isinstance(e, TupleGetItem):
            self.getitem(e, where)
            if not is_leaf(e.tuple_value):
                self.problem(where, f"indexes {brief(e.tuple_value, 60)}, not a variable (not in A-normal form)")
            stack.append((_EXPR, e.tuple_value, fname, where, False))
        elif isinstance(e, If):
            self.if_(e, fname, where, stack)
        elif isinstance(e, Function):
            stack.append((_FUNC, e, fname, where.split(", ", 1)[-1] + " (local function)"))
        elif isinstance(e, SeqExpr):
            if top:
                self.problem(where, "a SeqExpr bound as a value (not in normal form)")
            stack.append((_SEQ, e, fname, where.split(", ", 1)[-1]))
        elif isinstance(e, GlobalVar):
            if e.name_hint not in self.mod:
                self.problem(where, f"refers to function '{e.name_hint}', which is not in the module")
        elif isinstance(e, Constant):
            s = e.struct_info
            if self.check_sinfo and isinstance(s, TensorStructInfo):
                shape, dtype = tuple(e.data.shape), str(e.data.dtype)
                if (s.shape is not None and s.shape != shape) or (s.dtype and s.dtype != dtype):
                    self.problem(
                        where, f"constant of shape {shape} and dtype {dtype} annotated {_sinfo_text(s)}"
                    )
        elif isinstance(e, ShapeExpr | PrimValue | StringImm):
            pass
        else:
            self.problem(where, f"unexpected node {type(e).__name__}")

    def getitem(self, e: TupleGetItem, where: str) -> None:
        s = e.tuple_value.struct_info
        if s is None or isinstance(s, ObjectStructInfo):
            return
        if not isinstance(s, TupleStructInfo):
            self.problem(where, f"indexes a non-tuple value of type {_sinfo_text(s)}")
            return
        n = len(s.fields)
        if not -n <= e.index < n:
            self.problem(where, f"tuple index {e.index} out of range for a tuple of {n} fields")
            return
        if self.check_sinfo and e.struct_info is not None and not is_base_of(e.struct_info, s.fields[e.index]):
            self.problem(
                where,
                f"struct info {_sinfo_text(e.struct_info)} of item {e.index} contradicts the tuple's "
                f"{_sinfo_text(s.fields[e.index])}",
            )

    def if_(self, e: If, fname: str, where: str, stack) -> None:
        cond = e.cond
        if not is_leaf(cond):
            self.problem(where, f"If condition {brief(cond, 60)} is not a variable (not in A-normal form)")
        s = cond.struct_info
        if s is not None and not _bool_scalar(s):
            self.problem(where, f"If condition has type {_sinfo_text(s)}, expected a boolean scalar")
        for branch, label in ((e.false_branch, "false branch"), (e.true_branch, "true branch")):
            if not isinstance(branch, SeqExpr):
                self.problem(where, f"If {label} is a {type(branch).__name__}, expected a SeqExpr")
                stack.append((_EXPR, branch, fname, where, False))
            else:
                stack.append((_SEQ, branch, fname, where.split(", ", 1)[-1] + f", {label}"))
        stack.append((_EXPR, cond, fname, where, False))
        tb, fb = e.true_branch.struct_info, e.false_branch.struct_info
        if self.check_sinfo and e.struct_info is not None and tb is not None and fb is not None:
            if not is_base_of(e.struct_info, unify(tb, fb)):
                self.problem(
                    where,
                    f"If struct info {_sinfo_text(e.struct_info)} contradicts its branches "
                    f"({_sinfo_text(tb)}, {_sinfo_text(fb)})",
                )

    def call(self, call: Call, fname: str, where: str, stack) -> None:
        op = call.op
        label = _op_label(op)
        for i, a in enumerate(call.args):
            if not is_leaf(a):
                self.problem(
                    where, f"argument {i} of {label} is {brief(a, 60)}, not a variable (not in A-normal form)"
                )
        for a in reversed(call.args):
            stack.append((_EXPR, a, fname, where, False))
        ok = True
        if isinstance(op, GlobalVar):
            if op.name_hint not in self.mod:
                self.problem(where, f"calls function '{op.name_hint}', which is not in the module")
                return
            callee = self.mod[op.name_hint]
            params = getattr(callee, "params", ())
            if len(params) != len(call.args):
                self.problem(where, f"{label} takes {len(params)} arguments, got {len(call.args)}")
                ok = False
            if call.attrs:
                self.problem(where, f"a call to function '{op.name_hint}' cannot have attributes {sorted(call.attrs)}")
        elif isinstance(op, Var):
            self.use(op, fname, where)
            if op.struct_info is not None and not isinstance(op.struct_info, FuncStructInfo | ObjectStructInfo):
                self.problem(where, f"calls '{op.name_hint}' of type {_sinfo_text(op.struct_info)}, not a function")
            return
        elif isinstance(op, Op):
            ok = self.op_signature(call, op, label, where)
        else:
            self.problem(where, f"calls {type(op).__name__} {op!r}, which is neither an op nor a function")
            return
        # Non-normal-form calls are already reported; re-inferring them would emit helper bindings.
        if ok and self.check_sinfo and all(is_leaf(a) and a.struct_info is not None for a in call.args):
            self.reinfer(call, where, label)

    def op_signature(self, call: Call, op: Op, label: str, where: str) -> bool:
        ok = True
        specs = getattr(op, "args", None)
        if specs is not None:
            required = sum(1 for a in specs if not getattr(a, "optional", False))
            if not required <= len(call.args) <= len(specs):
                expected = f"{required}" if required == len(specs) else f"{required} to {len(specs)}"
                self.problem(where, f"{label} expects {expected} arguments, got {len(call.args)}")
                ok = False
        schema = getattr(op, "attrs_schema", None)
        if schema is not None:
            known = {a.name: a for a in schema}
            for key in call.attrs:
                if key not in known:
                    names = ", ".join(known) or "none"
                    self.problem(where, f"{label} has no attribute '{key}' (attributes: {names})")
                    ok = False
            for name, spec in known.items():
                if name not in call.attrs:
                    self.problem(where, f"{label} is missing attribute '{name}'")
                    ok = False
                    continue
                try:
                    spec.convert(call.attrs[name])
                except (TypeError, ValueError) as err:
                    self.problem(where, f"{label}: bad value {call.attrs[name]!r} for attribute '{name}': {err}")
                    ok = False
        return ok

    def reinfer(self, call: Call, where: str, label: str) -> None:
        op = call.op
        try:
            if isinstance(op, GlobalVar):
                gv = self.mod.get_global_var(op.name_hint)
                inferred = self.bb.normalize(Call(gv, call.args, call.attrs, span=call.span)).struct_info
            else:
                # Inference reads only the arguments' struct info and the attributes.
                inferred = op.infer_struct_info(call, self.bb)
        except DiagnosticError as err:
            self.problem(where, f"{label}: {err.message}")
            return
        except Exception as err:  # noqa: BLE001 - an inference bug must not hide the other problems
            self.problem(where, f"inference of {label} failed: {type(err).__name__}: {err}")
            return
        recorded = call.struct_info
        if recorded is not None and inferred is not None and not is_base_of(recorded, inferred):
            self.problem(
                where,
                f"{label} is annotated {_sinfo_text(recorded)} but inference gives {_sinfo_text(inferred)}",
            )


def _op_label(op) -> str:
    if isinstance(op, GlobalVar):
        return f"call to '{op.name_hint}'"
    if isinstance(op, Var):
        return f"call of '{op.name_hint}'"
    return op_script_name(op)


def _bool_scalar(s) -> bool:
    """A condition: a 0-d tensor (bool or integer; dtype/ndim may be unknown) or a bool/int prim value."""
    if isinstance(s, TensorStructInfo):
        if s.ndim not in (0, -1):
            return False
        return not s.dtype or not is_float_dtype(s.dtype)
    if isinstance(s, PrimStructInfo):
        return not is_float_dtype(s.dtype)
    return isinstance(s, ObjectStructInfo)


def well_formed(mod: IRModule, check_struct_info: bool = True) -> list[str]:
    """Every problem of `mod` (empty if it is well formed), each located by function, binding and span."""
    if not isinstance(mod, IRModule):
        if isinstance(mod, Function):
            mod = IRModule({"main": mod})
        else:
            return [f"expected an IRModule, got {type(mod).__name__}"]
    return _Checker(mod, check_struct_info).run()


def verify(mod: IRModule, check_struct_info: bool = True) -> IRModule:
    """Raise WellFormedError listing every problem; return `mod` when it is well formed."""
    problems = well_formed(mod, check_struct_info)
    if problems:
        raise WellFormedError(problems)
    return mod

