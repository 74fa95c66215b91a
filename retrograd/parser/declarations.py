"""The module level of a script: the module class, metadata, module attributes, function signatures and bodies."""

from __future__ import annotations

import re

from retrograd.errors import NameError_, OpError, ParseError, Span, TypeInferenceError, UnsupportedError, noting, warn_script
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Function, GlobalVar, Var
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import FuncStructInfo, all_dim_names, erase_undefined_dims
from retrograd.ops.attr_types import DTYPES
from retrograd.parser.syntax import (
    K_CALL,
    K_CLASS,
    K_DICT,
    K_EXPR,
    K_FUNC,
    K_GETITEM,
    K_KWARG,
    K_LIST,
    K_NAME,
    K_RETURN,
    K_STR,
    K_TOP_ASSIGN,
    K_TUPLE,
    Node,
    callee_name,
)

_MODULE_DECORATORS = frozenset(("I.ir_module", "tvm.script.ir_module", "ir_module", "tvm.script.ir.ir_module"))
_FUNC_DECORATORS = frozenset(("R.function", "tvm.script.relax.function", "relax.function"))


class FuncInfo:
    """A function of the script: its signature first (any call order works), its body on demand."""

    __slots__ = ("node", "name", "params", "ret_ann", "ret", "is_pure", "private", "gvar", "func", "state", "symbols")

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
        self.symbols: set[str] = set()  # symbolic dim names its body may use bare


class FuncState:
    """Per-function parsing state (saved while another function's body is parsed on demand)."""

    __slots__ = ("bb", "scopes", "dead", "info")

    def __init__(self, info: FuncInfo):
        self.info = info
        self.bb = BlockBuilder()
        self.scopes: list[dict] = []
        # Names of dataflow vars whose block has ended: for a precise message when used later.
        self.dead: dict[str, Node] = {}


class DeclarationParser:
    """`_ScriptParser`'s part for declarations: what stands outside function bodies, and each function."""

    # -- module -------------------------------------------------------------------------------
    def module(self, nodes: list[Node], tir: list = ()) -> IRModule:
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
            raise ParseError(
                "the script defines no module (@I.ir_module class) and no @R.function",
                Span(self.source_name, 1, 1, 1, 2, self.text),
            )
        self._tir_functions(tir)
        for f in funcs:
            self._declare(f)
        for info in self.funcs.values():
            if info.state == "declared":
                self._function(info)
        return IRModule(
            {name: info.func for name, info in self.funcs.items()}, self.mod_attrs, {f.name: f.text for f in tir}
        )

    def _tir_functions(self, tir: list) -> None:
        """TIR functions are kept as text; a warning says so once, naming them."""
        if not tir:
            return
        seen: set[str] = set()
        for f in tir:
            if f.name in seen:
                raise NameError_(f"function '{f.name}' is defined twice", f.span)
            seen.add(f.name)
        names = ", ".join(f"'{f.name}'" for f in tir)
        warn_script(
            f"{tir[0].span}: TIR function(s) {names} kept as opaque text: retrograd does not run or "
            "differentiate TIR (a call of one through R.call_tir is an error)"
        )

    def _top_assign(self, node: Node) -> None:
        value = node.items[0]
        if node.value == "metadata":
            self._metadata_section(value)
            return
        if value.kind == K_CALL and value.value.kind == K_NAME:
            callee = value.value.value
            # `n = TypeVar("n")` (TVM's printer) and `n = T.int64()` declare symbolic dims: nothing to do.
            if callee in ("TypeVar", "typing.TypeVar") or (callee.startswith("T.") and callee[2:] in DTYPES):
                self.global_symbols.add(node.value)
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
            callee = callee_name(e)
            if callee == "I.module_attrs":
                self.mod_attrs.update(self._attr_dict(e, "the module"))
                return
            if callee == "I.module_global_infos":
                # Virtual devices and other global infos: retrograd runs on the host only.
                if len(e.items) != 1 or e.items[0].kind != K_DICT:
                    raise ParseError("I.module_global_infos takes one dict literal", self.span(e))
                keys = [repr(k.value) if k.kind == K_STR else "?" for k, _ in e.items[0].items]
                self._dropped(keys, "the module", e, "global infos (virtual devices) are not kept; retrograd runs on the host")
                return
        raise UnsupportedError("a module class holds @R.function definitions and I.module_attrs({...})", self.span(node))

    def _attr_dict(self, call: Node, owner: str) -> dict:
        """The literal dict of `R.func_attr({...})` / `I.module_attrs({...})`. Entries that refer to
        metadata (TVM's frontend prints `"params": [metadata["ffi.Tensor"][0], ...]`, data no text
        holds) are dropped with a warning naming them."""
        fname = callee_name(call)
        if len(call.items) != 1 or call.items[0].kind != K_DICT:
            raise ParseError(f"{fname} takes one dict literal", self.span(call))
        kept, dropped = [], []
        for key, value in call.items[0].items:
            (dropped if _refers_to_metadata(value) else kept).append((key, value))
        out = self.literal(Node(K_DICT, None, kept, call.line, call.col, call.end_line, call.end_col), f"an attribute of {owner}")
        if dropped:
            names = [repr(k.value) if k.kind == K_STR else "?" for k, _ in dropped]
            self._dropped(names, owner, call, "the text does not hold the metadata they refer to")
        return out

    def _dropped(self, names: list[str], owner: str, node: Node, why: str) -> None:
        what = "attribute" if len(names) == 1 else "attributes"
        warn_script(f"{self.span(node)}: dropped {what} {', '.join(names)} of {owner}: {why}")

    # -- functions ----------------------------------------------------------------------------
    def _declare(self, node: Node) -> None:
        name = node.value
        decorators, params, ret, _body = node.items
        if name in self.funcs or name in self.tir:
            raise NameError_(f"function '{name}' is defined twice", self.span(node))
        info = FuncInfo(node, name)
        self._function_decorators(info, decorators, node)
        # As in TVM: the signature may use names declared before the module or named in its string dims.
        info.symbols = self.global_symbols | _string_dim_names([p.items for p in params])
        self.ctx.symbols = info.symbols
        seen: dict[str, Node] = {}
        for p in params:
            if p.value in seen:
                raise NameError_(f"parameter '{p.value}' is defined twice", self.span(p))
            if "." in p.value:
                raise ParseError(f"'{p.value}' is not a parameter name", self.span(p))
            seen[p.value] = p
            if p.items is None:
                raise TypeInferenceError(f"parameter '{p.value}' needs a struct info annotation such as R.Tensor((3,), \"float32\")", self.span(p))
            with noting(f"in the annotation of parameter '{p.value}'"):
                info.params.append(Var(p.value, self.sinfo(p.items), span=self.span(p)))
        if ret is not None:
            info.ret_ann = info.ret = self.sinfo(ret)
        self.ctx.symbols = None
        self.funcs[name] = info

    def _function_decorators(self, info: FuncInfo, decorators: list[Node], node: Node) -> None:
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

    def _gvar(self, info: FuncInfo, node: Node) -> GlobalVar:
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

    def _function(self, info: FuncInfo) -> None:
        info.state = "parsing"
        saved, saved_symbols = self.cur, self.ctx.symbols
        self.ctx.symbols = set(info.symbols)  # body declarations (`n = T.int64()`) add to it
        self.cur = st = FuncState(info)
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
            elif s.kind == K_EXPR and callee_name(s.items) == "R.func_attr":
                attrs.update(self._attr_dict(s.items, f"function '{info.name}'"))
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
        else:  # the result cannot name dims bound in the body only (R.match_cast): TVM erases them too
            ret = erase_undefined_dims(ret, set().union(*(all_dim_names(p.struct_info) for p in info.params)))
        info.ret = ret
        info.func = Function(
            tuple(info.params), seq, ret, info.is_pure, info.private, attrs, span=self.span(info.node)
        )
        info.state = "done"
        self.cur, self.ctx.symbols = saved, saved_symbols


def _refers_to_metadata(node: Node) -> bool:
    """Does a literal-looking value hold `metadata[...]` anywhere?"""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.kind == K_GETITEM:
            base = n.value
            while base.kind == K_GETITEM:
                base = base.value
            if base.kind == K_NAME and base.value == "metadata":
                return True
        elif n.kind in (K_LIST, K_TUPLE):
            stack.extend(n.items)
        elif n.kind == K_DICT:
            for k, v in n.items:
                stack += [k, v]
    return False


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _string_dim_names(annotations: list) -> set[str]:
    """Names written as string dims (`R.Tensor(("n", 3))`) of parameter annotations: TVM defines them there."""
    out: set[str] = set()
    stack = [(a, False) for a in annotations if a is not None]
    while stack:
        n, in_shape = stack.pop()
        if n.kind == K_STR:
            if in_shape and _IDENT.match(n.value.strip()):
                out.add(n.value.strip())
        elif n.kind in (K_LIST, K_TUPLE):
            stack.extend((x, True) for x in n.items)
        elif n.kind == K_CALL:
            stack.extend((x, False) for x in n.items)
        elif n.kind == K_KWARG:
            stack.append((n.items, False))
    return out
