"""Expressions: values, Python operators, op and function calls, and the special forms (R.const, R.shape, ...)."""

from __future__ import annotations

import numpy as np

from retrograd.errors import DiagnosticError, NameError_, OpError, ParseError, Span, UnsupportedError, did_you_mean
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.expr import Call, Constant, PrimValue, ShapeExpr, StringImm, Tuple, TupleGetItem
from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo
from retrograd.ops.attr_types import DTYPES, UNSUPPORTED_DTYPES
from retrograd.ops.registry import lookup, op_suggestion
from retrograd.parser import literals as lit
from retrograd.parser.syntax import (
    K_ARITH,
    K_CALL,
    K_COMPARE,
    K_GETITEM,
    K_KWARG,
    K_LIST,
    K_LIT,
    K_NAME,
    K_NEG,
    K_NUM,
    K_POW,
    K_STR,
    K_TUPLE,
    Node,
    callee_name,
)

# Deeper values would recurse past Python's default stack; the printed form (annotations add two
# brackets) stays within the lexer's bracket limit.
MAX_VALUE_NESTING = 100
# The ops TVM 0.27's Relax Expr operator overloads make (tvm/relax/op/__init__.py); TVM compares
# Relax values by identity for == and !=, so its parser refuses them: here they mean equal / not_equal.
_ARITH_OPS = {"+": "relax.add", "-": "relax.subtract", "*": "relax.multiply", "/": "relax.divide",
              "//": "relax.floor_divide", "%": "relax.mod", "**": "relax.power",
              "<": "relax.less", "<=": "relax.less_equal", ">": "relax.greater", ">=": "relax.greater_equal",
              "==": "relax.equal", "!=": "relax.not_equal"}
_UNSUPPORTED_CALLS = frozenset((
    "R.call_tir", "R.call_tir_inplace", "R.call_tir_with_grad", "R.call_packed", "R.call_dps_packed",
    "R.call_pure_packed", "R.emit_te", "R.call_inplace_packed", "R.builtin.alloc_tensor",
))
_ANNOTATIONS = frozenset(("R.Tensor", "R.Tuple", "R.Shape", "R.Prim", "R.Object", "R.Any", "R.Callable"))


class ExpressionParser:
    """`_ScriptParser`'s part for expressions and calls."""

    # -- values -------------------------------------------------------------------------------
    def _value(self, node: Node):
        """An (unnormalized) expression; the BlockBuilder brings nested calls to normal form."""
        k = node.kind
        if k == K_NAME:
            return self._lookup(node)
        if k == K_NUM or k == K_STR or k == K_LIT:
            return self._leaf(node)
        if _is_leaf_form(node):
            # A constant, shape or string is a leaf of the IR: it adds no level, so that a module whose
            # names a pass replaced by constants still prints as text that parses back.
            return self._nested_value(node)
        # Values recurse (here and in the builder): their nesting is bounded, with a located error.
        self.depth += 1
        try:
            if self.depth > MAX_VALUE_NESTING:
                raise UnsupportedError(
                    f"values are nested too deeply (more than {MAX_VALUE_NESTING} levels): bind parts to names",
                    self.span(node),
                )
            return self._nested_value(node)
        finally:
            self.depth -= 1

    def _leaf(self, node: Node):
        k = node.kind
        if k == K_NUM:
            return self._prim(node.value, None, node)
        if k == K_LIT:
            if node.value is None:
                raise ParseError("None is not a value here", self.span(node))
            return self._prim(node.value, "bool", node)
        return StringImm(node.value, span=self.span(node))

    def _nested_value(self, node: Node):
        k = node.kind
        if k == K_CALL:
            return self._call(node)
        if k == K_TUPLE or k == K_LIST:
            return Tuple([self._value(x) for x in node.items], span=self.span(node))
        if k == K_GETITEM:
            base, index = node.value, node.items
            if _is_leaf_form(node):
                return self._metadata_ref(node)
            i = _int_literal(index)
            if i is None:
                raise ParseError("a tuple index is an integer literal", self.span(index))
            return TupleGetItem(self._value(base), i, span=self.span(node))
        if k == K_NEG:
            operand = node.items
            if operand.kind == K_NUM:
                return self._prim(-operand.value, None, node)
            return Call(lookup("relax.negative"), (self._value(operand),), {}, span=self.span(node))
        if k == K_ARITH:
            return self._arith(lit.resolve_arith(node.items), node)
        if k == K_POW:
            return self._arith(("**", node.items[0], node.items[1]), node)
        if k == K_COMPARE:
            if len(node.items) > 3:
                raise UnsupportedError("chained comparisons (a < b < c) are not supported: compare two values", self.span(node))
            return self._arith((node.items[1], node.items[0], node.items[2]), node)
        raise ParseError("expected a value", self.span(node))

    def _arith(self, tree, whole: Node):
        """Python operators on values, with an explicit stack: a flat sum nests as deep as it is long."""
        # A finished left operand is emitted at once (normalize_arg), a right one when its operator's
        # call is: bindings come in Python's evaluation order, as TVM's parser makes them.
        stack, values = [(tree, False, False)], []
        while stack:
            t, ready, is_lhs = stack.pop()
            if isinstance(t, Node):
                values.append(self._operand(self._value(t), is_lhs, t))
                continue
            if not ready:
                stack += [(t, True, is_lhs), (t[2], False, False), (t[1], False, True)]
                continue
            op_text, lhs, rhs = t
            b, a = values.pop(), values.pop()
            op = lookup(_ARITH_OPS[op_text])
            if op is None:
                raise OpError(f"operator {op_text} is not supported on values", self.span(whole))
            first, last = _first_node(lhs), _last_node(rhs)
            span = Span(self.source_name, first.line, first.col, last.end_line, last.end_col, self.text)
            # Normalized now, so the builder never recurses down a long chain.
            values.append(self._operand(Call(op, (a, b), op.normalize_attrs({}, span), span=span), is_lhs, whole))
        return values[0]

    def _operand(self, value, emit: bool, node: Node):
        if self.cur is None or not isinstance(value, Call):
            return value
        bb = self.cur.bb
        return self._guard(lambda: bb.normalize_arg(value) if emit else bb.normalize(value), node)

    def _prim(self, value, dtype, node: Node) -> PrimValue:
        if dtype is None:
            dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
        value = lit.prim_value(self.ctx, value, dtype, node)
        return PrimValue(value, dtype, PrimStructInfo(dtype, value), span=self.span(node))

    def _call(self, node: Node):
        func = node.value
        if func.kind != K_NAME:
            raise UnsupportedError("only calls of R.* ops and module functions are supported", self.span(func))
        fname = func.value
        special = _SPECIAL.get(fname)
        if special is not None:
            return special(self, node)
        if fname in _UNSUPPORTED_CALLS:
            callee = node.items[0] if node.items else None
            target = callee.value.rpartition(".")[2] if callee is not None and callee.kind == K_NAME else None
            if target in self.tir:
                self._tir_use(target, node)
            prefix = callee.value.rpartition(".")[0] if target is not None else ""
            if prefix and self._is_module_name(prefix) and target not in self.funcs:
                hint = did_you_mean(target, list(self.tir) + list(self.funcs))
                raise NameError_(f"the module has no function '{target}'{hint}", self.span(callee))
            raise UnsupportedError(f"{fname} is not supported (it calls TIR or packed functions, out of scope)", self.span(func))
        if fname in _ANNOTATIONS:
            raise ParseError(f"{fname}(...) is a struct info annotation, not a value", self.span(func))
        if fname.startswith("R."):
            op = lookup(fname)
            if op is None:
                raise OpError(f"unknown op {fname}{op_suggestion(fname)}", self.span(func))
            return self._op_call(op, node)
        if fname.startswith("T.") and fname[2:] in DTYPES:
            if len(node.items) != 1:
                raise ParseError(f"{fname}(value) takes one number", self.span(node))
            v = self.literal(node.items[0], f"the argument of {fname}")
            return self._prim(v, fname[2:], node)
        if fname.startswith("T.") and fname[2:] in UNSUPPORTED_DTYPES:
            raise UnsupportedError(UNSUPPORTED_DTYPES[fname[2:]], self.span(func))
        prefix, _, attr = fname.rpartition(".")
        if prefix and self._is_module_name(prefix):
            return self._global_call(attr, node)
        if fname in self.funcs:
            raise NameError_(f"call module functions as cls.{fname}(...) after `cls = Module`", self.span(func))
        raise NameError_(f"unknown function '{fname}'{did_you_mean(attr or fname, self.funcs)}", self.span(func))

    def _global_call(self, name: str, node: Node) -> Call:
        info = self.funcs.get(name)
        if info is None and name in self.tir:
            self._tir_use(name, node)
        if info is None:
            raise NameError_(f"the module has no function '{name}'{did_you_mean(name, self.funcs)}", self.span(node.value))
        gvar = self._gvar(info, node)
        args = []
        for a in node.items:
            if a.kind == K_KWARG:
                raise ParseError("module functions take positional arguments only", self.span(a))
            args.append(self._value(a))
        return Call(gvar, args, {}, span=self.span(node))

    def _tir_use(self, name: str, node: Node):
        raise UnsupportedError(
            f"'{name}' is a TIR function, kept as text only: retrograd cannot run or differentiate it",
            self.span(node),
            notes=[f"'{name}' is defined at {self.tir[name].span}"],
        )

    def _op_call(self, op, node: Node) -> Call:
        span = self.span(node)
        positional = []
        keywords: dict = {}
        for a in node.items:
            if a.kind == K_KWARG:
                if a.value in keywords:
                    raise OpError(f"{op.script_name}: '{a.value}' given twice", self.span(a))
                keywords[a.value] = _none_or(a.items)
            else:
                if keywords:
                    raise ParseError("positional argument after keyword arguments", self.span(a))
                positional.append(_none_or(a))
        args, attrs = op.bind(positional, keywords, span)
        ir_args = [self._arg(a, spec) for a, spec in zip(args, op.args)]
        attr_vals = {}
        for key, v in attrs.items():
            attr_vals[key] = None if v is None else self.literal(v, f"attribute '{key}' of {op.script_name}")
        try:
            call = op(*ir_args, span=span, **attr_vals)
        except DiagnosticError as err:
            if err.span is None:
                raise err.located(span) from None
            raise
        return _empty_constant(call) if op.name == "relax.zeros" else call

    def _arg(self, node: Node, spec):
        kind = spec.kind
        k = node.kind
        if kind == "shape" and (k == K_TUPLE or k == K_LIST):
            return self._shape_expr(node.items, node)
        if kind == "prim" and (k == K_NUM or (k == K_NEG and node.items.kind == K_NUM)):
            return self._value(node)
        return self._value(node)

    def _shape_expr(self, items: list[Node], node: Node) -> ShapeExpr:
        values = tuple(lit.dim(self.ctx, d, self._parse_dim_text, allow_negative=True) for d in items)
        return ShapeExpr(values, ShapeStructInfo(values), span=self.span(node))

    # -- special forms ------------------------------------------------------------------------
    def _args(self, node: Node, names: tuple[str, ...], required: int) -> list:
        fname = node.value.value
        vals: list = [None] * len(names)
        given = [False] * len(names)
        pos = 0
        for a in node.items:
            if a.kind == K_KWARG:
                if a.value not in names:
                    raise OpError(f"{fname} has no parameter '{a.value}' (parameters: {', '.join(names)})", self.span(a))
                i = names.index(a.value)
                if given[i]:
                    raise OpError(f"{fname}: '{a.value}' given twice", self.span(a))
                vals[i], given[i] = a.items, True
            else:
                if pos >= len(names):
                    raise OpError(f"{fname} takes at most {len(names)} arguments", self.span(a))
                vals[pos], given[pos] = a, True
                pos += 1
        for i in range(required):
            if not given[i]:
                raise OpError(f"{fname}: missing argument '{names[i]}'", self.span(node))
        return vals

    def _const(self, node: Node) -> Constant:
        value, dtype_node = self._args(node, ("value", "dtype"), 1)
        dtype = None
        if dtype_node is not None and not (dtype_node.kind == K_LIT and dtype_node.value is None):
            if dtype_node.kind != K_STR:
                raise OpError("R.const's dtype is a string such as \"float32\"", self.span(dtype_node))
            dtype = dtype_node.value
        data = lit.const_array(self.ctx, value, dtype, node)
        return Constant(data, TensorStructInfo(data.shape, str(data.dtype)), span=self.span(node))

    def _shape(self, node: Node) -> ShapeExpr:
        (values,) = self._args(node, ("values",), 1)
        if values.kind not in (K_LIST, K_TUPLE):
            raise ParseError("R.shape takes a list of dims such as [2, n]", self.span(values))
        return self._shape_expr(values.items, node)

    def _prim_value(self, node: Node) -> PrimValue:
        (value,) = self._args(node, ("value",), 1)
        v = self._value(value)
        if not isinstance(v, PrimValue):
            raise ParseError("R.prim_value takes a number, True/False or T.<dtype>(number)", self.span(value))
        return PrimValue(v.value, v.dtype, v.struct_info, span=self.span(node))

    def _str(self, node: Node) -> StringImm:
        (value,) = self._args(node, ("value",), 1)
        if value.kind != K_STR:
            raise ParseError("R.str takes a string literal", self.span(value))
        return StringImm(value.value, span=self.span(node))

    def _tuple(self, node: Node) -> Tuple:
        for a in node.items:
            if a.kind == K_KWARG:
                raise ParseError("R.tuple takes values only", self.span(a))
        return Tuple([self._value(a) for a in node.items], span=self.span(node))

    def _match_cast(self, node: Node) -> Call:
        value, target = self._args(node, ("value", "struct_info"), 2)
        sinfo = self.sinfo(target)  # new bare dim names must be declared first (`n = T.int64()`), as in TVM
        if not isinstance(sinfo, TensorStructInfo):
            raise UnsupportedError("R.match_cast casts to a tensor struct info, R.Tensor(...)", self.span(target))
        return lookup("relax.match_cast")(self._value(value), span=self.span(node), struct_info=sinfo)

    def _not_a_value(self, node: Node):
        fname = node.value.value
        raise ParseError(f"{fname}(...) is a statement, not a value", self.span(node))

    def _metadata_ref(self, node: Node) -> Constant:
        key_node, index = node.value.items, node.items
        if key_node.kind != K_STR:
            raise ParseError("metadata is indexed by a string key", self.span(key_node))
        consts = self.metadata.get(key_node.value)
        if consts is None:
            if not self.metadata:
                raise NameError_(
                    "metadata[...] is used but the script has no metadata section (TVM omits its own; "
                    "print the module with retrograd, or write the constant inline with R.const)",
                    self.span(node),
                )
            raise NameError_(f"the metadata section has no key {key_node.value!r}", self.span(key_node))
        i = _int_literal(index)
        if i is None or not 0 <= i < len(consts):
            raise NameError_(f"metadata[{key_node.value!r}] has {len(consts)} entries; no index {index.value!r}", self.span(index))
        return consts[i]


_SPECIAL = {
    "R.const": ExpressionParser._const,
    "R.shape": ExpressionParser._shape,
    "R.prim_value": ExpressionParser._prim_value,
    "R.str": ExpressionParser._str,
    "R.tuple": ExpressionParser._tuple,
    "R.match_cast": ExpressionParser._match_cast,
    "R.output": ExpressionParser._not_a_value,
    "R.dataflow": ExpressionParser._not_a_value,
    "R.func_attr": ExpressionParser._not_a_value,
}


_LEAF_CALLS = frozenset(("R.const", "R.shape", "R.str"))


def _is_leaf_form(node: Node) -> bool:
    """`R.const(...)`, `R.shape([...])`, `R.str(...)` or `metadata[key][i]`: written forms of IR leaves
    whose arguments are literals read without recursing into values."""
    if node.kind == K_CALL:
        return callee_name(node) in _LEAF_CALLS
    if node.kind == K_GETITEM:
        base = node.value
        return base.kind == K_GETITEM and base.value.kind == K_NAME and base.value.value == "metadata"
    return False


def _empty_constant(call: Call):
    """`R.zeros(R.shape([1, 0, 2]), dtype)` of a static empty shape is the constant of that shape: nested
    lists cannot spell such a constant (dims after an empty one are lost), so the printer writes empty
    constants this way and reading them back must give the same module (an empty tensor holds no value
    that a call and a constant could disagree on)."""
    shape = call.args[0] if call.args else None
    dtype = call.attrs.get("dtype")
    if not (isinstance(shape, ShapeExpr) and isinstance(dtype, str)):
        return call
    dims = tuple(shape.values)
    if not all(type(d) is int for d in dims) or 0 not in dims:
        return call
    try:
        data = np.zeros(dims, numpy_dtype(dtype))
    except (TypeError, ValueError, OverflowError, UnsupportedError):  # a dtype NumPy lacks, a bad dim: the call reports it
        return call
    return Constant(data, TensorStructInfo(dims, dtype), span=call.span)


def _none_or(node: Node):
    return None if node.kind == K_LIT and node.value is None else node


def _int_literal(node: Node) -> int | None:
    if node.kind == K_NUM and isinstance(node.value, int):
        return node.value
    if node.kind == K_NEG and node.items.kind == K_NUM and isinstance(node.items.value, int):
        return -node.items.value
    return None


def _first_node(tree) -> Node:
    while isinstance(tree, tuple):
        tree = tree[1]
    return tree


def _last_node(tree) -> Node:
    while isinstance(tree, tuple):
        tree = tree[2]
    return tree
