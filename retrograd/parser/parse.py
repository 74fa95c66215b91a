"""Syntax nodes -> typed IR through BlockBuilder: scopes and names, functions, blocks, op calls, located errors."""

from __future__ import annotations

from pathlib import Path

from retrograd.errors import (
    DiagnosticError,
    NameError_,
    OpError,
    ParseError,
    Span,
    TypeInferenceError,
    UnsupportedError,
)
from retrograd.gc_pause import collector_paused
from retrograd.ir.block import VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    PrimValue,
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
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
    is_base_of,
)
from retrograd.ir.text import format_sinfo
from retrograd.ops.attr_types import DTYPES
from retrograd.ops.registry import lookup
from retrograd.parser import literals as lit
from retrograd.parser.literals import Ctx, NotLiteral
from retrograd.parser.syntax import (
    K_ARITH,
    K_ASSIGN,
    K_CALL,
    K_CLASS,
    K_DICT,
    K_EXPR,
    K_FUNC,
    K_GETITEM,
    K_IF,
    K_KWARG,
    K_LIST,
    K_LIT,
    K_NAME,
    K_NEG,
    K_NUM,
    K_RETURN,
    K_STR,
    K_TOP_ASSIGN,
    K_TUPLE,
    K_WITH,
    Node,
    parse_syntax,
)

__all__ = ["parse", "parse_file"]

_MODULE_DECORATORS = frozenset(("I.ir_module", "tvm.script.ir_module", "ir_module", "tvm.script.ir.ir_module"))
_FUNC_DECORATORS = frozenset(("R.function", "tvm.script.relax.function", "relax.function"))
_ARITH_OPS = {"+": "relax.add", "-": "relax.subtract", "*": "relax.multiply", "/": "relax.divide",
              "//": "relax.floor_divide", "%": "relax.floor_mod"}
_UNSUPPORTED_CALLS = frozenset((
    "R.call_tir", "R.call_tir_inplace", "R.call_tir_with_grad", "R.call_packed", "R.call_dps_packed",
    "R.call_pure_packed", "R.match_cast", "R.emit_te", "R.call_inplace_packed", "R.builtin.alloc_tensor",
))
_ANNOTATIONS = frozenset(("R.Tensor", "R.Tuple", "R.Shape", "R.Prim", "R.Object", "R.Any", "R.Callable"))


class _ModuleRef:
    """What `cls = Module` binds: the module itself, for `cls.f(x)` calls."""


MODULE = _ModuleRef()


def parse(text: str, source_name: str = "<string>") -> IRModule:
    """Parse script text into an IRModule. Never evaluates Python; errors are DiagnosticErrors."""
    if not isinstance(text, str):
        raise TypeError(f"parse() takes the script text as a str, got {type(text).__name__}")
    try:
        with collector_paused():
            nodes = parse_syntax(text, source_name)
            return _ScriptParser(text, source_name).module(nodes)
    except RecursionError:
        # Binding sequences are iterated; only expressions nested thousands deep recurse this far.
        raise UnsupportedError(f"{source_name}: expressions are nested too deeply to parse", None) from None


def parse_file(path) -> IRModule:
    """Parse a script file; errors name the file."""
    p = Path(path)
    return parse(p.read_text(), source_name=str(path))


class _FuncInfo:
    """A function of the script: its signature first (any call order works), its body on demand."""

    __slots__ = ("node", "name", "params", "ret_ann", "ret", "is_pure", "private", "gvar", "func", "state")

    def __init__(self, node: Node, name: str):
        self.node = node
        self.name = name
        self.params: list[Var] = []
        self.ret_ann = None
        self.ret = None
        self.is_pure = True
        self.private = False
        self.gvar: GlobalVar | None = None
        self.func: Function | None = None
        self.state = "declared"


class _FuncState:
    """Per-function parsing state (saved while another function's body is parsed on demand)."""

    __slots__ = ("bb", "scopes", "dead", "info")

    def __init__(self, info: _FuncInfo):
        self.info = info
        self.bb = BlockBuilder()
        self.scopes: list[dict] = []
        # Names of dataflow vars whose block has ended: for a precise message when used later.
        self.dead: dict[str, Node] = {}


class _ScriptParser:
    def __init__(self, text: str, source_name: str):
        self.ctx = Ctx(text, source_name)
        self.text = text
        self.source_name = source_name
        self.class_name: str | None = None
        self.metadata: dict[str, list] = {}
        self.funcs: dict[str, _FuncInfo] = {}
        self.mod_attrs: dict = {}
        self.cur: _FuncState | None = None

    # -- helpers ------------------------------------------------------------------------------
    def span(self, node: Node) -> Span:
        return Span(self.source_name, node.line, node.col, node.end_line, node.end_col, self.text)

    def _parse_dim_text(self, text: str, node: Node) -> Node:
        """A symbolic dim written as a string ("n + 1"): read it with the same grammar."""
        try:
            nodes = parse_syntax(f"_d = {text}\n", self.source_name)
        except DiagnosticError:
            raise TypeInferenceError(f"cannot read dimension {text!r}", self.span(node)) from None
        inner = nodes[0].items[0]
        # Errors inside the string point at the string itself.
        _relocate(inner, node)
        return inner

    def sinfo(self, node: Node):
        return lit.struct_info(self.ctx, node, self._parse_dim_text)

    def dim(self, node: Node):
        return lit.dim(self.ctx, node, self._parse_dim_text)

    def literal(self, node: Node, what: str):
        try:
            return lit.literal(node)
        except NotLiteral as err:
            raise OpError(f"{what} must be a literal (number, string, True/False/None, list)", self.span(err.node)) from None

    # -- module -------------------------------------------------------------------------------
    def module(self, nodes: list[Node]) -> IRModule:
        classes = [n for n in nodes if n.kind == K_CLASS]
        funcs = [n for n in nodes if n.kind == K_FUNC]
        for n in nodes:
            if n.kind == K_TOP_ASSIGN:
                self._top_assign(n)
        if len(classes) > 1:
            raise UnsupportedError("a script holds one module (one @I.ir_module class)", self.span(classes[1]))
        if classes and funcs:
            raise UnsupportedError("a function outside the module class", self.span(funcs[0]))
        if classes:
            cls = classes[0]
            decorators, items = cls.items
            self._check_module_decorators(cls, decorators)
            self.class_name = cls.value
            funcs = []
            for item in items:
                if item.kind == K_FUNC:
                    funcs.append(item)
                else:
                    self._class_statement(item)
        elif not funcs:
            raise ParseError("the script defines no module (@I.ir_module class) and no @R.function", None)
        for f in funcs:
            self._declare(f)
        for info in self.funcs.values():
            if info.state == "declared":
                self._function(info)
        return IRModule({name: info.func for name, info in self.funcs.items()}, self.mod_attrs)

    def _top_assign(self, node: Node) -> None:
        value = node.items[0]
        if node.value == "metadata":
            self._metadata_section(value)
            return
        if value.kind == K_CALL and value.value.kind == K_NAME:
            callee = value.value.value
            # `n = TypeVar("n")` (TVM's printer) and `n = T.int64()` declare symbolic dims: nothing to do.
            if callee in ("TypeVar", "typing.TypeVar") or (callee.startswith("T.") and callee[2:] in DTYPES):
                return
        raise UnsupportedError(
            f"top-level assignment to '{node.value}': only `metadata = {{...}}` and symbolic dim declarations "
            "(`n = T.int64()`) may stand outside the module",
            self.span(node),
        )

    def _metadata_section(self, node: Node) -> None:
        if node.kind != K_DICT:
            raise ParseError("metadata is a dict literal: {\"relax.expr.Constant\": [R.const(...), ...]}", self.span(node))
        for key_node, entries in node.items:
            if key_node.kind != K_STR or entries.kind not in (K_LIST, K_TUPLE):
                raise ParseError("metadata maps a string key to a list of R.const(...)", self.span(key_node))
            consts = []
            for e in entries.items:
                if not (e.kind == K_CALL and e.value.kind == K_NAME and e.value.value == "R.const"):
                    raise ParseError("a metadata entry is an R.const(...)", self.span(e))
                consts.append(self._const(e))
            self.metadata[key_node.value] = consts

    def _check_module_decorators(self, cls: Node, decorators: list[Node]) -> None:
        for d in decorators:
            name = d.value.value if d.kind == K_CALL and d.value.kind == K_NAME else d.value if d.kind == K_NAME else None
            if name not in _MODULE_DECORATORS:
                raise UnsupportedError("a module class is decorated with @I.ir_module", self.span(d))
            if d.kind == K_CALL:
                for a in d.items:
                    if a.kind != K_KWARG or a.value not in ("s_tir", "check_well_formed"):
                        raise UnsupportedError("@I.ir_module takes only s_tir= and check_well_formed=", self.span(a))
        if not decorators:
            raise UnsupportedError("a module class is decorated with @I.ir_module", self.span(cls))

    def _class_statement(self, node: Node) -> None:
        if node.kind == K_EXPR:
            e = node.items
            if e.kind == K_STR:
                return  # docstring
            if e.kind == K_CALL and e.value.kind == K_NAME and e.value.value == "I.module_attrs":
                if len(e.items) != 1 or e.items[0].kind != K_DICT:
                    raise ParseError("I.module_attrs takes one dict literal", self.span(e))
                self.mod_attrs.update(self.literal(e.items[0], "a module attribute"))
                return
        raise UnsupportedError("a module class holds @R.function definitions and I.module_attrs({...})", self.span(node))

    # -- functions ----------------------------------------------------------------------------
    def _declare(self, node: Node) -> None:
        name = node.value
        decorators, params, ret, _body = node.items
        if name in self.funcs:
            raise NameError_(f"function '{name}' is defined twice", self.span(node))
        info = _FuncInfo(node, name)
        self._function_decorators(info, decorators, node)
        seen: dict[str, Node] = {}
        for p in params:
            if p.value in seen:
                raise NameError_(f"parameter '{p.value}' is defined twice", self.span(p))
            if "." in p.value:
                raise ParseError(f"'{p.value}' is not a parameter name", self.span(p))
            seen[p.value] = p
            if p.items is None:
                raise TypeInferenceError(f"parameter '{p.value}' needs a struct info annotation such as R.Tensor((3,), \"float32\")", self.span(p))
            info.params.append(Var(p.value, self.sinfo(p.items), span=self.span(p)))
        if ret is not None:
            info.ret_ann = info.ret = self.sinfo(ret)
        self.funcs[name] = info

    def _function_decorators(self, info: _FuncInfo, decorators: list[Node], node: Node) -> None:
        found = False
        for d in decorators:
            callee = d.value if d.kind == K_CALL else d
            name = callee.value if callee.kind == K_NAME else None
            if name not in _FUNC_DECORATORS:
                raise UnsupportedError(f"only @R.function functions are supported, not @{name or '...'}", self.span(d))
            found = True
            if d.kind == K_CALL:
                for a in d.items:
                    if a.kind != K_KWARG or a.value not in ("private", "pure", "check_well_formed"):
                        raise UnsupportedError("@R.function takes private=, pure= and check_well_formed=", self.span(a))
                    v = self.literal(a.items, f"@R.function's {a.value}")
                    if not isinstance(v, bool):
                        raise OpError(f"@R.function's {a.value} is True or False", self.span(a.items))
                    if a.value == "private":
                        info.private = v
                    elif a.value == "pure":
                        info.is_pure = v
        if not found:
            raise UnsupportedError(f"function '{info.name}' needs the @R.function decorator", self.span(node))

    def _gvar(self, info: _FuncInfo, node: Node) -> GlobalVar:
        if info.gvar is None:
            if info.ret is None:
                if info.state == "parsing":
                    raise TypeInferenceError(
                        f"recursive call to '{info.name}', whose result type is unknown: annotate its return (-> ...)",
                        self.span(node),
                    )
                self._function(info)
            sinfo = FuncStructInfo(tuple(p.struct_info for p in info.params), info.ret, info.is_pure)
            info.gvar = GlobalVar(info.name, sinfo, span=self.span(info.node))
        return info.gvar

    def _function(self, info: _FuncInfo) -> None:
        info.state = "parsing"
        saved = self.cur
        self.cur = st = _FuncState(info)
        st.scopes.append({p.name_hint: p for p in info.params})
        bb = st.bb
        bb.begin_scope()
        stmts = info.node.items[3]
        attrs: dict = {}
        start = 0
        while start < len(stmts):
            s = stmts[start]
            if s.kind == K_EXPR and s.items.kind == K_STR:
                start += 1  # docstring
            elif s.kind == K_EXPR and _callee(s.items) == "R.func_attr":
                e = s.items
                if len(e.items) != 1 or e.items[0].kind != K_DICT:
                    raise ParseError("R.func_attr takes one dict literal", self.span(e))
                attrs.update(self.literal(e.items[0], "a function attribute"))
                start += 1
            else:
                break
        last = stmts[-1]
        if last.kind != K_RETURN:
            raise ParseError(f"function '{info.name}' must end with a return statement", self.span(last))
        for s in stmts[start:-1]:
            self._statement(s)
        if last.items is None:
            raise ParseError("return needs a value", self.span(last))
        result = self._value(last.items)
        seq = self._guard(lambda: bb.end_scope(result), last)
        ret = seq.struct_info
        if info.ret_ann is not None:
            ret = self._refine(info.ret_ann, ret, info.node.items[2])
        info.ret = ret
        info.func = Function(
            tuple(info.params), seq, ret, info.is_pure, info.private, attrs, span=self.span(info.node)
        )
        info.state = "done"
        self.cur = saved

    # -- statements ---------------------------------------------------------------------------
    def _statement(self, s: Node) -> None:
        k = s.kind
        if k == K_ASSIGN:
            self._assign(s)
        elif k == K_WITH:
            self._dataflow(s)
        elif k == K_IF:
            self._if(s)
        elif k == K_EXPR:
            e = s.items
            callee = _callee(e)
            if callee == "R.output":
                raise ParseError("R.output(...) may only end a `with R.dataflow():` block", self.span(e))
            if callee == "R.func_attr":
                raise ParseError("R.func_attr(...) must come first in the function body", self.span(e))
            if e.kind == K_STR:
                return
            self._bind("_", self._value(e), None, s, s, output=False)
        elif k == K_RETURN:
            raise ParseError("return must be the last statement of the function body", self.span(s))
        else:  # pragma: no cover - the grammar has no other statements
            raise UnsupportedError(f"unsupported statement ({k})", self.span(s))

    def _assign(self, s: Node, output: bool = False) -> Var | None:
        target = s.value
        ann_node, value_node = s.items
        name = target.value
        if "." in name:
            raise ParseError(f"cannot assign to '{name}': a binding defines a plain name", self.span(target))
        if value_node.kind == K_NAME and ann_node is None and self._is_module_name(value_node.value):
            self.cur.scopes[-1][name] = MODULE  # `cls = Module`
            return None
        callee = _callee(value_node)
        if callee is not None and callee.startswith("T.") and callee[2:] in DTYPES and not value_node.items:
            return None  # `n = T.int64()`: declares a symbolic dim, which needs no declaration here
        ann = self.sinfo(ann_node) if ann_node is not None else None
        expr = self._value(value_node)
        var = self._bind(name, expr, ann, s, target, output, ann_node)
        self.cur.scopes[-1][name] = var
        return var

    def _bind(self, name, expr, ann, stmt: Node, target: Node, output: bool, ann_node: Node | None = None) -> Var:
        bb = self.cur.bb
        value = self._guard(lambda: bb.normalize(expr), stmt)
        sinfo = value.struct_info
        if ann is not None:
            sinfo = self._refine(ann, sinfo, ann_node)
        cls = DataflowVar if (bb.in_dataflow and not output) else Var
        var = cls(name, sinfo, span=self.span(target))
        bb.emit_binding(VarBinding(var, value, span=self.span(stmt)))
        return var

    def _guard(self, fn, node: Node):
        """Run a builder step; an error without a location gets this node's."""
        try:
            return fn()
        except DiagnosticError as err:
            if err.span is None:
                raise _relocated(err, self.span(node)) from None
            raise
        except RecursionError:
            raise
        except Exception as err:  # noqa: BLE001 - an op's inference failed unexpectedly: still located
            raise TypeInferenceError(f"{type(err).__name__}: {err}", self.span(node)) from None

    def _refine(self, ann, inferred, ann_node: Node | None):
        """The struct info a var gets: the annotation, checked against inference (equivalent: inferred)."""
        if ann == inferred:
            return inferred
        if is_base_of(ann, inferred):
            return inferred if is_base_of(inferred, ann) else ann
        if _may_be_base(ann, inferred):
            return ann
        raise TypeInferenceError(
            f"annotation {format_sinfo(ann)} does not match the inferred {format_sinfo(inferred)}",
            self.span(ann_node) if ann_node is not None else None,
        )

    def _dataflow(self, s: Node) -> None:
        st = self.cur
        ctx_node = s.value
        if _callee(ctx_node) != "R.dataflow" or ctx_node.items:
            raise UnsupportedError("the only `with` statement is `with R.dataflow():`", self.span(ctx_node))
        if st.bb.in_dataflow:
            raise ParseError("dataflow blocks cannot be nested", self.span(s))
        stmts = s.items
        names: list[Node] = []
        body = stmts
        last = stmts[-1]
        if last.kind == K_EXPR and _callee(last.items) == "R.output":
            body = stmts[:-1]
            for a in last.items.items:
                if a.kind != K_NAME or "." in a.value:
                    raise ParseError("R.output lists variable names", self.span(a))
                names.append(a)
        last_assign: dict[str, int] = {}
        for i, b in enumerate(body):
            k = b.kind
            if k == K_ASSIGN:
                last_assign[b.value.value] = i
            elif k == K_IF:
                raise UnsupportedError("an if statement cannot stand inside a dataflow block (as in Relax)", self.span(b))
            elif k == K_WITH:
                raise ParseError("dataflow blocks cannot be nested", self.span(b))
            elif k == K_RETURN:
                raise ParseError("return cannot stand inside a dataflow block", self.span(b))
        outputs: dict[int, str] = {}
        for n in names:
            i = last_assign.get(n.value)
            if i is None:
                where = "is not defined" if self._find(n.value) is None else "is not bound in this dataflow block"
                raise NameError_(f"R.output lists '{n.value}', which {where}", self.span(n))
            if i in outputs:
                raise NameError_(f"R.output lists '{n.value}' twice", self.span(n))
            outputs[i] = n.value
        st.bb.begin_block(dataflow=True)
        st.scopes.append({})
        for i, b in enumerate(body):
            if b.kind == K_ASSIGN:
                self._assign(b, output=i in outputs)
            else:
                self._statement(b)
        st.bb.end_block()
        scope = st.scopes.pop()
        outer = st.scopes[-1]
        for name, var in scope.items():
            if isinstance(var, DataflowVar):
                st.dead[name] = var
        for name in outputs.values():
            outer[name] = scope[name]

    def _if(self, s: Node) -> None:
        st = self.cur
        if st.bb.in_dataflow:
            raise UnsupportedError("an if statement cannot stand inside a dataflow block (as in Relax)", self.span(s))
        then_stmts, else_stmts = s.items
        if else_stmts is None:
            raise UnsupportedError("an if statement needs an else branch (both branches bind the result)", self.span(s))
        cond = self._guard(lambda: st.bb.normalize_arg(self._value(s.value)), s.value)
        cs = cond.struct_info
        if not (
            (isinstance(cs, TensorStructInfo) and cs.ndim in (0, -1) and cs.dtype in ("bool", ""))
            or (isinstance(cs, PrimStructInfo) and cs.dtype == "bool")
        ):
            raise TypeInferenceError(
                f"the condition of an if is a scalar bool tensor, R.Tensor((), \"bool\"), got {format_sinfo(cs)}",
                self.span(s.value),
            )
        tb, tname, tann, tlast = self._branch(then_stmts, s)
        fb, fname, fann, flast = self._branch(else_stmts, s)
        if tname != fname:
            raise NameError_(
                f"both branches of an if must end by assigning the same variable, got '{tname}' and '{fname}'",
                self.span(flast.value),
            )
        node = If(cond, tb, fb, span=self.span(s))
        value = self._guard(lambda: st.bb.normalize(node), s)
        sinfo = value.struct_info
        if tann is not None and tann == fann:
            sinfo = self._refine(tann, sinfo, tlast.items[0])
        var = Var(tname, sinfo, span=self.span(tlast.value))
        st.bb.emit_binding(VarBinding(var, value, span=self.span(s)))
        st.scopes[-1][tname] = var

    def _branch(self, stmts: list[Node], if_node: Node):
        st = self.cur
        last = stmts[-1]
        if last.kind != K_ASSIGN:
            raise ParseError("each branch of an if must end by assigning the result variable", self.span(last))
        st.bb.begin_scope()
        st.scopes.append({})
        try:
            for b in stmts[:-1]:
                self._statement(b)
            ann_node, value_node = last.items
            ann = self.sinfo(ann_node) if ann_node is not None else None
            expr = self._value(value_node)
            if is_leaf(expr):
                result = self._guard(lambda: st.bb.normalize(expr), last)
                if ann is not None:
                    self._refine(ann, result.struct_info, ann_node)
            else:
                result = self._bind(last.value.value, expr, ann, last, last.value, False, ann_node)
            seq = self._guard(lambda: st.bb.end_scope(result), last)
        finally:
            st.scopes.pop()
        return seq, last.value.value, ann, last

    # -- names --------------------------------------------------------------------------------
    def _find(self, name: str):
        for scope in reversed(self.cur.scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def _is_module_name(self, name: str) -> bool:
        found = self._find(name) if self.cur is not None else None
        if found is not None:
            return found is MODULE
        return name == self.class_name and self.class_name is not None

    def _lookup(self, node: Node):
        name = node.value
        v = self._find(name)
        if v is not None:
            if v is MODULE:
                raise NameError_(f"'{name}' is the module; call its functions as {name}.f(...)", self.span(node))
            return v
        if name in self.cur.dead:
            raise NameError_(
                f"'{name}' is a dataflow variable of an ended dataflow block; list it in that block's R.output(...) to use it here",
                self.span(node),
            )
        prefix, _, attr = name.rpartition(".")
        if prefix and self._is_module_name(prefix):
            raise NameError_(f"module function '{attr}' can only be called", self.span(node))
        if name in self.funcs:
            raise NameError_(f"'{name}' is a module function: call it as cls.{name}(...) after `cls = Module`", self.span(node))
        raise NameError_(f"undefined variable '{name}'", self.span(node))

    # -- values -------------------------------------------------------------------------------
    def _value(self, node: Node):
        """An (unnormalized) expression; the BlockBuilder brings nested calls to normal form."""
        k = node.kind
        if k == K_NAME:
            return self._lookup(node)
        if k == K_CALL:
            return self._call(node)
        if k == K_TUPLE or k == K_LIST:
            return Tuple([self._value(x) for x in node.items], span=self.span(node))
        if k == K_GETITEM:
            base, index = node.value, node.items
            if base.kind == K_GETITEM and base.value.kind == K_NAME and base.value.value == "metadata":
                return self._metadata_ref(node)
            i = _int_literal(index)
            if i is None:
                raise ParseError("a tuple index is an integer literal", self.span(index))
            return TupleGetItem(self._value(base), i, span=self.span(node))
        if k == K_NUM:
            return self._prim(node.value, None, node)
        if k == K_LIT:
            if node.value is None:
                raise ParseError("None is not a value here", self.span(node))
            return self._prim(node.value, "bool", node)
        if k == K_STR:
            return StringImm(node.value, span=self.span(node))
        if k == K_NEG:
            operand = node.items
            if operand.kind == K_NUM:
                return self._prim(-operand.value, None, node)
            return Call(lookup("relax.negative"), (self._value(operand),), {}, span=self.span(node))
        if k == K_ARITH:
            return self._arith(lit.resolve_arith(node.items), node)
        raise ParseError("expected a value", self.span(node))

    def _arith(self, tree, whole: Node):
        if isinstance(tree, Node):
            return self._value(tree)
        op_text, lhs, rhs = tree
        op = lookup(_ARITH_OPS[op_text])
        if op is None:
            raise OpError(f"operator {op_text} is not supported on values", self.span(whole))
        a, b = self._arith(lhs, whole), self._arith(rhs, whole)
        first = _first_node(lhs)
        last = _last_node(rhs)
        span = Span(self.source_name, first.line, first.col, last.end_line, last.end_col, self.text)
        return Call(op, (a, b), op.normalize_attrs({}, span), span=span)

    def _prim(self, value, dtype, node: Node) -> PrimValue:
        if dtype is None:
            dtype = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float64"
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
            raise UnsupportedError(f"{fname} is not supported (it calls TIR or packed functions, out of scope)", self.span(func))
        if fname in _ANNOTATIONS:
            raise ParseError(f"{fname}(...) is a struct info annotation, not a value", self.span(func))
        if fname.startswith("R."):
            op = lookup(fname)
            if op is None:
                raise OpError(f"unknown op {fname}", self.span(func))
            return self._op_call(op, node)
        if fname.startswith("T.") and fname[2:] in DTYPES:
            if len(node.items) != 1:
                raise ParseError(f"{fname}(value) takes one number", self.span(node))
            v = self.literal(node.items[0], f"the argument of {fname}")
            dtype = fname[2:]
            if dtype == "bool":
                v = bool(v)
            elif dtype.startswith(("int", "uint")):
                v = int(v)
            else:
                v = float(v)
            return self._prim(v, dtype, node)
        prefix, _, attr = fname.rpartition(".")
        if prefix and self._is_module_name(prefix):
            return self._global_call(attr, node)
        if fname in self.funcs:
            raise NameError_(f"call module functions as cls.{fname}(...) after `cls = Module`", self.span(func))
        raise NameError_(f"unknown function '{fname}'", self.span(func))

    def _global_call(self, name: str, node: Node) -> Call:
        info = self.funcs.get(name)
        if info is None:
            raise NameError_(f"the module has no function '{name}'", self.span(node.value))
        gvar = self._gvar(info, node)
        args = []
        for a in node.items:
            if a.kind == K_KWARG:
                raise ParseError("module functions take positional arguments only", self.span(a))
            args.append(self._value(a))
        return Call(gvar, args, {}, span=self.span(node))

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
            return op(*ir_args, span=span, **attr_vals)
        except DiagnosticError as err:
            if err.span is None:
                raise _relocated(err, span) from None
            raise

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
    "R.const": _ScriptParser._const,
    "R.shape": _ScriptParser._shape,
    "R.prim_value": _ScriptParser._prim_value,
    "R.str": _ScriptParser._str,
    "R.tuple": _ScriptParser._tuple,
    "R.output": _ScriptParser._not_a_value,
    "R.dataflow": _ScriptParser._not_a_value,
    "R.func_attr": _ScriptParser._not_a_value,
}


def _callee(node: Node | None) -> str | None:
    if node is not None and node.kind == K_CALL and node.value.kind == K_NAME:
        return node.value.value
    return None


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


def _relocate(node: Node, at: Node) -> None:
    """Give every node of `node`'s tree the position of `at` (text read from inside a string)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if not isinstance(n, Node):
            continue
        n.line, n.col, n.end_line, n.end_col = at.line, at.col, at.end_line, at.end_col
        items = n.items
        if isinstance(items, list):
            stack.extend(x for x in items if isinstance(x, Node))
        elif isinstance(items, Node):
            stack.append(items)
        if isinstance(n.value, Node):
            stack.append(n.value)


def _relocated(err: DiagnosticError, span: Span) -> DiagnosticError:
    """The same error kind and message, located at `span`."""
    new = type(err).__new__(type(err))
    for key, value in vars(err).items():
        setattr(new, key, value)
    new.span = span
    Exception.__init__(new, new.render())
    return new


def _may_be_base(ann, inferred) -> bool:
    """Could `ann` describe the values of `inferred` at run time? Symbolic dims may equal anything."""
    if isinstance(ann, TensorStructInfo) and isinstance(inferred, TensorStructInfo):
        if (ann.dtype and ann.dtype != inferred.dtype) or (ann.ndim != -1 and ann.ndim != inferred.ndim):
            return False
        if ann.shape is not None:
            if inferred.shape is None:
                return False
            for a, b in zip(ann.shape, inferred.shape):
                if isinstance(a, int) and isinstance(b, int) and a != b:
                    return False
        return True
    if isinstance(ann, TupleStructInfo) and isinstance(inferred, TupleStructInfo):
        return len(ann.fields) == len(inferred.fields) and all(
            _may_be_base(a, b) for a, b in zip(ann.fields, inferred.fields)
        )
    if isinstance(ann, ShapeStructInfo) and isinstance(inferred, ShapeStructInfo):
        if ann.ndim != -1 and inferred.ndim != -1 and ann.ndim != inferred.ndim:
            return False
        if ann.values is not None and inferred.values is not None:
            return all(not (isinstance(a, int) and isinstance(b, int) and a != b) for a, b in zip(ann.values, inferred.values))
        return True
    return is_base_of(ann, inferred)
