"""Meanings of syntax that is not a value: literals, symbolic dims, struct-info annotations, constants."""

from __future__ import annotations

import math
import re

import numpy as np

from retrograd.errors import NameError_, OpError, Span, TypeInferenceError, UnsupportedError
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from retrograd.ir.dtypes import float_max, numpy_dtype
from retrograd.ops.attr_types import DTYPES, UNSUPPORTED_DTYPES
from retrograd.ops.manipulate.index_map import IndexMap
from retrograd.parser.syntax import (
    K_ARITH,
    K_CALL,
    K_DICT,
    K_KWARG,
    K_LAMBDA,
    K_LIST,
    K_LIT,
    K_NAME,
    K_NEG,
    K_NUM,
    K_STR,
    K_TUPLE,
    Node,
)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "/": 2, "%": 2}
# TIR functions TVM prints inside symbolic dims (`T.min(3, n) - T.min(1, n)`).
_DIM_FUNCS = frozenset(("T.min", "T.max", "T.floordiv", "T.floormod", "T.truncdiv", "T.truncmod", "T.if_then_else"))
_SPECIAL_FLOATS = {"inf": float("inf"), "nan": float("nan"), "-inf": float("-inf"), "+inf": float("inf"),
                   "-nan": float("nan"), "+nan": float("nan"), "infinity": float("inf"), "-infinity": float("-inf"),
                   "+infinity": float("inf")}


class Ctx:
    """What the helpers need to report errors: the source and its name."""

    __slots__ = ("text", "source_name", "symbols")

    def __init__(self, text: str, source_name: str):
        self.text = text
        self.source_name = source_name
        # Symbolic dim names declared where a bare name is read; None: not checked (dims in strings).
        self.symbols: set[str] | None = None

    def span(self, node: Node) -> Span:
        return Span(self.source_name, node.line, node.col, node.end_line, node.end_col, self.text)


def resolve_arith(items: list):
    """Precedence climbing over a flat [operand, op, operand, ...] list -> nested (op, lhs, rhs)."""
    pos = 0

    def parse(min_prec: int):
        nonlocal pos
        lhs = items[pos]
        pos += 1
        while pos < len(items):
            op = items[pos]
            prec = _PREC[op]
            if prec < min_prec:
                break
            pos += 1
            rhs = parse(prec + 1)
            lhs = (op, lhs, rhs)
        return lhs

    return parse(1)


# -- literals ---------------------------------------------------------------------------------


class NotLiteral(Exception):
    """Raised (internally) when an expression is not a literal; carries the offending node."""

    def __init__(self, node: Node, reason: str | None = None):
        self.node = node
        self.reason = reason


# Literal lists and dicts nest at most this deep (their printed form adds a few brackets).
MAX_LITERAL_NESTING = 100


def literal(node: Node, depth: int = 0):
    """A Python value from literal syntax: numbers, strings, True/False/None, lists, tuples, dicts."""
    k = node.kind
    if depth > MAX_LITERAL_NESTING:
        raise NotLiteral(node, f"a literal is nested too deeply (more than {MAX_LITERAL_NESTING} levels)")
    if k == K_NUM or k == K_STR or k == K_LIT:
        return node.value
    if k == K_NEG:
        v = literal(node.items, depth + 1)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise NotLiteral(node)
        return -v
    if k == K_LIST or k == K_TUPLE:
        return tuple(literal(x, depth + 1) for x in node.items)
    if k == K_DICT:
        out = {}
        for a, b in node.items:
            key = literal(a, depth + 1)
            if isinstance(key, dict) or (isinstance(key, tuple) and not _hashable(key)):
                raise NotLiteral(a, "a dict key is a number, string, True/False/None or a tuple of them")
            out[key] = literal(b, depth + 1)
        return out
    if k == K_LAMBDA:
        return index_map(node)
    if k == K_CALL and node.value.kind == K_NAME and len(node.items) == 1 and node.items[0].kind != K_KWARG:
        fname, arg = node.value.value, node.items[0]
        if fname == "T.index_map" and arg.kind == K_LAMBDA:
            return index_map(arg)
        if fname == "float" and arg.kind == K_STR and arg.value.strip().lower() in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[arg.value.strip().lower()]
        # Typed scalars as TVM's frontend prints attribute values: T.float32(0.5), R.prim_value(3).
        if fname.startswith("T.") and fname[2:] in DTYPES:
            return _typed(literal(arg, depth + 1), fname[2:], node)
        if fname == "R.prim_value":
            return literal(arg, depth + 1)
        if fname == "R.str" and arg.kind == K_STR:  # a string TVM holds as an expression (assert_op's format)
            return arg.value
    raise NotLiteral(node)


def index_map(node: Node) -> IndexMap:
    """A lambda (`T.index_map(lambda i, j: (j, i))`) as an IndexMap: its body read as integer arithmetic on
    its parameters, never evaluated."""
    body = node.items
    results = body.items if body.kind in (K_TUPLE, K_LIST) else [body]
    trees = []
    for r in results:
        stack, out = [(r, False)], []
        while stack:
            n, done = stack.pop()
            if done:
                b, a = out.pop(), out.pop()
                out.append((n, a, b))
            elif isinstance(n, tuple):  # an (op, lhs, rhs) from resolve_arith
                stack += [(n[0], True), (n[2], False), (n[1], False)]
            elif n.kind == K_ARITH:
                stack.append((resolve_arith(n.items), False))
            elif n.kind == K_NEG:
                out.append(-1)  # -x as -1 * x
                stack += [("*", True), (n.items, False)]
            elif n.kind == K_NAME:
                out.append(n.value)
            elif n.kind == K_NUM and isinstance(n.value, int):
                out.append(n.value)
            else:
                raise NotLiteral(n, "an index_map result is integer arithmetic (+ - * // %) on its parameters")
        trees.append(out[0])
    try:
        return IndexMap.make(list(node.value), trees)
    except ValueError as err:
        raise NotLiteral(node, str(err)) from None


def parse_index_map(text: str) -> IndexMap:
    """An index map from its text, `T.index_map(lambda i, j: (j, i // T.int64(3)))` (TVM's printed form:
    typed integer literals are read as plain integers)."""
    from retrograd.parser.syntax import parse_syntax

    plain = re.sub(r"T\.int(?:32|64)\((-?\d+)\)", r"\1", text)
    (assign,) = parse_syntax(f"index_map = {plain}\n", "<index_map>")
    return literal(assign.items[0])


def typed_special_float(v, dtype: str):
    """TVM prints a float scalar that is not finite as a string, T.float32("inf") / ("-inf") / ("nan"):
    that string as the float it names, for a float dtype; anything else unchanged."""
    if isinstance(v, str) and dtype.startswith(("float", "bfloat")):
        return _SPECIAL_FLOATS.get(v.strip().lower(), v)
    return v


def _typed(v, dtype: str, node: Node):
    """A T.<dtype>(v) literal as the Python number of that dtype's kind."""
    v = typed_special_float(v, dtype)
    if isinstance(v, bool) or not isinstance(v, int | float):
        if dtype == "bool" and isinstance(v, bool):
            return v
        raise NotLiteral(node, f"T.{dtype}(...) takes a number")
    if dtype == "bool":
        return bool(v)
    if dtype.startswith(("int", "uint")):
        if isinstance(v, float) and not v.is_integer():
            raise NotLiteral(node, f"T.{dtype}(...) takes an integer, got {v!r}")
        return int(v)
    return float(v)


def _hashable(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def nested_literal(node: Node, depth: int = 0):
    """Like `literal` but lists stay lists (for R.const data)."""
    k = node.kind
    if k == K_LIST or k == K_TUPLE:
        if depth > MAX_LITERAL_NESTING:
            raise NotLiteral(node, f"a literal is nested too deeply (more than {MAX_LITERAL_NESTING} levels)")
        return [nested_literal(x, depth + 1) for x in node.items]
    return literal(node, depth)


def prim_value(ctx: Ctx, value, dtype: str, node: Node):
    """`value` as a `dtype` scalar, or a located error when it is not a number of that dtype's range
    (`T.int8(1000)`, `T.uint8(-1)`, `T.int64(2.5)`, `T.int64("a")`)."""
    what = f"T.{dtype}(...)"
    value = typed_special_float(value, dtype)
    if not isinstance(value, bool | int | float):
        special = ' or "inf", "-inf", "nan"' if dtype.startswith(("float", "bfloat")) else ""
        raise OpError(f"{what} takes a number{special}", ctx.span(node))
    if dtype == "bool":
        if value not in (0, 1):
            raise OpError(f"{what} takes True, False, 0 or 1, got {value!r}", ctx.span(node))
        return bool(value)
    if dtype.startswith(("int", "uint")):
        if isinstance(value, float):
            if not value.is_integer():
                raise OpError(f"{what} takes an integer, got {value!r}", ctx.span(node))
            value = int(value)
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OpError(f"{value} is out of range for {dtype} [{info.min}, {info.max}]", ctx.span(node))
        return int(value)
    value = float(value)
    if math.isfinite(value) and abs(value) > float_max(dtype):
        raise OpError(f"{value!r} is out of range for {dtype}", ctx.span(node))
    return value


# -- symbolic dims ----------------------------------------------------------------------------


def dim(ctx: Ctx, node: Node, parse_text=None, allow_negative: bool = False):
    """A dim: an int, or the canonical text of a symbolic expression (`n`, `n * 4`, `T.min(3, n)`).

    `allow_negative` admits `-1` (reshape's inferred dim) in shape values; annotations never do.
    """
    k = node.kind
    value = _const_dim(ctx, node)
    if value is not None:
        if value < 0 and not allow_negative:
            raise TypeInferenceError(f"a dimension must be a non-negative integer or a symbolic expression, got {value}", ctx.span(node))
        if value > _MAX_DIM:
            raise TypeInferenceError(f"dimension {value} is beyond the int64 range", ctx.span(node))
        return value
    if k == K_NUM:
        raise TypeInferenceError(f"a dimension must be a non-negative integer or a symbolic expression, got {node.value}", ctx.span(node))
    if k == K_NAME:
        if "." in node.value:
            raise TypeInferenceError(f"'{node.value}' is not a dimension", ctx.span(node))
        _check_declared(ctx, node)
        return node.value
    if k == K_STR:
        text = node.value.strip()
        if _IDENT.match(text):
            if ctx.symbols is not None:
                ctx.symbols.add(text)  # a name in a string defines it (TVM: in a signature)
            return text
        if text.isascii() and text.isdigit():  # not "²" or "٣", which str.isdigit() also accepts
            return dim(ctx, Node(K_NUM, int(text), text, node.line, node.col, node.end_line, node.end_col))
        if parse_text is None:
            raise TypeInferenceError(f"cannot read dimension {node.value!r}", ctx.span(node))
        inner = parse_text(text, node)
        return dim(ctx, inner, parse_text)  # "n + 1" defines nothing: n must be defined (TVM: name 'n' is not defined)
    text, _ = _dim_text(ctx, node)
    return text


def _check_declared(ctx: Ctx, node: Node) -> None:
    """A bare symbolic dim name must be declared (`n = T.int64()`) or defined by a string dim of the
    function's signature; TVM's parser reports the same, in these words."""
    if ctx.symbols is not None and node.value not in ctx.symbols:
        raise NameError_(
            f"Undefined variable: {node.value}",
            ctx.span(node),
            notes=[f"declare a symbolic dim with `{node.value} = T.int64()` (before the module or first in the "
                   f'function body), or name it in a string in the signature: R.Tensor(("{node.value}", ...))'],
        )


_MAX_DIM = 2**63 - 1


def _const_dim(ctx: Ctx, node: Node) -> int | None:
    """The value of a dim made of integer literals only (`5`, `T.int64(5)`, `-1`, `2 * 3`), else None.

    Such a dim is a number, never the symbolic name "5" nor the text "-1".
    """
    k = node.kind
    if k == K_NUM:
        return node.value if isinstance(node.value, int) else None
    if k == K_NEG:
        v = _const_dim(ctx, node.items)
        return None if v is None else -v
    if k == K_CALL and node.value.kind == K_NAME and len(node.items) == 1:
        fname = node.value.value
        if fname.startswith("T.") and fname[2:] in DTYPES and fname[2:] != "bool" and node.items[0].kind != K_KWARG:
            return _const_dim(ctx, node.items[0])
        return None
    if k != K_ARITH:
        return None
    values = [x if isinstance(x, str) else _const_dim(ctx, x) for x in node.items]
    if any(v is None for v in values):
        return None
    return _fold(ctx, resolve_arith(values), node)


def _fold(ctx: Ctx, tree, node: Node) -> int:
    """Evaluate a resolve_arith tree of ints with an explicit stack (a flat sum nests as deep as it is long)."""
    stack, values = [(tree, False)], []
    while stack:
        t, ready = stack.pop()
        if not isinstance(t, tuple):
            values.append(t)
            continue
        if not ready:
            stack += [(t, True), (t[2], False), (t[1], False)]
            continue
        b, a = values.pop(), values.pop()
        op = t[0]
        if op == "/":
            raise TypeInferenceError("symbolic dims use // for division", ctx.span(node))
        if op in ("//", "%") and b == 0:
            raise TypeInferenceError("division by zero in a dimension", ctx.span(node))
        if max(abs(a), abs(b)) > _MAX_DIM:
            raise TypeInferenceError("a dimension is beyond the int64 range", ctx.span(node))
        values.append(a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else a // b if op == "//" else a % b)
    return values[0]


def _dim_text(ctx: Ctx, node: Node) -> tuple[str, int]:
    """(canonical text, precedence) of a symbolic dim expression; parentheses only where needed."""
    k = node.kind
    if k == K_NUM and isinstance(node.value, int):
        return str(node.value), 4
    if k == K_NAME and "." not in node.value:
        _check_declared(ctx, node)
        return node.value, 4
    if k == K_STR:
        # As in TVM, where Python refuses -"n" and "n" + 1; the dims they imply would be undeclared.
        raise TypeInferenceError(
            f"a string dim cannot take part in an expression: declare `{node.value.strip()} = T.int64()` and use the name",
            ctx.span(node),
        )
    if k == K_NEG:
        text, prec = _dim_text(ctx, node.items)
        return "-" + (f"({text})" if prec < 3 else text), 3
    if k == K_ARITH:
        return _render(ctx, resolve_arith(node.items))
    if k == K_CALL and node.value.kind == K_NAME:
        fname = node.value.value
        if fname in _DIM_FUNCS and all(a.kind != K_KWARG for a in node.items):
            args = ", ".join(_dim_text(ctx, a)[0] for a in node.items)
            return f"{fname}({args})", 4
        if fname.startswith("T.") and fname[2:] in DTYPES and len(node.items) == 1:
            return _dim_text(ctx, node.items[0])
    raise TypeInferenceError("expected a dimension (an integer or a symbolic expression such as n * 2)", ctx.span(node))


def _render(ctx: Ctx, tree) -> tuple[str, int]:
    if not isinstance(tree, tuple):
        return _dim_text(ctx, tree)
    op, lhs, rhs = tree
    if op == "/":
        raise TypeInferenceError("symbolic dims use // for division", ctx.span(rhs if isinstance(rhs, Node) else lhs))
    prec = _PREC[op]
    lt, lp = _render(ctx, lhs)
    rt, rp = _render(ctx, rhs)
    if lp < prec:
        lt = f"({lt})"
    if rp <= prec:
        rt = f"({rt})"
    return f"{lt} {op} {rt}", prec


# -- struct info annotations ------------------------------------------------------------------


def _dtype(ctx: Ctx, node: Node | None) -> str:
    if node is None or (node.kind == K_LIT and node.value is None):
        return ""
    if node.kind != K_STR:
        raise TypeInferenceError("a dtype is written as a string such as \"float32\"", ctx.span(node))
    if node.value in UNSUPPORTED_DTYPES:
        raise UnsupportedError(UNSUPPORTED_DTYPES[node.value], ctx.span(node))
    if node.value not in DTYPES and node.value != "void":
        raise TypeInferenceError(f"unknown dtype {node.value!r} (known: {', '.join(DTYPES)})", ctx.span(node))
    return "" if node.value == "void" else node.value


def _split_args(ctx: Ctx, node: Node, names: tuple[str, ...], what: str) -> dict[str, Node]:
    """Positional and keyword arguments of an annotation call, by parameter name."""
    out: dict[str, Node] = {}
    pos = 0
    for a in node.items:
        if a.kind == K_KWARG:
            if a.value not in names:
                raise TypeInferenceError(f"{what} has no parameter '{a.value}' (parameters: {', '.join(names)})", ctx.span(a))
            if a.value in out:
                raise TypeInferenceError(f"{what}: '{a.value}' given twice", ctx.span(a))
            out[a.value] = a.items
        else:
            if pos >= len(names):
                raise TypeInferenceError(f"{what} takes at most {len(names)} arguments", ctx.span(a))
            out[names[pos]] = a
            pos += 1
    return out


def _int_arg(ctx: Ctx, node: Node | None, default: int) -> int:
    if node is None:
        return default
    try:
        v = literal(node) if node.kind in (K_NUM, K_NEG) else None
    except NotLiteral:
        v = None
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeInferenceError("expected an integer", ctx.span(node))
    return v


def struct_info(ctx: Ctx, node: Node, parse_text=None):
    """An annotation (`R.Tensor((n, 3), "float32")`, `R.Tuple(...)`, `R.Shape([2])`, ...) -> struct info."""
    k = node.kind
    if k == K_NAME:
        name = node.value
        if name == "R.Tensor":
            return TensorStructInfo(None, "", -1)
        if name in ("R.Object", "R.Any"):
            return ObjectStructInfo()
        if name == "R.Tuple":
            return TupleStructInfo(())
        if name == "R.Shape":
            return ShapeStructInfo(None, -1)
        if name.startswith("T.") and name[2:] in DTYPES:
            return PrimStructInfo(name[2:])
    elif k == K_CALL and node.value.kind == K_NAME:
        name = node.value.value
        if name == "R.Tensor":
            a = _split_args(ctx, node, ("shape", "dtype", "vdevice", "ndim"), "R.Tensor")
            shape_node, dtype_node = a.get("shape"), a.get("dtype")
            if shape_node is not None and shape_node.kind == K_STR and dtype_node is None:
                shape_node, dtype_node = None, shape_node  # R.Tensor("float32") as TVM reads it
            vdev = a.get("vdevice")
            if vdev is not None and not (vdev.kind == K_LIT and vdev.value is None):
                raise UnsupportedError("virtual devices (vdevice=) are not supported", ctx.span(vdev))
            dtype = _dtype(ctx, dtype_node)
            ndim = _int_arg(ctx, a.get("ndim"), -1)
            if shape_node is None or (shape_node.kind == K_LIT and shape_node.value is None):
                if ndim < -1:
                    raise TypeInferenceError("ndim must be -1 (unknown) or at least 0", ctx.span(a["ndim"]))
                return TensorStructInfo(None, dtype, ndim)
            if shape_node.kind not in (K_TUPLE, K_LIST):
                raise TypeInferenceError("the shape of R.Tensor is a tuple of dims such as (3, n)", ctx.span(shape_node))
            dims = tuple(dim(ctx, d, parse_text) for d in shape_node.items)
            if ndim != -1 and ndim != len(dims):
                raise TypeInferenceError(f"ndim={ndim} contradicts a shape of {len(dims)} dims", ctx.span(node))
            return TensorStructInfo(dims, dtype)
        if name == "R.Tuple":
            for a in node.items:
                if a.kind == K_KWARG:
                    raise TypeInferenceError("R.Tuple takes only struct infos", ctx.span(a))
            return TupleStructInfo(tuple(struct_info(ctx, a, parse_text) for a in node.items))
        if name == "R.Shape":
            a = _split_args(ctx, node, ("values", "ndim"), "R.Shape")
            values = a.get("values")
            ndim = _int_arg(ctx, a.get("ndim"), -1)
            if values is None or (values.kind == K_LIT and values.value is None):
                return ShapeStructInfo(None, ndim)
            if values.kind not in (K_TUPLE, K_LIST):
                raise TypeInferenceError("R.Shape takes a list of dims such as [2, n]", ctx.span(values))
            vals = tuple(dim(ctx, d, parse_text) for d in values.items)
            return ShapeStructInfo(vals)
        if name == "R.Prim":
            a = _split_args(ctx, node, ("dtype",), "R.Prim")
            if "dtype" not in a:
                raise TypeInferenceError("R.Prim needs a dtype", ctx.span(node))
            return PrimStructInfo(_dtype(ctx, a["dtype"]))
        if name in ("R.Object", "R.Any") and not node.items:
            return ObjectStructInfo()
        if name == "I.StringType" and not node.items:
            return ObjectStructInfo()
        if name == "R.Callable":
            a = _split_args(ctx, node, ("params", "ret", "purity"), "R.Callable")
            params = a.get("params")
            if params is None or params.kind not in (K_TUPLE, K_LIST) or "ret" not in a:
                raise TypeInferenceError("R.Callable takes a list of parameter struct infos and a result", ctx.span(node))
            purity = True
            if "purity" in a:
                purity = _int_arg(ctx, a["purity"], 1) if a["purity"].kind != K_LIT else a["purity"].value
                if purity not in (True, False, 0, 1):
                    raise TypeInferenceError("R.Callable's purity is True or False", ctx.span(a["purity"]))
            return FuncStructInfo(
                tuple(struct_info(ctx, p, parse_text) for p in params.items),
                struct_info(ctx, a["ret"], parse_text),
                bool(purity),
            )
    raise TypeInferenceError(
        "expected a struct info annotation: R.Tensor(...), R.Tuple(...), R.Shape(...), R.Prim(...) or R.Object",
        ctx.span(node),
    )


# -- constants --------------------------------------------------------------------------------

# R.const's defaults, as TVM's relax.const: Python ints are int32, floats float32.
_DEFAULT_DTYPE = {np.dtype("int64"): "int32", np.dtype("float64"): "float32"}


def const_array(ctx: Ctx, value_node: Node, dtype: str | None, call: Node) -> np.ndarray:
    """The data of `R.const(value, dtype)`."""
    try:
        value = nested_literal(value_node)
    except NotLiteral as err:
        raise OpError(err.reason or "R.const takes a number, True/False or a nested list of them", ctx.span(err.node)) from None
    if isinstance(value, str) and value.strip().lower() in _SPECIAL_FLOATS:
        # TVM prints special scalars as R.const("-inf", "float32") (its own parser does not read them back).
        if dtype is None or not dtype.startswith(("float", "bfloat")):
            raise OpError(f"R.const({value_node.value!r}) names a special float: give a float dtype such as \"float32\"", ctx.span(call))
        value = _SPECIAL_FLOATS[value.strip().lower()]
    if isinstance(value, str | dict) or value is None:
        raise OpError("R.const takes a number, True/False or a nested list of them", ctx.span(value_node))
    if dtype in UNSUPPORTED_DTYPES:
        raise UnsupportedError(f"R.const: {UNSUPPORTED_DTYPES[dtype]}", ctx.span(call))
    if dtype is not None and dtype not in DTYPES:
        raise OpError(f"R.const: unknown dtype {dtype!r} (known: {', '.join(DTYPES)})", ctx.span(call))
    try:
        arr = np.array(value, dtype=None if dtype is None else numpy_dtype(dtype))
        if dtype is None:
            if arr.dtype.kind not in "biuf":
                raise ValueError("values must be numbers or booleans")
            default = _DEFAULT_DTYPE.get(arr.dtype)
            if default is not None:
                arr = arr.astype(default)
    except (ValueError, TypeError, OverflowError) as err:
        msg = str(err).splitlines()[0]
        if "inhomogeneous" in msg or "sequence" in msg:
            msg = "the nested lists are ragged (rows of different lengths)"
        raise OpError(f"R.const: cannot make a constant of this value: {msg}", ctx.span(value_node)) from None
    arr.setflags(write=False)
    return arr
