"""What the ATen converters share: the importer's state (fx node -> IR value, the BlockBuilder), how
an fx node's arguments are bound to its schema, torch dtypes and symbolic sizes as IR ones, and
PyTorch's type promotion for mixed tensor / scalar operands."""

from __future__ import annotations

from retrograd.errors import UnsupportedError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Expr, ShapeExpr, Var, const
from retrograd.ir.struct_info import TensorStructInfo
from retrograd.ops.api import R

_DTYPES = {
    "float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "bfloat16",
    "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}


def dtype_of(torch_dtype) -> str:
    """`torch.float32` as "float32"; a dtype retrograd has no form of is an error naming it."""
    name = str(torch_dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise UnsupportedError(f"torch dtype {torch_dtype} has no retrograd form")
    return _DTYPES[name]


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


class Converter:
    """The state of one import; converters receive it with the node's bound arguments."""

    def __init__(self, seed: int, dim_names: dict):
        self.env: dict = {}
        self.buffers: dict = {}  # placeholder node -> PyTorch name (parameters and buffers)
        self.written: set = set()  # placeholder nodes written in place
        # An in-place op's result is its target (`b = a.add_(1)`: b is a): node -> the node it is, and back.
        self.alias_of: dict = {}
        self.aliases: dict = {}
        self.bb = BlockBuilder()
        self.seed = seed
        self.draws = 0
        self.dim_names = dict(dim_names)
        self.node = None

    # -- building -----------------------------------------------------------------------
    def begin(self) -> None:
        self.bb.begin_scope()
        self.bb.begin_block(dataflow=False)

    def end(self, body):
        return self.bb.end_scope(body)

    def emit(self, expr: Expr, name: str | None = None) -> Expr:
        if isinstance(expr, Var) or not isinstance(expr, Expr):
            return expr
        return self.bb.emit(expr, name or (self.node.name if self.node is not None else "lv"))

    def next_seed(self) -> int:
        self.draws += 1
        return self.seed + self.draws - 1

    def placeholder(self, node, name: str) -> Var:
        var = Var(name, self.sinfo(node.meta["val"], node))
        self.env[node] = var
        return var

    def assign(self, target, value, result=None) -> None:
        """An in-place op wrote `value` into `target` (an fx node): later reads of it, and of every node that
        is the same tensor (the results of earlier in-place ops on it), see the new value; `result`, the op's
        own node, is that tensor too."""
        root = self.alias_of.get(target, target)
        same = self.aliases.setdefault(root, [root])
        if result is not None:
            self.alias_of[result] = root
            same.append(result)
        for node in same:
            self.env[node] = value
        if root.op == "placeholder":
            self.written.add(root)

    # -- values --------------------------------------------------------------------------
    def sinfo(self, val, node=None) -> TensorStructInfo:
        if not hasattr(val, "shape") or not hasattr(val, "dtype"):
            where = f" (fx node '{node.name}')" if node is not None else ""
            raise UnsupportedError(f"from_exported_program: expected a tensor{where}, got {type(val).__name__}")
        return TensorStructInfo(self.shape(val.shape), dtype_of(val.dtype))

    def shape(self, sizes) -> tuple:
        return tuple(self.dim(s) for s in sizes)

    def dim(self, size):
        """A size as an IR dim: an int, or the text of a symbolic expression (`batch`, `2*batch`)."""
        if isinstance(size, int):
            return int(size)
        if isinstance(size, str):
            return size
        node = getattr(size, "node", None)
        if node is None:
            raise UnsupportedError(f"from_exported_program: {size!r} is not a size")
        if getattr(node, "is_constant", lambda: False)() or not hasattr(node, "expr"):
            return int(size)
        expr = node.expr
        if expr.is_number:
            return int(expr)
        names = {str(s): self.dim_names.get(str(s), str(s)) for s in expr.free_symbols}
        text = str(expr)
        for old in sorted(names, key=len, reverse=True):
            text = text.replace(old, names[old])
        if any(c not in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ +-*" for c in text):
            raise UnsupportedError(f"from_exported_program: symbolic size {expr} has no retrograd form "
                                   "(sums and products of dims only)")
        return text

    def sym_value(self, val, node):
        """The Python value of a node computing a size (sym_size, SymInt arithmetic)."""
        if isinstance(val, bool | int | float):
            return val
        if type(val).__name__ == "SymInt":
            return self.dim(val)
        raise UnsupportedError(f"from_exported_program: fx node '{node.name}' computes a symbolic "
                               f"{type(val).__name__}, which retrograd cannot hold")

    def value(self, arg):
        if hasattr(arg, "op") and hasattr(arg, "users"):  # an fx Node
            if arg not in self.env:
                raise UnsupportedError(f"from_exported_program: fx node '{arg.name}' is used before it is defined")
            value = self.env[arg]
            if value is None:
                raise UnsupportedError(f"from_exported_program: fx node '{arg.name}' is an output retrograd does not "
                                       f"compute (max pooling's indices: export without return_indices)"
                                       f"{'' if self.node is None else f', read by fx node {self.node.name!r}'}")
            return value
        if isinstance(arg, list | tuple):
            return [self.value(a) for a in arg]
        if type(arg).__name__ in ("SymInt",):
            return self.dim(arg)
        return arg

    def arguments(self, node, schema=None) -> dict:
        """The node's arguments by schema name, defaults filled in, fx nodes replaced by IR values."""
        schema = schema or node.target._schema
        out = {}
        for i, a in enumerate(schema.arguments):
            if i < len(node.args):
                v = node.args[i]
            elif a.name in node.kwargs:
                v = node.kwargs[a.name]
            elif a.has_default_value():
                v = a.default_value
            else:
                v = None
            out[a.name] = self.value(v)
        return out

    def meta(self, i: int | None = None):
        val = self.node.meta.get("val")
        return val[i] if i is not None else val

    def out_shape(self, i: int | None = None) -> ShapeExpr:
        return ShapeExpr(self.shape(self.meta(i).shape))

    def out_dtype(self, i: int | None = None) -> str:
        return dtype_of(self.meta(i).dtype)

    # -- settling a converter's result --------------------------------------------------
    def settle(self, result, val, node):
        """Emit the converter's result, cast to the dtype torch.export recorded when they differ."""
        if isinstance(result, tuple | list) and not isinstance(result, Expr):
            vals = val if isinstance(val, tuple | list) else [None] * len(result)
            return tuple(self.settle(r, v, node) if r is not None else None for r, v in zip(result, vals))
        if not isinstance(result, Expr):
            return result
        out = self.emit(result, node.name)
        if hasattr(val, "dtype"):
            want = dtype_of(val.dtype)
            got = getattr(out.struct_info, "dtype", want)
            if got and got != want:
                out = self.emit(R.astype(out, dtype=want), node.name)
            got_nd = getattr(out.struct_info, "ndim", -1)
            if got_nd not in (-1, len(val.shape)):
                raise UnsupportedError(f"from_exported_program: fx node '{node.name}' converts to a "
                                       f"{got_nd}-D value where PyTorch has {len(val.shape)}-D")
            if getattr(out.struct_info, "shape", ()) is None and not _data_dependent(val):
                # Inference lost the extents (a slice of a symbolic dim): torch.export knows them.
                try:
                    shape = self.shape(val.shape)
                except UnsupportedError:
                    return out
                out = self.emit(R.match_cast(out, struct_info=TensorStructInfo(shape, want)), node.name)
        return out

    # -- operands ---------------------------------------------------------------------
    def tensor(self, x, dtype: str) -> Expr:
        """`x` as a tensor of `dtype`: a Python scalar as a constant, a tensor cast where it differs."""
        if isinstance(x, Expr):
            have = getattr(x.struct_info, "dtype", "")
            return x if have == dtype else self.emit(R.astype(x, dtype=dtype))
        if dtype == "bool":
            return const(bool(x), "bool")
        return const(x, dtype)

    def common(self, *xs) -> str:
        """PyTorch's result dtype of the operands (tensors of any rank outrank 0-d ones and scalars)."""
        import torch

        stand = []
        for x in xs:
            if isinstance(x, Expr):
                si = x.struct_info
                stand.append(torch.empty((1,) * min(si.ndim, 1), dtype=getattr(torch, si.dtype)))
            elif x is not None:
                stand.append(x)
        if len(stand) == 1:
            s = stand[0]
            return dtype_of(s.dtype) if hasattr(s, "dtype") else dtype_of(torch.tensor(s).dtype)
        out = torch.result_type(stand[0], stand[1])
        for s in stand[2:]:
            out = torch.promote_types(out, s.dtype if hasattr(s, "dtype") else torch.tensor(s).dtype)
        return dtype_of(out)

    def operands(self, *xs, dtype: str | None = None) -> list:
        dtype = dtype or self.common(*xs)
        return [self.tensor(x, dtype) for x in xs]


def registrar(table: dict):
    """`@op("name", ...)`: the decorator adding a converter to `table` under each name."""

    def op(*names):
        def deco(fn):
            for n in names:
                table[n] = fn
            return fn

        return deco

    return op


def axes(dims, ndim: int) -> tuple:
    """ATen dims (int, list, None / empty for all) as non-negative axes."""
    if dims is None or dims == []:
        return tuple(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return tuple(d % ndim if ndim else 0 for d in dims)


def ndim(x) -> int:
    return x.struct_info.ndim


def _data_dependent(val) -> bool:
    """Whether a fake tensor's sizes name values known only at run time (nonzero's count, unique's): those
    stay unknown extents in the IR."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return bool(free_unbacked_symbols(val))
