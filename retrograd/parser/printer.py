"""IR -> TVMScript-style text that both retrograd and TVM 0.27 parse; deterministic, names made unique."""

from __future__ import annotations

import keyword
import math
import re

from retrograd.errors import UnsupportedError
from retrograd.gc_pause import collector_paused
from retrograd.ir.block import DataflowBlock
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
    Expr,
    Function,
    GlobalVar,
    If,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
)
from retrograd.ir.functor import seq_if_depth, stack_room
from retrograd.ir.nested import joined, render
from retrograd.ir.strings import quote as _quote
from retrograd.ir.struct_info import dim_names
from retrograd.ir.text import format_sinfo
from retrograd.parser.literal_text import const_text
from retrograd.parser.print_tables import METADATA_KEY, ModulePrinter, format_value, needs_tir, same_types

__all__ = ["print_module", "print_function", "print_expr", "format_sinfo", "format_value", "METADATA_KEY"]

# Constants with more elements than this go to the metadata section, as TVM does with its own.
INLINE_CONST_LIMIT = 16
INDENT = "    "
# Bindings the printer's hot loop writes as pieces before joining them into one string.
CHUNK = 32

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_]")
# Names a variable may not take: they would shadow what the script itself refers to.
_RESERVED = frozenset(keyword.kwlist) | {"R", "T", "I", "cls", "metadata", "Module", "tvm", "float"}


def print_module(mod) -> str:
    """The whole module as a script: header, metadata section (large constants), class Module."""
    # The printer's lists and memo tuples would trigger the cyclic collector's passes over the whole
    # (large, cycle-free) IR for nothing, as parsing's would.
    with collector_paused():
        return _print_module(mod)


def _print_module(mod) -> str:
    mp = ModulePrinter()
    body: list[str] = []
    if mod.attrs:
        body.append(f"{INDENT}I.module_attrs({format_value(dict(mod.attrs))})")
    for name, func in mod.items():
        if body:
            body.append("")
        _FunctionPrinter(mp, name, func, INDENT).print_into(body)
    for text in mod.tir.values():  # opaque TIR functions, as read
        if body:
            body.append("")
        mp.uses_tir = True
        body.extend(INDENT + line if line else "" for line in text.rstrip("\n").split("\n"))
    if not mod.items() and not mod.tir:
        body.append(f"{INDENT}pass")
    lines = _header(mp)
    lines.append("@I.ir_module")
    lines.append("class Module:")
    lines.extend(body)
    lines.append("")  # the final newline, without copying the whole text once more
    return "\n".join(lines)


def print_function(func: Function, name: str = "main") -> str:
    """A single function as a script of its own (`@R.function def name(...)`); parses back alone."""
    mp = ModulePrinter()
    body: list[str] = []
    _FunctionPrinter(mp, name, func, "").print_into(body)
    return "\n".join(_header(mp) + body) + "\n"


def print_expr(expr: Expr) -> str:
    """One expression as it would appear on the right of a binding (names are the hints)."""
    fp = _FunctionPrinter(ModulePrinter(), "main", None, "")
    if isinstance(expr, Function):
        return print_function(expr)
    return fp.value(expr)


def _header(mp: ModulePrinter) -> list[str]:
    if mp.module_dims:
        mp.uses_tir = True
    lines = ["# from tvm.script import ir as I"]
    if mp.uses_tir:
        lines.append("# from tvm.script import tir as T")
    lines.append("# from tvm.script import relax as R")
    for reason in mp.tvm_notes:
        lines.append(f"# not loadable in TVM: {reason}")
    lines.append("")
    lines += [f"{name} = T.int64()" for name in sorted(mp.module_dims)]
    if mp.constants:
        # Before the module: TVM's parser evaluates it there, and so can ours (literals only).
        lines.append("metadata = {")
        lines.append(f"    {_quote(METADATA_KEY)}: [")
        for c in mp.constants:
            lines.append(f"        {const_text(c.data)},")
        lines.append("    ],")
        lines.append("}")
        lines.append("")
    return lines


_BASES: dict[str, str] = {}  # name hint -> a name the script may use (hints repeat across functions)


def _base_name(hint: str) -> str:
    base = hint
    if not _IDENT.match(base):
        base = _BAD_CHARS.sub("_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
    if base in _RESERVED:
        base = base + "_"
    if len(_BASES) < 100_000:
        _BASES[hint] = base
    return base


class _FunctionPrinter:
    """Prints one function; display names are unique per function, parameters named first."""

    def __init__(self, mp: ModulePrinter, name: str, func: Function | None, indent: str):
        self.mp = mp
        self.name = name
        self.func = func
        self.indent = indent
        # A var's name: its hint (the common case) for the vars of `as_hint`, else names[var]. A set of
        # vars costs one probe of a large table where a dict costs two (index, then entry): printing
        # large functions is bound by those probes' cache misses.
        self.as_hint: set[Var] = set()
        self.names: dict[Var, str] = {}
        self.used: set[str] = set()
        self.next_suffix: dict[str, int] = {}
        self.hints: dict[Var, str] = {}
        self.hinted = False  # whether any hint was given (see bindings)
        self.in_if = False  # inside an If's branches (see if_binding)
        self.uses_cls = False
        self.body_dims: set[str] = set()  # symbolic names the printed body writes bare (declared first)

    # names ------------------------------------------------------------------------------
    def define(self, var: Var) -> str:
        if not self.hinted:
            # The common case first (bindings inlines it): a hint that is a name of its own, not taken.
            # A var named already has its name's base in `used`: it takes the way below.
            name = var.name_hint
            if name.isascii() and name.isidentifier() and name not in _RESERVED and name not in self.used:
                self.used.add(name)
                self.as_hint.add(var)
                return name
        if var in self.as_hint:
            return var.name_hint
        base = var.name_hint
        if self.hints:
            base = self.hints.pop(var, None) or base
        name = base = _BASES.get(base) or _base_name(base)
        used = self.used
        k = 0
        if name in used:
            k = self.next_suffix.get(base, 1)
            name = f"{base}_{k}"
            while name in used:
                k += 1
                name = f"{base}_{k}"
        # A var named already (read before its binding) keeps its name: one probe of the (large) table
        # both finds it and enters a new one.
        named = self.names.setdefault(var, name)
        if named is not name:
            return named
        if k:
            self.next_suffix[base] = k + 1
        used.add(name)
        return name

    def name_of(self, var) -> str | None:
        """The name given to `var` (any expression: None when it is not a named variable)."""
        return var.name_hint if var in self.as_hint else self.names.get(var)

    # expressions ----------------------------------------------------------------------------
    def arg(self, e) -> str:
        t = type(e)
        if t is Var or t is DataflowVar:
            name = self.name_of(e)
            return name if name is not None else self.define(e)
        if t is Constant:
            hit = self.mp.const_by_id.get(id(e))
            if hit is not None and hit[0] is e:
                return hit[1]
            data = e.data
            if data.size > INLINE_CONST_LIMIT:
                return self.mp.metadata_ref(e)
            if data.size == 0 and 0 in data.shape[:-1]:
                # Nested lists cannot hold dims after an empty one ((0, 1) would print as [] and read
                # back as (0,)): an empty constant is all zeros of its shape, which R.zeros spells.
                return f"R.zeros(R.shape([{', '.join(map(str, data.shape))}]), dtype={_quote(str(data.dtype))})"
            text = self.mp.const_text(data)
            self.mp.const_by_id[id(e)] = (e, text)  # the entry keeps e alive, so its id stays its own
            return text
        if t is ShapeExpr:
            text = f"R.shape([{', '.join(map(str, e.values))}])"
            if needs_tir(text):
                self.mp.uses_tir = True
            for d in e.values:
                if d.__class__ is not int:  # static dims name nothing
                    self.body_dims |= dim_names(d)
            return text
        if t is PrimValue:
            return self.prim(e)
        if t is StringImm:
            return f"R.str({_quote(e.value)})"
        if t is GlobalVar:
            self.uses_cls = True
            return f"cls.{e.name_hint}"
        return self.value(e)

    def prim(self, e: PrimValue) -> str:
        v, dtype = e.value, e.dtype
        if dtype == "int64" and isinstance(v, int) and not isinstance(v, bool):
            return f"R.prim_value({v})"
        if dtype == "bool":
            return f"R.prim_value({format_value(bool(v))})"
        self.mp.uses_tir = True
        if isinstance(v, float) and not math.isfinite(v):  # TVM's own spelling: T.float32("inf"), ("nan")
            return f'R.prim_value(T.{dtype}("{"nan" if math.isnan(v) else "inf" if v > 0 else "-inf"}"))'
        return f"R.prim_value(T.{dtype}({format_value(v)}))"

    def value(self, e) -> str:
        t = type(e)
        if t is Call:
            op = e.op
            if isinstance(op, GlobalVar):
                self.uses_cls = True
                return f"cls.{op.name_hint}(" + ", ".join([self.arg(a) for a in e.args]) + ")"
            mp = self.mp
            name, keywords = mp.op_info(op)
            arg = self.arg
            if not keywords:
                # A var's name inline (most arguments are vars named already); others through arg.
                name_of = self.name_of
                parts = [name_of(a) or arg(a) for a in e.args]
                by_name = ()
            else:  # keyword-only arguments (dropout's key) go after the positional attributes
                parts, by_name = [], []
                for i, a in enumerate(e.args):
                    if i in keywords:
                        by_name.append(f"{keywords[i]}={arg(a)}")
                    else:
                        parts.append(arg(a))
            attrs = e.attrs
            if attrs:
                positional, named, dims = mp.attr_texts(op, attrs)
                if dims:
                    self.body_dims |= dims
                parts += positional
                parts += by_name
                parts += named
            else:
                parts += by_name
            return f"{name}({', '.join(parts)})"
        if t is Tuple or t is TupleGetItem:
            return render(e, self._tuple_parts)  # tuples nest to any depth: rendered with a stack
        if t is If or t is SeqExpr or t is Function:
            raise UnsupportedError(f"cannot print a nested {t.__name__} as a value")
        return self.arg(e)

    def _tuple_parts(self, e) -> list:
        """The text of one node of a tuple nest, its nested tuples and getitems left for `render`."""
        t = type(e)
        if t is Tuple:
            fields = e.fields
            if not fields:
                return ["R.tuple()"]
            end = ",)" if len(fields) == 1 else ")"
            name_of = self.name_of
            texts = [name_of(f) for f in fields]
            if None not in texts:  # all named variables (a function's result): no parts to render
                return ["(" + ", ".join(texts) + end]
            return ["(", *joined(fields), end]
        if t is TupleGetItem:
            return [e.tuple_value, f"[{e.index}]"]
        return [self.arg(e)]

    # statements -----------------------------------------------------------------------------
    def print_into(self, out: list[str]) -> None:
        func = self.func
        ind = self.indent
        deco = []
        if func.private:
            deco.append("private=True")
        if not func.is_pure:
            deco.append("pure=False")
        out.append(f"{ind}@R.function" + (f"({', '.join(deco)})" if deco else ""))
        params = []
        defined: set[str] = set()
        param_entry = self.mp.param_entry
        for p in func.params:
            name = self.define(p)
            _, text, dims = param_entry(p.struct_info)
            params.append(f"{name}: {text}")
            if dims:
                defined |= dims
        ret = func.ret_struct_info if func.ret_struct_info is not None else func.body.struct_info
        # Bare symbolic names must be defined where TVM (and retrograd) reads them: the parameters'
        # string dims define theirs, names new in the body are declared first in it (`n = T.int64()`),
        # as TVM prints them. (A parsed function's result never names body-only dims: they are erased.)
        ret_text = ""
        if ret is not None:
            _, text, dims, _ = self.mp.sinfo_entry(ret)
            ret_text = f" -> {text}"
            outside = dims - defined  # IR built in Python may name them: declared before the module
            self.mp.module_dims |= outside
            defined |= outside
        out.append(f"{ind}def {self.name}({', '.join(params)}){ret_text}:")
        inner = ind + INDENT
        body: list[str] = []
        self.seq(func.body, inner, body)
        body.append(f"{inner}return {self.arg(func.body.body)}")
        if func.attrs:
            out.append(f"{inner}R.func_attr({format_value(dict(func.attrs))})")
        for name in sorted(self.body_dims - defined):
            self.mp.uses_tir = True
            out.append(f"{inner}{name} = T.int64()")
        if self.uses_cls:
            out.append(f"{inner}cls = Module")
        out.extend(body)

    def seq(self, seq: SeqExpr, ind: str, out: list[str]) -> None:
        for block in seq.blocks:
            if isinstance(block, DataflowBlock):
                if not block.bindings:
                    continue
                out.append(f"{ind}with R.dataflow():")
                inner = ind + INDENT
                outputs = self.bindings(block.bindings, inner, out)
                out.append(f"{inner}R.output({', '.join(outputs)})")
            else:
                self.bindings(block.bindings, ind, out)

    def bindings(self, bindings, ind: str, out: list[str]) -> list[str]:
        """Prints `bindings` into `out`; the names of their variables that are not DataflowVars."""
        # The printer's hot loop: the common case (a call of an op on named variables, a fresh name, a
        # struct info printed before) is inlined here; anything else goes through value / define / sinfo.
        mp = self.mp
        sinfo_entry = mp.sinfo_entry
        by_id = mp.sinfo_by_id
        body_dims = self.body_dims
        call_heads = mp.call_heads
        call_head = mp.call_head
        attr_seen = mp.attr_seen
        attr_entry = mp.attr_entry
        get_name = self.names.get
        as_hint = self.as_hint
        add_hint = as_hint.add
        used = self.used
        reserved = _RESERVED
        arg = self.arg
        define = self.define
        # Lines go out as pieces joined once (into one entry of `out`): cheaper than a string a line.
        pieces: list[str] = []
        extend = pieces.extend
        line_start = "\n" + ind
        left = CHUNK
        outputs: list[str] = []
        dataflow_var = DataflowVar
        hinted = self.hinted
        last_sinfo = last_hit = None
        for b in bindings:
            value = b.value
            t = type(value)
            if t is Call:
                op = value.op
                head = call_heads.get(op)
                if head is None:
                    head = call_head(op)
                if head:
                    args = value.args
                    n = len(args)
                    if n == 1:
                        a = args[0]
                        text = a.name_hint if a in as_hint else get_name(a) or arg(a)
                    elif n == 2:
                        a, c = args
                        text = (f"{a.name_hint if a in as_hint else get_name(a) or arg(a)}, "
                                f"{c.name_hint if c in as_hint else get_name(c) or arg(c)}")
                    else:
                        text = ", ".join([a.name_hint if a in as_hint else get_name(a) or arg(a) for a in args])
                    attrs = value.attrs
                    if attrs:
                        hit = None
                        try:
                            for seen, entry, typed in attr_seen.get(op, ()):
                                # As equal as attr_memo's typed keys: the same items in the same order,
                                # of the same types (1, 1.0 and True, or 0.0 and -0.0, print apart).
                                if (seen == attrs and (len(seen) < 2 or list(seen) == list(attrs))
                                        and (not typed or same_types(seen, attrs))):
                                    hit = entry
                                    break
                        except (ValueError, TypeError):  # an array's == has no truth value
                            pass
                        if hit is None:
                            hit = attr_entry(op, attrs)
                        if hit[4]:
                            body_dims |= hit[4]
                        end = hit[5] if n else hit[6]
                    else:
                        end = ")"
                else:
                    head, text, end = "", self.value(value), ""
            elif t is If:
                if pieces:
                    pieces[0] = ind
                    out.append("".join(pieces))
                    pieces.clear()
                self.if_binding(b, ind, out)
                hinted = self.hinted
                if type(b.var) is not dataflow_var:
                    outputs.append(self.name_of(b.var))
                continue
            else:
                head, text, end = "", self.value(value), ""
            var = b.var
            # define's common case, inlined (see there).
            name = var.name_hint
            if not hinted and name.isascii() and name.isidentifier() and name not in reserved and name not in used:
                used.add(name)
                add_hint(var)
            else:
                name = define(var)
            if type(var) is not dataflow_var:
                outputs.append(name)
            s = var.struct_info
            if s is not last_sinfo:  # neighbours mostly share one
                hit = by_id.get(id(s))
                if hit is None or hit[0] is not s:
                    hit = sinfo_entry(s)
                last_sinfo, last_hit = s, hit
            else:
                hit = last_hit
            if hit[2]:
                body_dims |= hit[2]
            extend((line_start, name, hit[3], head, text, end))
            left -= 1
            if not left:  # joined while its strings are still in the CPU's cache
                pieces[0] = ind
                out.append("".join(pieces))
                pieces.clear()
                left = CHUNK
        if pieces:
            pieces[0] = ind
            out.append("".join(pieces))
        return outputs

    def if_binding(self, b, ind: str, out: list[str]) -> None:
        if self.in_if:
            self.print_if(b, ind, out)
            return
        # seq -> if_binding -> seq recurses once per nested If: room for the whole nest, from its top.
        node = b.value
        self.in_if = True
        try:
            with stack_room(1 + max(seq_if_depth(node.true_branch), seq_if_depth(node.false_branch))):
                self.print_if(b, ind, out)
        finally:
            self.in_if = False

    def print_if(self, b, ind: str, out: list[str]) -> None:
        node: If = b.value
        var = b.var
        name = self.define(var)
        _, ann, dims, _ = self.mp.sinfo_entry(var.struct_info)
        self.body_dims |= dims
        out.append(f"{ind}if {self.arg(node.cond)}:")
        inner = ind + INDENT
        for branch, suffix in ((node.true_branch, "then"), (node.false_branch, "else")):
            if branch is node.false_branch:
                out.append(f"{ind}else:")
            body = branch.body
            if isinstance(body, Var) and self.name_of(body) is None and body.name_hint == var.name_hint:
                self.hints[body] = f"{var.name_hint}_{suffix}"
                self.hinted = True
            self.seq(branch, inner, out)
            out.append(f"{inner}{name}: {ann} = {self.arg(body)}")
