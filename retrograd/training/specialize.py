"""A function's symbolic dims bound to values: static parameter types and a body whose types are re-inferred."""

from __future__ import annotations

import attrs

from retrograd.errors import TrainingError
from retrograd.ir.expr import Function, ShapeExpr
from retrograd.ir.functor import ExprMutator
from retrograd.ir.struct_info import ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo, all_dim_names, dim_names
from retrograd.runtime.signature import compile_dim


def bind_dims(func: Function, values: dict[str, int]) -> Function:
    """`func` with the symbolic dims named in `values` replaced by them: what the checkpoint planner
    (which sizes every value) needs. Dims that are expressions of bound names are computed."""
    return _Binder(values).visit_expr(func)


def symbolic_dims(func: Function) -> set[str]:
    """The symbolic dim names of `func`'s parameters."""
    out: set[str] = set()
    for p in func.params:
        out |= all_dim_names(p.struct_info)
    return out


def _dim(d, values: dict):
    if isinstance(d, int) or not (dim_names(d) <= values.keys()):
        return d
    return int(compile_dim(d)(values))


def _bound(s: StructInfo, values: dict) -> StructInfo:
    if isinstance(s, TensorStructInfo) and s.shape is not None:
        return TensorStructInfo(tuple(_dim(d, values) for d in s.shape), s.dtype)
    if isinstance(s, ShapeStructInfo) and s.values is not None:
        return ShapeStructInfo(tuple(_dim(d, values) for d in s.values))
    if isinstance(s, TupleStructInfo):
        return TupleStructInfo(tuple(_bound(f, values) for f in s.fields))
    return s


class _Binder(ExprMutator):
    def __init__(self, values: dict[str, int]):
        super().__init__()
        self.values = values

    def visit_shape_expr(self, s: ShapeExpr) -> ShapeExpr:
        new = tuple(_dim(d, self.values) for d in s.values)
        return s if new == tuple(s.values) else self.builder.normalize(ShapeExpr(new, span=s.span))

    def visit_function(self, func: Function) -> Function:
        for p in func.params:
            sinfo = _bound(p.struct_info, self.values)
            if sinfo != p.struct_info:
                self.var_remap[p] = type(p)(p.name_hint, sinfo, span=p.span)
        out = super().visit_function(func)
        ret = func.ret_struct_info
        if ret is not None and _bound(ret, self.values) != ret:
            out = attrs.evolve(out, ret_struct_info=_bound(ret, self.values), struct_info=None, attrs=dict(out.attrs))
        return out


def batch_dims(data: list, symbolic: set[str], batch_size: int) -> dict[str, int]:
    """{name: batch_size} for the symbolic leading dims of the `data` parameters; a TrainingError
    naming any other of the `symbolic` dims."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise TrainingError(f"batch_size must be a positive int, got {batch_size!r}")
    values = {}
    for p in data:
        s = p.struct_info
        if isinstance(s, TensorStructInfo) and s.shape and isinstance(s.shape[0], str) and dim_names(s.shape[0]) == {s.shape[0]}:
            values[s.shape[0]] = batch_size
    other = sorted(symbolic - values.keys())
    if other:
        raise TrainingError(f"checkpointing plans static shapes: the symbolic dims {', '.join(other)} are not batch "
                            "dims of the inputs (give the module static shapes for them)")
    return values
