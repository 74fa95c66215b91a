"""Short text of IR: the one struct-info renderer (annotations and messages) and one-line node briefs."""

from __future__ import annotations

import re

import numpy as np

from retrograd.errors import UnsupportedError
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
from retrograd.ir.nested import fold, joined, render
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)

__all__ = ["format_sinfo", "brief", "op_script_name"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# -- struct info --------------------------------------------------------------------------------


def _dim(d, quote_names: bool) -> str:
    if isinstance(d, str):
        # A plain name in a parameter is quoted: that is where TVM defines the symbolic var.
        return f'"{d}"' if quote_names and _IDENT.match(d) else d
    return str(d)


def _dims(dims, quote_names: bool = False) -> str:
    items = [_dim(d, quote_names) for d in dims]
    return ", ".join(items) + ("," if len(items) == 1 else "")


def format_sinfo(s, quote_names: bool = False, *, dtype_keyword: bool = True, brief: bool = False) -> str:
    """Struct info as text. By default the annotation the printer writes, which parses back:
    `R.Tensor((3, n), dtype="float32")` (quote_names quotes symbolic names, as parameters need);
    dtype_keyword=False writes a known shape's dtype positionally, `R.Tensor((3, n), "float32")`;
    brief=True gives the short form of error messages, `Tensor((3, n), float32)`, `?` for unknowns."""
    nested = s.__class__ is TupleStructInfo or s.__class__ is FuncStructInfo
    if brief:
        return render(s, _brief_sinfo_parts) if nested else _brief_sinfo_parts(s)[0]
    if not nested:  # the common case, without render's set-up
        return _sinfo_parts(s, quote_names, dtype_keyword)[0]
    # Rendered with a stack: tuple struct infos nest to any depth.
    return render(s, lambda x: _sinfo_parts(x, quote_names, dtype_keyword))


def format_sinfo_shared(s, memo: dict, brief: bool = False) -> str:
    """format_sinfo(s, brief=brief), the texts of nested struct infos kept in `memo` (by id: the caller
    keeps them alive; one memo per `brief`) and reused: the printer annotates a chain of bindings each
    typed by a field of the previous one's tuple, and rendering each afresh would be quadratic."""
    if s.__class__ is not TupleStructInfo and s.__class__ is not FuncStructInfo:
        return format_sinfo(s, brief=brief)
    return fold(s, _sinfo_children, _brief_text if brief else _sinfo_text, memo=memo)


def _sinfo_children(s) -> tuple:
    if s.__class__ is TupleStructInfo:
        return s.fields
    if s.__class__ is FuncStructInfo:
        return s.params + (s.ret,)
    return ()


def _sinfo_text(s, kids) -> str:
    if s.__class__ is TupleStructInfo:
        return f"R.Tuple({', '.join(kids)})" if kids else "R.Tuple"
    if s.__class__ is FuncStructInfo:
        pure = "" if s.purity else ", purity=False"
        return f"R.Callable([{', '.join(kids[:-1])}], {kids[-1]}{pure})"
    return format_sinfo(s)


def _brief_text(s, kids) -> str:
    if s.__class__ is TupleStructInfo:
        return f"Tuple({', '.join(kids)})"
    if s.__class__ is FuncStructInfo:
        return f"Callable(({', '.join(kids[:-1])}), {kids[-1]})"
    return format_sinfo(s, brief=True)


def _sinfo_parts(s, quote_names: bool, dtype_keyword: bool) -> list:
    """The text of one struct info, its nested struct infos left as items for `render`."""
    if isinstance(s, TensorStructInfo):
        parts = []
        if s.shape is not None:
            parts.append(f"({_dims(s.shape, quote_names)})")
        if s.dtype:
            parts.append(f'"{s.dtype}"' if not dtype_keyword and s.shape is not None else f'dtype="{s.dtype}"')
        if s.shape is None and s.ndim != -1:
            parts.append(f"ndim={s.ndim}")
        return [f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"]
    if isinstance(s, TupleStructInfo):
        if not s.fields:
            return ["R.Tuple"]
        return ["R.Tuple(", *joined(s.fields), ")"]
    if isinstance(s, ShapeStructInfo):
        if s.values is not None:
            return [f"R.Shape([{', '.join(_dim(d, quote_names) for d in s.values)}])"]
        return [f"R.Shape(ndim={s.ndim})" if s.ndim != -1 else "R.Shape"]
    if isinstance(s, PrimStructInfo):
        return [f'R.Prim("{s.dtype}")']
    if isinstance(s, FuncStructInfo):
        pure = "" if s.purity else ", purity=False"
        return ["R.Callable([", *joined(s.params), "], ", s.ret, f"{pure})"]
    if isinstance(s, ObjectStructInfo) or s is None:
        return ["R.Object"]
    raise UnsupportedError(f"cannot print struct info {s!r}")


def _brief_sinfo_parts(s) -> list:
    if isinstance(s, TensorStructInfo):
        dims = f"({_dims(s.shape)})" if s.shape is not None else f"ndim={s.ndim}"
        return [f"Tensor({dims}, {s.dtype or '?'})"]
    if isinstance(s, TupleStructInfo):
        return ["Tuple(", *joined(s.fields), ")"]
    if isinstance(s, ShapeStructInfo):
        return [f"Shape({list(s.values) if s.values is not None else f'ndim={s.ndim}'})"]
    if isinstance(s, PrimStructInfo):
        return [f"Prim({s.dtype})"]
    if isinstance(s, FuncStructInfo):
        return ["Callable((", *joined(s.params), "), ", s.ret, ")"]
    if isinstance(s, ObjectStructInfo):
        return ["Object"]
    return ["?" if s is None else type(s).__name__]


# -- expressions and other nodes --------------------------------------------------------------


def op_script_name(op) -> str:
    """How a script names what is called: `R.nn.relu` for relax.nn.relu, `cls.f` for a module function."""
    if isinstance(op, GlobalVar):
        return f"cls.{op.name_hint}"
    name = getattr(op, "name", None)
    if isinstance(name, str):
        return "R." + name[len("relax.") :] if name.startswith("relax.") else name
    return repr(op)


def brief(x, limit: int = 100) -> str:
    """One line describing a node (expression, binding, block, struct info, module) for messages."""
    text = _brief_full(x)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _brief_full(x) -> str:
    if isinstance(x, Var):
        return f"{'DataflowVar' if isinstance(x, DataflowVar) else 'Var'} '{x.name_hint}'"
    if isinstance(x, GlobalVar):
        return f"GlobalVar '{x.name_hint}'"
    if isinstance(x, Constant):
        data = np.asarray(x.data)
        if data.ndim == 0:
            return f'R.const({data.item()!r}, "{data.dtype}")'
        head = ", ".join(repr(v) for v in data.ravel()[:4].tolist()) + (", ..." if data.size > 4 else "")
        return f"Constant({data.dtype}{list(data.shape)}: [{head}])"
    if isinstance(x, ShapeExpr):
        return f"R.shape({list(x.values)})"
    if isinstance(x, PrimValue):
        return f'R.prim_value({x.value!r}, "{x.dtype}")'
    if isinstance(x, StringImm):
        return f"R.str({x.value!r})"
    if isinstance(x, Tuple | TupleGetItem):
        return render(x, _brief_tuple_parts)  # tuples nest to any depth
    if isinstance(x, Call):
        args = [_arg_text(a) for a in x.args] + [f"{k}={_attr_text(v)}" for k, v in x.attrs.items()]
        return f"{op_script_name(x.op)}({', '.join(args)})"
    if isinstance(x, If):
        return f"if {_arg_text(x.cond)}: ... else: ..."
    if isinstance(x, SeqExpr):
        return f"SeqExpr({len(x.blocks)} blocks, result {_arg_text(x.body)})"
    if isinstance(x, Function):
        return "Function(" + ", ".join(p.name_hint for p in x.params) + ")"
    if isinstance(x, IRModule):
        return f"IRModule({', '.join(x.keys())})"
    if isinstance(x, VarBinding):
        return f"{x.var.name_hint}: {_sinfo_message(x.var.struct_info)} = {_brief_full(x.value)}"
    if isinstance(x, BindingBlock):
        return f"{type(x).__name__} of {len(x.bindings)} bindings"
    if isinstance(x, StructInfo):
        return _sinfo_message(x)
    return repr(x)


def _brief_tuple_parts(x) -> list:
    if isinstance(x, Tuple):
        return ["(", *joined(x.fields), ",)" if len(x.fields) == 1 else ")"]
    if isinstance(x, TupleGetItem):
        return [x.tuple_value, f"[{x.index}]"]
    return [_arg_text(x)]


def _sinfo_message(s) -> str:
    return "<no struct info>" if s is None else format_sinfo(s, dtype_keyword=False)


def _attr_text(v) -> str:
    # Struct info (R.match_cast's target) as script text, never as a Python repr.
    return _sinfo_message(v) if isinstance(v, StructInfo) else repr(v)


def _arg_text(x) -> str:
    return x.name_hint if isinstance(x, Var | GlobalVar) else _brief_full(x)
