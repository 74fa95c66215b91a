"""BlockBuilder: the one way to build typed IR. Infers struct info on every emit and keeps A-normal form."""

from __future__ import annotations

import contextlib
import re

import numpy as np

from retrograd.errors import NameError_, TypeInferenceError
from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding, new_binding
from retrograd.ir.expr import (
    LEAF_TYPES,
    Call,
    Constant,
    DataflowVar,
    Expr,
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
    new_var,
)
from retrograd.ir.nested import all_pairs, postorder
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    is_base_of,
    map_leaves,
    unify,
)
from retrograd.ir.text import format_sinfo

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# Leaf classes (subclasses included) whose typed instances are already normalized arguments.
_TYPED_LEAVES = frozenset({Var, DataflowVar, GlobalVar, Constant, ShapeExpr, PrimValue, StringImm})

class _Scope:
    __slots__ = ("blocks", "bindings", "dataflow")

    def __init__(self):
        self.blocks: list[BindingBlock] = []
        self.bindings: list[VarBinding] | None = None  # the open block's bindings
        self.dataflow = False


class BlockBuilder:
    """Builds SeqExprs binding by binding. `global_sinfo` gives signatures of module functions."""

    def __init__(self, mod=None, global_sinfo: dict[str, StructInfo] | None = None):
        self._scopes: list[_Scope] = []
        self._normalized: dict[int, Expr] | None = None  # see _normalize_nested
        self._inferred: dict = {}  # see _infer_op
        self.global_sinfo: dict[str, StructInfo] = dict(global_sinfo or {})
        if mod is not None:
            for name, func in mod.items():
                self.global_sinfo.setdefault(name, func.struct_info)

    # -- scopes and blocks --------------------------------------------------
    def begin_scope(self) -> None:
        self._scopes.append(_Scope())

    def end_scope(self, body: Expr) -> SeqExpr:
        """Close the scope: the SeqExpr of its blocks with `body` (normalized to a leaf) as result."""
        scope = self._scopes[-1]
        if scope.bindings is not None and scope.dataflow:
            self.end_block()
        body = self.normalize_arg(body)
        if scope.bindings is not None:
            self.end_block()
        self._scopes.pop()
        return SeqExpr(tuple(scope.blocks), body, body.struct_info)

    def begin_block(self, dataflow: bool = False) -> None:
        scope = self._scopes[-1]
        if scope.bindings is not None:
            self.end_block()
        scope.bindings = []
        scope.dataflow = dataflow

    def end_block(self) -> None:
        scope = self._scopes[-1]
        if scope.bindings is None:
            return
        if scope.bindings:
            cls = DataflowBlock if scope.dataflow else BindingBlock
            prev = scope.blocks[-1] if scope.blocks else None
            if cls is BindingBlock and type(prev) is BindingBlock:
                # Adjacent plain blocks merge (as TVM's normalizer does): the text has no boundary between them.
                scope.blocks[-1] = BindingBlock(prev.bindings + tuple(scope.bindings))
            else:
                scope.blocks.append(cls(tuple(scope.bindings)))
        scope.bindings = None
        scope.dataflow = False

    @contextlib.contextmanager
    def dataflow(self):
        self.begin_block(dataflow=True)
        yield
        self.end_block()

    @property
    def in_dataflow(self) -> bool:
        return bool(self._scopes) and self._scopes[-1].bindings is not None and self._scopes[-1].dataflow

    def current_bindings(self) -> list[VarBinding]:
        """The open block's bindings (a block is opened if none is). A rewrite that must change a
        binding it already emitted (e.g. rebind it to another var) replaces its entry in this list."""
        if not self._scopes:
            raise RuntimeError("BlockBuilder: emit outside of a scope (call begin_scope first)")
        scope = self._scopes[-1]
        if scope.bindings is None:
            scope.bindings = []
            scope.dataflow = False
        return scope.bindings

    # -- emission -----------------------------------------------------------
    def emit(self, expr: Expr, name_hint: str = "lv", span=None) -> Var:
        """Normalize `expr`, bind it to a fresh var (a DataflowVar inside a dataflow block), return the var."""
        value = self.normalize(expr)
        bindings = self.current_bindings()
        var = new_var(DataflowVar if self._scopes[-1].dataflow else Var, name_hint, value.struct_info, span)
        bindings.append(new_binding(var, value, span))
        return var

    def emit_output(self, expr: Expr, name_hint: str = "gv", span=None) -> Var:
        """Inside a dataflow block: bind to a Var visible after the block."""
        cls = expr.__class__
        # A var with struct info is its own normal form (a gradient's outputs are vars).
        value = expr if (cls is DataflowVar or cls is Var) and expr.struct_info is not None else self.normalize(expr)
        var = new_var(Var, name_hint, value.struct_info, span)
        self.current_bindings().append(new_binding(var, value, span))
        return var

    def emit_binding(self, binding: VarBinding) -> None:
        """Append an already-normalized binding as is."""
        self.current_bindings().append(binding)

    def bind(self, var: Var, expr: Expr, span=None) -> VarBinding:
        """Bind an existing var (e.g. annotated by the user) to a normalized value."""
        value = self.normalize(expr)
        binding = VarBinding(var, value, span=span)
        self.current_bindings().append(binding)
        return binding

    # -- normalization ------------------------------------------------------
    def normalize_arg(self, expr: Expr) -> Expr:
        """A leaf (or tuple of leaves): nested non-leaf expressions are emitted as bindings."""
        if isinstance(expr, LEAF_TYPES):
            return self.normalize(expr) if expr.struct_info is None else expr
        done = self._normalized
        if done is not None:
            hit = done.get(id(expr))
            if hit is not None:
                return hit
        return self._normalize_nested(expr)

    def _normalize_nested(self, root: Expr) -> Expr:
        """normalize_arg of a composite expression without recursion: tuples, getitems and calls may nest
        thousands deep. Its composite sub-expressions are normalized children first; each result is
        kept by the id of the node (which `root` keeps alive), where the parent's normalize_arg finds
        it. A sub-expression reached twice is emitted once."""
        outer = self._normalized
        done = self._normalized = {}
        try:
            for node in postorder(root, _composite_args):
                if isinstance(node, Tuple):
                    out = self.normalize(node)
                else:
                    out = self.emit(node, span=node.span)
                done[id(node)] = out
        finally:
            self._normalized = outer
        return out

    def normalize(self, expr: Expr) -> Expr:
        """Fill struct info, bringing call arguments to normal form first."""
        if expr.__class__ is Call:  # the common case first: every emitted op call
            return self._normalize_call(expr)
        if isinstance(expr, Var | GlobalVar):
            if expr.struct_info is None:
                if isinstance(expr, GlobalVar) and expr.name_hint in self.global_sinfo:
                    return GlobalVar(expr.name_hint, self.global_sinfo[expr.name_hint], span=expr.span)
                raise NameError_(f"variable '{expr.name_hint}' has no struct info", expr.span)
            return expr
        if isinstance(expr, Constant):
            if expr.struct_info is not None:
                return expr
            data = np.asarray(expr.data)
            return Constant(data, TensorStructInfo(data.shape, str(data.dtype)), span=expr.span)
        if isinstance(expr, ShapeExpr):
            return expr if expr.struct_info is not None else ShapeExpr(expr.values, ShapeStructInfo(expr.values), span=expr.span)
        if isinstance(expr, PrimValue):
            if expr.struct_info is not None:
                return expr
            return PrimValue(expr.value, expr.dtype, PrimStructInfo(expr.dtype, expr.value), span=expr.span)
        if isinstance(expr, StringImm):
            return expr if expr.struct_info is not None else StringImm(expr.value, ObjectStructInfo(), span=expr.span)
        if isinstance(expr, Tuple):
            fields = tuple(self.normalize_arg(f) for f in expr.fields)
            if expr.struct_info is not None and all(a is b for a, b in zip(fields, expr.fields)):
                return expr
            return Tuple(fields, TupleStructInfo(tuple(f.struct_info for f in fields)), span=expr.span)
        if isinstance(expr, TupleGetItem):
            tup = self.normalize_arg(expr.tuple_value)
            if expr.struct_info is not None and tup is expr.tuple_value:
                return expr
            return TupleGetItem(tup, expr.index, self._infer_getitem(tup, expr.index, expr.span), span=expr.span)
        if isinstance(expr, Call):
            return self._normalize_call(expr)
        if isinstance(expr, If):
            cond = self.normalize_arg(expr.cond)
            tb = self._normalize_branch(expr.true_branch)
            fb = self._normalize_branch(expr.false_branch)
            if expr.struct_info is not None and (cond, tb, fb) == (expr.cond, expr.true_branch, expr.false_branch):
                return expr
            return If(cond, tb, fb, unify(tb.struct_info, fb.struct_info), span=expr.span)
        if isinstance(expr, SeqExpr):
            if expr.struct_info is not None:
                return expr
            return SeqExpr(expr.blocks, expr.body, expr.body.struct_info, span=expr.span)
        if isinstance(expr, Function):
            return expr
        raise TypeError(f"cannot normalize {type(expr).__name__}")

    def _normalize_branch(self, branch: Expr) -> SeqExpr:
        if isinstance(branch, SeqExpr):
            return self.normalize(branch)
        self.begin_scope()
        return self.end_scope(branch)

    def _normalize_call(self, call: Call) -> Call:
        changed = False
        args = []
        for a in call.args:
            # A leaf with struct info is its own normal form (normalize_arg's first case, inline).
            b = a if a.__class__ in _TYPED_LEAVES and a.struct_info is not None else self.normalize_arg(a)
            changed = changed or b is not a
            args.append(b)
        args = tuple(args)
        op = call.op
        if isinstance(op, GlobalVar):
            op = self.normalize(op)
        if call.struct_info is not None and op is call.op and not changed:
            return call
        if isinstance(op, Op):
            sinfo = self._infer_op(op, args, call)
        else:
            sinfo = self._infer_global_call(Call(op, args, call.attrs, span=call.span))
        return Call(op, args, call.attrs, sinfo, span=call.span)

    def _infer_op(self, op: Op, args: tuple, call: Call) -> StructInfo:
        """An op call's struct info, remembered by (op, the arguments' struct info, attributes): op
        inference reads nothing else (InferCtx), and programs repeat the same call shapes (every
        layer of a network, each adjoint's rules), so most calls a pass emits skip inference."""
        key = _inference_key(op, args, call.attrs)
        if key is not None:
            hit = self._inferred.get(key)
            if hit is not None:
                return hit
        sinfo = op.infer_struct_info(Call(op, args, call.attrs, span=call.span), self)
        if key is not None:
            self._inferred[key] = sinfo
        return sinfo

    def _infer_getitem(self, tup: Expr, index: int, span) -> StructInfo:
        s = tup.struct_info
        if not isinstance(s, TupleStructInfo):
            raise TypeInferenceError(f"cannot index a non-tuple value of type {type(s).__name__}", span)
        if not -len(s.fields) <= index < len(s.fields):
            raise TypeInferenceError(f"tuple index {index} out of range for a tuple of {len(s.fields)} fields", span)
        return s.fields[index]

    def _infer_global_call(self, call: Call) -> StructInfo:
        fsig = call.op.struct_info
        name = call.op.name_hint
        if not isinstance(fsig, FuncStructInfo):
            return ObjectStructInfo()
        if len(fsig.params) != len(call.args):
            raise TypeInferenceError(
                f"function '{name}' takes {len(fsig.params)} arguments, got {len(call.args)}", call.span
            )
        binding: dict[str, object] = {}
        for i, (p, a) in enumerate(zip(fsig.params, call.args)):
            if not _match_param(p, a.struct_info, binding):
                raise TypeInferenceError(
                    f"argument {i} of call to '{name}' has type {format_sinfo(a.struct_info, brief=True)}, expected {format_sinfo(p, brief=True)}",
                    call.span,
                )
        return substitute_dims(fsig.ret, binding)


def _inference_key(op: Op, args: tuple, attrs: dict):
    """A hashable key of what op inference reads, or None when an attribute cannot be keyed. Value
    types are part of it (1, 1.0 and True are equal keys but may infer differently)."""
    values = []
    for k, v in attrs.items():
        if v.__class__ is list:
            v = ("list", *v)
        values.append((k, v.__class__, v))
    # The argument's class too: a few inferences accept a literal (PrimValue) where a var of the same
    # struct info is refused.
    key = (op, tuple([(a.__class__, a.struct_info) for a in args]), tuple(values))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _match_param(param: StructInfo, arg: StructInfo, binding: dict) -> bool:
    """Check an argument against a parameter, binding the parameter's symbolic dims."""
    if isinstance(param, TensorStructInfo) and isinstance(arg, TensorStructInfo):
        return _match_tensor(param, arg, binding)
    return all_pairs(param, arg, lambda p, a: _match_step(p, a, binding))


def _match_tensor(param: TensorStructInfo, arg: TensorStructInfo, binding: dict) -> bool:
    if param.dtype and arg.dtype and param.dtype != arg.dtype:
        return False
    if param.ndim != -1 and arg.ndim != -1 and param.ndim != arg.ndim:
        return False
    if param.shape is not None and arg.shape is not None:
        for p, a in zip(param.shape, arg.shape):
            if isinstance(p, int):
                if isinstance(a, int) and a != p:
                    return False
            elif _IDENT.match(p):
                if binding.setdefault(p, a) != a:
                    return False
    return True


def _match_step(param: StructInfo, arg: StructInfo, binding: dict):
    if isinstance(param, TupleStructInfo) and isinstance(arg, TupleStructInfo):
        return len(param.fields) == len(arg.fields) and list(zip(param.fields, arg.fields))
    if isinstance(param, TensorStructInfo) and isinstance(arg, TensorStructInfo):
        return _match_tensor(param, arg, binding)
    return is_base_of(param, arg) or isinstance(param, ObjectStructInfo)


def _composite_args(expr: Expr) -> tuple:
    """The sub-expressions normalize_arg must bring to normal form before `expr` itself."""
    if isinstance(expr, Tuple):
        kids = expr.fields
    elif isinstance(expr, TupleGetItem):
        kids = (expr.tuple_value,)
    elif isinstance(expr, Call):
        kids = expr.args
    elif isinstance(expr, If):
        kids = (expr.cond,)
    else:
        return ()
    return tuple(k for k in kids if not isinstance(k, LEAF_TYPES))


def substitute_dims(s: StructInfo, binding: dict) -> StructInfo:
    """Replace symbolic dims named in `binding` by their values."""
    if not binding:
        return s
    return map_leaves(s, lambda leaf: _substitute_leaf(leaf, binding))


def _substitute_leaf(s: StructInfo, binding: dict) -> StructInfo:
    if isinstance(s, TensorStructInfo) and s.shape is not None:
        return TensorStructInfo(tuple(binding.get(d, d) if isinstance(d, str) else d for d in s.shape), s.dtype)
    if isinstance(s, ShapeStructInfo) and s.values is not None:
        return ShapeStructInfo(tuple(binding.get(d, d) if isinstance(d, str) else d for d in s.values))
    return s
