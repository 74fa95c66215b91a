"""IR -> TVMScript-style text that both retrograd and TVM 0.27 parse; deterministic, names made unique."""

from __future__ import annotations

import keyword
import math
import re

import numpy as np

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
from retrograd.ir.struct_info import (
    FuncStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    all_dim_names,
    dim_names,
)
from retrograd.ir.text import format_sinfo, format_sinfo_shared, op_script_name
from retrograd.ops.manipulate.index_map import IndexMap
from retrograd.parser.literal_text import const_text, float_text

__all__ = ["print_module", "print_function", "print_expr", "format_sinfo", "format_value", "METADATA_KEY"]

# Constants with more elements than this go to the metadata section, as TVM does with its own.
INLINE_CONST_LIMIT = 16
METADATA_KEY = "relax.expr.Constant"
INDENT = "    "
# How many attribute dicts of one op the printer's hot loop compares before hashing (see attr_entry).
ATTR_SCAN = 8
# Bindings the printer's hot loop writes as pieces before joining them into one string.
CHUNK = 32

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_]")
# Names a variable may not take: they would shadow what the script itself refers to.
_RESERVED = frozenset(keyword.kwlist) | {"R", "T", "I", "cls", "metadata", "Module", "tvm", "float"}


# -- values -----------------------------------------------------------------------------------


def format_value(v, positional: bool = False) -> str:
    """An attribute or literal value as script text (lists for sequences; tuples when positional)."""
    if v is None:
        return "None"
    if isinstance(v, bool | np.bool_):
        return "True" if v else "False"
    if isinstance(v, int | np.integer):
        return str(int(v))
    if isinstance(v, float | np.floating):
        return float_text(float(v))
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, list | tuple | np.ndarray):
        items = [format_value(x, positional) for x in v]
        if positional:
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{format_value(k)}: {format_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, StructInfo):
        return format_sinfo(v)
    if isinstance(v, IndexMap):
        return v.text()
    raise UnsupportedError(f"cannot print an attribute value of type {type(v).__name__}")


def _attr_texts(op, attrs: dict) -> tuple:
    """(positional texts, `key=value` texts, needs T., TVM note or None) of a call's attributes: the
    op's positional attributes up to the first None, then the rest by name but for printed-omitted defaults."""
    positional_keys = getattr(op, "print_positional", ())
    positional, skip = [], set()
    for key in positional_keys:
        v = attrs.get(key)
        skip.add(key)
        if v is None:
            break
        positional.append(format_value(v, positional=True))
    skip.update(key for key in positional_keys if attrs.get(key) is None)
    note = getattr(op, "tvm_note", None)
    reason = note(attrs) if note is not None else None
    omit = getattr(op, "print_omit", {})
    named = [f"{key}={format_value(v)}" for key, v in attrs.items() if key not in skip and not (key in omit and omit[key] == v)]
    tir = any(_needs_tir(text) for text in positional)
    return positional, named, tir, reason or None


# -- struct info ------------------------------------------------------------------------------


def _needs_tir(text: str) -> bool:
    return "T." in text


# -- module -----------------------------------------------------------------------------------


class _ModulePrinter:
    def __init__(self):
        self.constants: list[Constant] = []
        self.const_index: dict[int, int] = {}
        self.uses_tir = False
        self.sinfo_memo: dict = {}
        self.sinfo_by_id: dict = {}  # id -> sinfo_entry's tuple: bindings share struct info objects
        self.param_texts: dict = {}  # id -> (struct info, text, dim names), see param_entry
        self.param_memo: dict = {}  # struct info -> (text, dim names), see param_entry
        self.sinfo_texts: dict = {}  # id -> text of nested struct infos (see format_sinfo_shared)
        self.op_names: dict = {}
        self.call_heads: dict = {}  # op -> "R.add(" for ops without keyword-only arguments, else ""
        self.attr_memo: dict = {}
        self.attr_seen: dict = {}  # op -> [(attrs, attr_entry's tuple)], the first few of attr_memo's
        self.const_memo: dict = {}
        self.const_by_id: dict = {}  # id -> (constant, text): rules share their scalar constants
        self.tvm_notes: dict = {}  # reasons TVM cannot read the text, in first-seen order
        self.module_dims: set[str] = set()  # symbolic dims declared before the module (`n = T.int64()`)

    def metadata_ref(self, c: Constant) -> str:
        idx = self.const_index.get(id(c))
        if idx is None:
            idx = len(self.constants)
            self.constants.append(c)
            self.const_index[id(c)] = idx
        return f'metadata["{METADATA_KEY}"][{idx}]'

    def sinfo(self, s) -> str:
        return self.sinfo_entry(s)[1]

    def sinfo_entry(self, s) -> tuple:
        """(s, its text, the symbolic names it writes bare, `: text = ` as a binding writes it), by
        identity first: hashing a struct info's value costs more than the rest of the lookup."""
        hit = self.sinfo_by_id.get(id(s))
        if hit is None or hit[0] is not s:
            # The entry keeps s alive, so its id stays its own.
            text = self._sinfo_by_value(s)
            hit = self.sinfo_by_id[id(s)] = (s, text, all_dim_names(s), f": {text} = ")
        return hit

    def _sinfo_by_value(self, s) -> str:
        if s.__class__ is TupleStructInfo or s.__class__ is FuncStructInfo:
            # By node, with their nested texts (hashing a deep tuple's value would walk it all).
            return self._sinfo_text(s)
        try:
            text = self.sinfo_memo.get(s)
        except TypeError:  # an unhashable field: format without the memo
            return self._sinfo_text(s)
        if text is None:
            text = self.sinfo_memo[s] = self._sinfo_text(s)
        return text

    def param_entry(self, s) -> tuple:
        """(s, its annotation as a parameter's (names quoted), the symbolic names it defines), by
        identity: adjoints repeat the forward's parameters, and networks repeat their shapes."""
        hit = self.param_texts.get(id(s))
        if hit is None or hit[0] is not s:
            # By value next: each parameter has a struct info object of its own. A tensor's key is
            # its fields (what its == compares), cheaper to hash and compare than the object.
            key = (s.shape, s.dtype, s.ndim) if s.__class__ is TensorStructInfo else s
            try:
                entry = self.param_memo.get(key)
            except TypeError:  # an unhashable field
                entry = key = None
            if entry is None:
                entry = (format_sinfo(s, quote_names=True), all_dim_names(s))
                if key is not None:
                    self.param_memo[key] = entry
            if _needs_tir(entry[0]):
                self.uses_tir = True
            hit = self.param_texts[id(s)] = (s, *entry)  # the entry keeps s alive, so its id stays its own
        return hit

    def _sinfo_text(self, s) -> str:
        text = format_sinfo_shared(s, self.sinfo_texts)
        if _needs_tir(text):
            self.uses_tir = True
        return text

    def const_text(self, data: np.ndarray) -> str:
        """`const_text` memoized by value: adjoints repeat a few scalars (0, 1) thousands of times, and
        finding each element's shortest text costs ~18 us."""
        key = (data.dtype.str, data.shape, data.tobytes())
        text = self.const_memo.get(key)
        if text is None:
            text = self.const_memo[key] = const_text(data)
        return text

    def op_name(self, op) -> str:
        return self.op_info(op)[0]

    def op_info(self, op) -> tuple:
        """(script name, {position: name} of the keyword-only arguments) of an op."""
        info = self.op_names.get(op)
        if info is None:
            specs = getattr(op, "args", ())
            info = self.op_names[op] = (op_script_name(op), {i: a.name for i, a in enumerate(specs) if a.keyword})
        return info

    def call_head(self, op) -> str:
        """`name(` of a call of `op` whose arguments all print positionally (then the attributes); ""
        for a module function or an op with keyword-only arguments (those print through `value`)."""
        head = self.call_heads.get(op)
        if head is None:
            head = ""
            if not isinstance(op, GlobalVar):
                name, keywords = self.op_info(op)
                if not keywords:
                    head = name + "("
            self.call_heads[op] = head
        return head

    def attr_entry(self, op, attrs: dict) -> tuple:
        """(positional texts, `key=value` texts, needs T., TVM note, symbolic names of struct-info
        attributes, the end of a call after positional arguments (`, axes=None)`), the end of a call
        without any (`axes=None)`)) of a call's attributes; memoized in attr_memo by (op, items), since
        calls of one op mostly repeat the same attributes (the printer's hot path on large functions).
        Needing T. and the note count once a module: a memo hit needs only the dims. The first few
        entries of an op are also kept as (attrs, entry) pairs in attr_seen, which `bindings` scans
        comparing dicts (with their keys' order): cheaper than the key's tuples and hashing."""
        try:
            key = (op, tuple(attrs.items()))
            hit = self.attr_memo.get(key)
        except TypeError:  # an unhashable value (a dict attribute): not memoized
            key = hit = None
        if hit is None:
            dims = set().union(*(all_dim_names(v) for v in attrs.values() if isinstance(v, StructInfo)))
            positional, named, tir, note = _attr_texts(op, attrs)
            tail = ", ".join(positional + named)
            hit = (positional, named, tir, note, dims, f", {tail})" if tail else ")", tail + ")")
            if key is not None:
                self.attr_memo[key] = hit
                seen = self.attr_seen.setdefault(op, [])
                if len(seen) < ATTR_SCAN:
                    seen.append((attrs, hit))
        if hit[2]:
            self.uses_tir = True
        if hit[3]:
            self.tvm_notes[hit[3]] = None
        return hit

    def attr_texts(self, op, attrs: dict) -> tuple:
        """(positional texts, `key=value` texts, symbolic names of struct-info attributes) of a call's
        attributes."""
        positional, named, _, _, dims, _, _ = self.attr_entry(op, attrs)
        return positional, named, dims


def print_module(mod) -> str:
    """The whole module as a script: header, metadata section (large constants), class Module."""
    # The printer's lists and memo tuples would trigger the cyclic collector's passes over the whole
    # (large, cycle-free) IR for nothing, as parsing's would.
    with collector_paused():
        return _print_module(mod)


def _print_module(mod) -> str:
    mp = _ModulePrinter()
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
    mp = _ModulePrinter()
    body: list[str] = []
    _FunctionPrinter(mp, name, func, "").print_into(body)
    return "\n".join(_header(mp) + body) + "\n"


def print_expr(expr: Expr) -> str:
    """One expression as it would appear on the right of a binding (names are the hints)."""
    fp = _FunctionPrinter(_ModulePrinter(), "main", None, "")
    if isinstance(expr, Function):
        return print_function(expr)
    return fp.value(expr)


def _header(mp: _ModulePrinter) -> list[str]:
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

    def __init__(self, mp: _ModulePrinter, name: str, func: Function | None, indent: str):
        self.mp = mp
        self.name = name
        self.func = func
        self.indent = indent
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
                self.names[var] = name
                return name
        name = self.names.get(var)
        if name is not None:
            return name
        base = var.name_hint
        if self.hints:
            base = self.hints.pop(var, None) or base
        name = base = _BASES.get(base) or _base_name(base)
        used = self.used
        if name in used:
            k = self.next_suffix.get(base, 1)
            name = f"{base}_{k}"
            while name in used:
                k += 1
                name = f"{base}_{k}"
            self.next_suffix[base] = k + 1
        used.add(name)
        self.names[var] = name
        return name

    # expressions ----------------------------------------------------------------------------
    def arg(self, e) -> str:
        t = type(e)
        if t is Var or t is DataflowVar:
            name = self.names.get(e)
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
            if _needs_tir(text):
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
                names = self.names
                parts = [names.get(a) or arg(a) for a in e.args]
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
            get_name = self.names.get
            texts = [get_name(f) for f in fields]
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
        names = self.names
        get_name = names.get
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
                        text = get_name(a) or arg(a)
                    elif n == 2:
                        a, c = args
                        text = f"{get_name(a) or arg(a)}, {get_name(c) or arg(c)}"
                    else:
                        text = ", ".join([get_name(a) or arg(a) for a in args])
                    attrs = value.attrs
                    if attrs:
                        hit = None
                        try:
                            for seen, entry in attr_seen.get(op, ()):
                                # As equal as attr_memo's keys: the same items in the same order.
                                if seen == attrs and (len(seen) < 2 or list(seen) == list(attrs)):
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
                    outputs.append(self.names[b.var])
                continue
            else:
                head, text, end = "", self.value(value), ""
            var = b.var
            # define's common case, inlined (see there).
            name = var.name_hint
            if not hinted and name.isascii() and name.isidentifier() and name not in reserved and name not in used:
                used.add(name)
                names[var] = name
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
            if isinstance(body, Var) and body not in self.names and body.name_hint == var.name_hint:
                self.hints[body] = f"{var.name_hint}_{suffix}"
                self.hinted = True
            self.seq(branch, inner, out)
            out.append(f"{inner}{name}: {ann} = {self.arg(body)}")
