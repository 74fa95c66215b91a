"""Function bodies: statements, dataflow blocks, if/else scopes, bindings and name lookup."""

from __future__ import annotations

from retrograd.errors import DiagnosticError, NameError_, ParseError, TypeInferenceError, UnsupportedError, did_you_mean, noting
from retrograd.ir.block import VarBinding
from retrograd.ir.expr import DataflowVar, If, Var, is_leaf
from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo, is_base_of
from retrograd.ir.text import format_sinfo
from retrograd.ops.attr_types import DTYPES
from retrograd.parser.syntax import K_ASSIGN, K_EXPR, K_IF, K_NAME, K_RETURN, K_STR, K_WITH, Node, callee_name



def in_binding(name: str):
    return noting(f"in the binding of '{name}'")


class _ModuleRef:
    """What `cls = Module` binds: the module itself, for `cls.f(x)` calls."""


MODULE = _ModuleRef()


class StatementParser:
    """`_ScriptParser`'s part for statements and scopes."""

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
            callee = callee_name(e)
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
        callee = callee_name(value_node)
        if callee is not None and callee.startswith("T.") and callee[2:] in DTYPES and not value_node.items:
            self.ctx.symbols.add(name)  # `n = T.int64()`: declares a symbolic dim for what follows
            return None
        with in_binding(name):
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
                raise err.located(self.span(node)) from None
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
        # Narrowing (a static dim for a symbolic one) would need a run-time check, R.match_cast in Relax;
        # well_formed rejects it, so the parser does too.
        hint = ": narrowing needs a run-time check (R.match_cast), which is not supported" if _may_be_base(ann, inferred) else ""
        raise TypeInferenceError(
            f"annotation {format_sinfo(ann)} does not match the inferred {format_sinfo(inferred)}{hint}",
            self.span(ann_node) if ann_node is not None else None,
        )

    def _dataflow(self, s: Node) -> None:
        st = self.cur
        ctx_node = s.value
        if callee_name(ctx_node) != "R.dataflow" or ctx_node.items:
            raise UnsupportedError("the only `with` statement is `with R.dataflow():`", self.span(ctx_node))
        if st.bb.in_dataflow:
            raise ParseError("dataflow blocks cannot be nested", self.span(s))
        stmts = s.items
        names: list[Node] = []
        body = stmts
        last = stmts[-1]
        if last.kind == K_EXPR and callee_name(last.items) == "R.output":
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
            with in_binding(tname):
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
            with in_binding(last.value.value):
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
        names = [n for scope in self.cur.scopes for n, v in scope.items() if v is not MODULE]
        raise NameError_(f"undefined variable '{name}'{did_you_mean(name, names)}", self.span(node))


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
