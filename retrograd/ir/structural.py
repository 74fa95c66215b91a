"""Structural equality of IR modulo variable renaming, naming the path of the first difference."""

from __future__ import annotations

import numpy as np

from retrograd.ir.block import BindingBlock, VarBinding
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
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
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import (
    FuncStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from retrograd.ir.structural_hash import array_equal, dim_tokens, is_dim_name, structural_hash, value_equal
from retrograd.ir.text import brief, op_script_name

__all__ = ["structural_equal", "structural_hash", "assert_structural_equal", "first_difference"]

# Work-item kinds of the explicit stacks (no recursion over bindings: 100,000-binding functions).
_NODE, _DEF, _SINFO, _BLOCK, _BINDING, _ENTER_FUNC, _EXIT_FUNC = range(7)


# -- paths ------------------------------------------------------------------
# A path is a linked tuple (parent, segment); built per work item, rendered only on a mismatch.
# A segment is ".field", ("name", index) rendered ".name[index]", or ("bindings", i, binding_a, binding_b).


def _render_path(path) -> str:
    segs = []
    while path is not None:
        path, seg = path
        segs.append(seg)
    out = []
    for seg in reversed(segs):
        if isinstance(seg, str):
            out.append(seg)
        elif seg[0] == "functions":
            out.append(f'.functions["{seg[1]}"]')
        else:
            out.append(f".{seg[0]}[{seg[1]}]")
    return "".join(out)


def _enclosing_bindings(path):
    while path is not None:
        path, seg = path
        if isinstance(seg, tuple) and len(seg) == 4:
            return seg[2], seg[3]
    return None


# -- equality ---------------------------------------------------------------


class _Mismatch(Exception):
    """Internal: carries the first difference out of the comparison loop."""

    def __init__(self, path, left, right, reason: str = ""):
        self.path, self.left, self.right, self.reason = path, left, right, reason


class _Comparer:
    """Compares two IR objects with an explicit work stack, mapping defined vars and symbolic dims."""

    def __init__(self, map_free_vars: bool):
        self.map_free = map_free_vars
        self.vmap: dict[Var, Var] = {}
        self.rmap: dict[Var, Var] = {}
        self.dmap: dict[str, str] = {}
        self.rdmap: dict[str, str] = {}
        self.dim_scopes: list[tuple[dict, dict]] = []
        self.same_tuples: set[tuple[int, int]] = set()  # ids of tuple struct infos found equal in this scope

    # entry point ----------------------------------------------------------
    def run(self, a, b, root: str) -> None:
        path = (None, root)
        stack = [(_NODE, a, b, path)]
        push = stack.append
        node = self.node
        while stack:
            kind, x, y, p = stack.pop()
            if kind == _NODE:
                node(x, y, p, push)
            elif kind == _BINDING:
                if type(x.var) is not type(y.var):
                    raise _Mismatch((p, ".var"), x.var, y.var, "one is a DataflowVar, the other a Var")
                push((_DEF, x.var, y.var, (p, ".var")))
                push((_NODE, x.value, y.value, (p, ".value")))
            elif kind == _DEF:
                self.define(x, y, p)
            elif kind == _SINFO:
                self.sinfo(x, y, p)
            elif kind == _BLOCK:
                self.block(x, y, p, push)
            elif kind == _ENTER_FUNC:
                self.dim_scopes.append((dict(self.dmap), dict(self.rdmap)))
                self.same_tuples = set()
            else:  # _EXIT_FUNC
                self.dmap, self.rdmap = self.dim_scopes.pop()
                self.same_tuples = set()

    # variables ------------------------------------------------------------
    def define(self, x: Var, y: Var, p) -> None:
        if type(x) is not type(y):
            raise _Mismatch(p, x, y, "one is a DataflowVar, the other a Var")
        have = self.vmap.get(x)
        if have is not None:
            if have is not y:
                raise _Mismatch(p, x, y, f"'{x.name_hint}' is already bound to '{have.name_hint}'")
            return
        if y in self.rmap:
            raise _Mismatch(p, x, y, f"'{y.name_hint}' is already bound to '{self.rmap[y].name_hint}'")
        self.sinfo(x.struct_info, y.struct_info, (p, ".struct_info"))
        self.vmap[x] = y
        self.rmap[y] = x

    def use(self, x: Var, y: Var, p) -> None:
        have = self.vmap.get(x)
        if have is not None:
            if have is not y:
                raise _Mismatch(p, x, y, f"'{x.name_hint}' corresponds to '{have.name_hint}' here")
            return
        if y in self.rmap:
            raise _Mismatch(p, x, y, f"'{y.name_hint}' corresponds to '{self.rmap[y].name_hint}' here")
        if x is y:
            return
        if not self.map_free:
            raise _Mismatch(p, x, y, "different free variables (use map_free_vars=True to map them)")
        self.define(x, y, p)

    # symbolic dims --------------------------------------------------------
    def ident(self, x: str, y: str) -> bool:
        have = self.dmap.get(x)
        if have is not None:
            return have == y
        if y in self.rdmap:
            return False
        if self.dim_scopes or self.map_free:
            self.dmap[x] = y
            self.rdmap[y] = x
            return True
        return x == y

    def dim(self, x, y) -> bool:
        if isinstance(x, str) and isinstance(y, str):
            if is_dim_name(x) and is_dim_name(y):
                return self.ident(x, y)
            tx, ty = dim_tokens(x), dim_tokens(y)
            if len(tx) != len(ty):
                return False
            for a, b in zip(tx, ty):
                if is_dim_name(a) and is_dim_name(b):
                    if not self.ident(a, b):
                        return False
                elif a != b:
                    return False
            return True
        if isinstance(x, str) or isinstance(y, str):
            return False
        return x == y

    def dims(self, xs, ys) -> bool:
        if xs is None or ys is None:
            return xs is ys
        return len(xs) == len(ys) and all(self.dim(a, b) for a, b in zip(xs, ys))

    # struct info ----------------------------------------------------------
    def sinfo(self, x, y, p) -> None:
        # A stack, fields in order: tuple struct infos nest to any depth. Tuple pairs found equal are
        # remembered for the function scope (dim maps only grow in it): a chain of bindings each typed
        # by the previous one's tuple field shares its struct info, and comparing each afresh is quadratic.
        same = self.same_tuples
        checked = []
        stack = [(x, y, p)]
        while stack:
            x, y, p = stack.pop()
            if x is None or y is None:
                if x is not y:
                    raise _Mismatch(p, x, y, "struct info present on one side only")
                continue
            if type(x) is not type(y):
                raise _Mismatch(p, x, y)
            if isinstance(x, TensorStructInfo):
                if x.dtype != y.dtype or x.ndim != y.ndim or not self.dims(x.shape, y.shape):
                    raise _Mismatch(p, x, y)
            elif isinstance(x, TupleStructInfo):
                if (id(x), id(y)) in same:
                    continue
                if len(x.fields) != len(y.fields):
                    raise _Mismatch(p, x, y, f"{len(x.fields)} vs {len(y.fields)} fields")
                checked.append((id(x), id(y)))
                for i in range(len(x.fields) - 1, -1, -1):
                    stack.append((x.fields[i], y.fields[i], (p, ("fields", i))))
            elif isinstance(x, ShapeStructInfo):
                if x.ndim != y.ndim or not self.dims(x.values, y.values):
                    raise _Mismatch(p, x, y)
            elif isinstance(x, PrimStructInfo):
                if x.dtype != y.dtype or not value_equal(x.value, y.value):
                    raise _Mismatch(p, x, y)
            elif isinstance(x, FuncStructInfo):
                if len(x.params) != len(y.params) or x.purity != y.purity:
                    raise _Mismatch(p, x, y)
                stack.append((x.ret, y.ret, (p, ".ret")))
                for i in range(len(x.params) - 1, -1, -1):
                    stack.append((x.params[i], y.params[i], (p, ("params", i))))
            elif x != y:
                raise _Mismatch(p, x, y)
        same.update(checked)

    # blocks ---------------------------------------------------------------
    def block(self, x: BindingBlock, y: BindingBlock, p, push) -> None:
        if type(x) is not type(y):
            raise _Mismatch(p, x, y, "different block kinds")
        xb, yb = x.bindings, y.bindings
        if len(xb) != len(yb):
            raise _Mismatch(p, x, y, f"{len(xb)} vs {len(yb)} bindings")
        for i in range(len(xb) - 1, -1, -1):
            bx, by = xb[i], yb[i]
            push((_BINDING, bx, by, (p, ("bindings", i, bx, by))))

    # expressions and other roots --------------------------------------------
    def node(self, x, y, p, push) -> None:
        tx = type(x)
        if tx is not type(y):
            if isinstance(x, Var) and isinstance(y, Var):
                have = self.vmap.get(x)
                if have is not None:
                    raise _Mismatch(p, x, y, f"'{x.name_hint}' corresponds to '{have.name_hint}' here")
                raise _Mismatch(p, x, y, "one is a DataflowVar, the other a Var")
            raise _Mismatch(p, x, y)
        if tx is Var or tx is DataflowVar:
            self.use(x, y, p)
        elif tx is Call:
            xo, yo = x.op, y.op
            if xo is not yo:
                if isinstance(xo, GlobalVar) and isinstance(yo, GlobalVar):
                    if xo.name_hint != yo.name_hint:
                        raise _Mismatch((p, ".op"), xo, yo)
                elif isinstance(xo, Var) and isinstance(yo, Var):
                    push((_NODE, xo, yo, (p, ".op")))
                elif getattr(xo, "name", None) != getattr(yo, "name", None) or type(xo) is not type(yo):
                    raise _Mismatch((p, ".op"), x, y, f"op {op_script_name(xo)} vs {op_script_name(yo)}")
            xa, ya = x.args, y.args
            if len(xa) != len(ya):
                raise _Mismatch(p, x, y, f"{len(xa)} vs {len(ya)} arguments")
            if x.attrs is not y.attrs and not value_equal(x.attrs, y.attrs):
                raise _Mismatch((p, ".attrs"), x, y, _attrs_reason(x.attrs, y.attrs))
            for i in range(len(xa) - 1, -1, -1):
                push((_NODE, xa[i], ya[i], (p, ("args", i))))
        elif tx is Tuple:
            if len(x.fields) != len(y.fields):
                raise _Mismatch(p, x, y, f"{len(x.fields)} vs {len(y.fields)} fields")
            for i in range(len(x.fields) - 1, -1, -1):
                push((_NODE, x.fields[i], y.fields[i], (p, ("fields", i))))
        elif tx is TupleGetItem:
            if x.index != y.index:
                raise _Mismatch(p, x, y, f"index {x.index} vs {y.index}")
            push((_NODE, x.tuple_value, y.tuple_value, (p, ".tuple_value")))
        elif tx is Constant:
            a, b = np.asarray(x.data), np.asarray(y.data)
            if not array_equal(a, b):
                raise _Mismatch(p, x, y, _const_reason(a, b))
        elif tx is GlobalVar:
            if x.name_hint != y.name_hint:
                raise _Mismatch(p, x, y)
        elif tx is ShapeExpr:
            if not self.dims(tuple(x.values), tuple(y.values)):
                raise _Mismatch(p, x, y)
        elif tx is PrimValue:
            if x.dtype != y.dtype or not value_equal(x.value, y.value):
                raise _Mismatch(p, x, y)
        elif tx is StringImm:
            if x.value != y.value:
                raise _Mismatch(p, x, y)
        elif tx is SeqExpr:
            if len(x.blocks) != len(y.blocks):
                raise _Mismatch(p, x, y, f"{len(x.blocks)} vs {len(y.blocks)} blocks")
            push((_NODE, x.body, y.body, (p, ".body")))
            for i in range(len(x.blocks) - 1, -1, -1):
                push((_BLOCK, x.blocks[i], y.blocks[i], (p, ("blocks", i))))
        elif tx is If:
            push((_NODE, x.false_branch, y.false_branch, (p, ".false_branch")))
            push((_NODE, x.true_branch, y.true_branch, (p, ".true_branch")))
            push((_NODE, x.cond, y.cond, (p, ".cond")))
        elif tx is Function:
            if len(x.params) != len(y.params):
                raise _Mismatch(p, x, y, f"{len(x.params)} vs {len(y.params)} parameters")
            if x.is_pure != y.is_pure:
                raise _Mismatch(p, x, y, f"pure={x.is_pure} vs pure={y.is_pure}")
            if x.private != y.private:
                raise _Mismatch(p, x, y, f"private={x.private} vs private={y.private}")
            if not value_equal(x.attrs, y.attrs):
                raise _Mismatch((p, ".attrs"), x, y, _attrs_reason(x.attrs, y.attrs))
            push((_EXIT_FUNC, None, None, p))
            push((_NODE, x.body, y.body, (p, ".body")))
            push((_SINFO, x.ret_struct_info, y.ret_struct_info, (p, ".ret_struct_info")))
            for i in range(len(x.params) - 1, -1, -1):
                push((_DEF, x.params[i], y.params[i], (p, ("params", i))))
            push((_ENTER_FUNC, None, None, p))
        elif tx is IRModule:
            if set(x.keys()) != set(y.keys()):
                only_a = sorted(set(x.keys()) - set(y.keys()))
                only_b = sorted(set(y.keys()) - set(x.keys()))
                raise _Mismatch(p, x, y, f"functions only on the left: {only_a}, only on the right: {only_b}")
            if not value_equal(x.attrs, y.attrs):
                raise _Mismatch((p, ".attrs"), x, y, _attrs_reason(x.attrs, y.attrs))
            if x.tir != y.tir:  # opaque TIR text: equal as text
                differ = sorted(set(x.tir) ^ set(y.tir) | {n for n in set(x.tir) & set(y.tir) if x.tir[n] != y.tir[n]})
                raise _Mismatch((p, ".tir"), x, y, f"TIR functions differ: {differ}")
            names = list(x.keys())
            for name in reversed(names):
                push((_NODE, x[name], y[name], (p, ("functions", name))))
        elif issubclass(tx, BindingBlock):
            self.block(x, y, p, push)
        elif tx is VarBinding:
            push((_BINDING, x, y, (p, ("bindings", 0, x, y))))
        elif isinstance(x, StructInfo):
            self.sinfo(x, y, p)
        elif x is None:
            return
        elif isinstance(x, list | tuple):
            if len(x) != len(y):
                raise _Mismatch(p, x, y, f"{len(x)} vs {len(y)} items")
            for i in range(len(x) - 1, -1, -1):
                push((_NODE, x[i], y[i], (p, ("items", i))))
        elif not value_equal(x, y):
            raise _Mismatch(p, x, y)


def _attrs_reason(a: dict, b: dict) -> str:
    for key in list(a) + [k for k in b if k not in a]:
        if key not in a:
            return f"attribute '{key}' only on the right"
        if key not in b:
            return f"attribute '{key}' only on the left"
        if not value_equal(a[key], b[key]):
            return f"attribute '{key}': {a[key]!r} vs {b[key]!r}"
    return "attributes differ"


def _const_reason(a: np.ndarray, b: np.ndarray) -> str:
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} vs {b.dtype}"
    if a.shape != b.shape:
        return f"shape {a.shape} vs {b.shape}"
    diff = np.argwhere(~((a == b) | ((a != a) & (b != b)))) if a.dtype.kind in "fc" else np.argwhere(a != b)
    if len(diff):
        idx = tuple(int(i) for i in diff[0])
        return f"values differ first at index {idx}: {a[idx].item()!r} vs {b[idx].item()!r}"
    return "values differ"


def _root_name(x) -> str:
    if isinstance(x, IRModule):
        return "Module"
    if isinstance(x, StructInfo):
        return "StructInfo"
    return type(x).__name__


def first_difference(a, b, map_free_vars: bool = False) -> str | None:
    """None if `a` and `b` are structurally equal, else a message naming the path of the first difference."""
    comparer = _Comparer(map_free_vars)
    try:
        comparer.run(a, b, _root_name(a))
    except _Mismatch as m:
        return _message(m)
    return None


def _message(m: _Mismatch) -> str:
    path = _render_path(m.path)
    head = f"{path}: {brief(m.left)} vs {brief(m.right)}"
    lines = [head]
    if m.reason:
        lines.append(f"  ({m.reason})")
    ctx = _enclosing_bindings(m.path)
    if ctx is not None:
        lines.append(f"  left:  {brief(ctx[0], 160)}")
        lines.append(f"  right: {brief(ctx[1], 160)}")
    return "\n".join(lines)


def structural_equal(a, b, map_free_vars: bool = False) -> bool:
    """Equality of modules, functions, expressions or struct info modulo renaming of vars and symbolic dims.

    Vars defined at the same position (parameters, binding vars) correspond; free vars must be the
    same object unless `map_free_vars`. Spans and names are ignored; GlobalVars compare by name.
    """
    return first_difference(a, b, map_free_vars) is None


def assert_structural_equal(a, b, map_free_vars: bool = False) -> None:
    """Raise AssertionError whose message names the path of the first difference and shows both sides."""
    diff = first_difference(a, b, map_free_vars)
    if diff is not None:
        raise AssertionError("structural mismatch at " + diff)
