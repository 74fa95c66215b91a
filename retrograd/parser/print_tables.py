"""The printer's module-wide state: memoized texts of struct infos, parameters, ops, attributes and
constants, the metadata section's constants, and what the header must declare (T., notes)."""

from __future__ import annotations

import numpy as np

from retrograd.errors import UnsupportedError
from retrograd.ir.expr import Constant, GlobalVar
from retrograd.ir.strings import quote as _quote
from retrograd.ir.struct_info import FuncStructInfo, StructInfo, TensorStructInfo, TupleStructInfo, all_dim_names
from retrograd.ir.text import format_sinfo, format_sinfo_shared, op_script_name
from retrograd.ops.manipulate.index_map import IndexMap
from retrograd.ops.registry import typed_key
from retrograd.parser.literal_text import const_text, float_text

__all__ = ["ModulePrinter", "format_value", "attr_texts_of", "needs_tir", "METADATA_KEY", "ATTR_SCAN", "same_types"]

METADATA_KEY = "relax.expr.Constant"
# How many attribute dicts of one op the printer's hot loop compares before hashing (see attr_entry).
ATTR_SCAN = 8


def same_types(a: dict, b: dict) -> bool:
    """Whether two attribute dicts already known equal (==) hold values of the same types, signed
    zeros included: what attrs_key tells apart, checked without building the keys."""
    types = list(map(type, a.values()))
    if types != list(map(type, b.values())):
        return False
    if float not in types and list not in types and tuple not in types:
        return True
    for v, w in zip(a.values(), b.values()):
        c = v.__class__
        if c is float:
            if v == 0.0 and str(v) != str(w):
                return False
        elif c is list or c is tuple:
            if list(map(type, v)) != list(map(type, w)):
                return False
            # Same-typed equal ints are the same ints; floats and nested lists need the full key.
            if not all(map(int.__instancecheck__, v)) and typed_key(v) != typed_key(w):
                return False
    return True


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


def attr_texts_of(op, attrs: dict) -> tuple:
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
    tir = any(needs_tir(text) for text in positional)
    return positional, named, tir, reason or None


# -- struct info ------------------------------------------------------------------------------


def needs_tir(text: str) -> bool:
    return "T." in text


# -- module -----------------------------------------------------------------------------------


class ModulePrinter:
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
        self.attr_seen: dict = {}  # op -> [(attrs, attr_entry's tuple, typed)], the first few of attr_memo's
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
            if needs_tir(entry[0]):
                self.uses_tir = True
            hit = self.param_texts[id(s)] = (s, *entry)  # the entry keeps s alive, so its id stays its own
        return hit

    def _sinfo_text(self, s) -> str:
        text = format_sinfo_shared(s, self.sinfo_texts)
        if needs_tir(text):
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
        without any (`axes=None)`)) of a call's attributes; memoized in attr_memo by (op, items)
        and the values' types, since
        calls of one op mostly repeat the same attributes (the printer's hot path on large functions).
        Needing T. and the note count once a module: a memo hit needs only the dims. The first few
        entries of an op are also kept as (attrs, entry, typed) in attr_seen, which `bindings` scans
        comparing dicts (with their keys' order and value types): cheaper than hashing."""
        hit = bucket = None
        try:
            key = (op, tuple(attrs.items()))
            bucket = self.attr_memo.get(key)
        except TypeError:  # an unhashable value (a dict attribute): not memoized
            key = None
        # Equal keys may still differ in their values' types (1 and 1.0, 0.0 and -0.0): one bucket.
        for seen, entry in bucket or ():
            if same_types(seen, attrs):
                hit = entry
                break
        if hit is None:
            dims = set().union(*(all_dim_names(v) for v in attrs.values() if isinstance(v, StructInfo)))
            positional, named, tir, note = attr_texts_of(op, attrs)
            tail = ", ".join(positional + named)
            hit = (positional, named, tir, note, dims, f", {tail})" if tail else ")", tail + ")")
            if key is not None:
                self.attr_memo.setdefault(key, []).append((attrs, hit))
                seen = self.attr_seen.setdefault(op, [])
                if len(seen) < ATTR_SCAN:
                    # Only None and str values: an equal dict holds the same types (None == only None).
                    typed = not all(v is None or v.__class__ is str for v in attrs.values())
                    seen.append((attrs, hit, typed))
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
