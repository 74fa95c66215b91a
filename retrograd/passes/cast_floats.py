"""cast-floats: run a module in another float dtype (bfloat16, float16, float8): every tensor of the
`source` dtype — parameters, constants, dtype attributes, and so every result — becomes `dtype`."""

from __future__ import annotations

import attrs

from retrograd.errors import PassError
from retrograd.ir.dtypes import numpy_dtype
from retrograd.ir.expr import Call, Constant, Function, GlobalVar, Var
from retrograd.ir.functor import ExprMutator
from retrograd.ir.struct_info import FLOAT_DTYPES, FuncStructInfo, TensorStructInfo, TupleStructInfo
from retrograd.ops.attr_types import to_dtype, to_opt_dtype
from retrograd.passes.infra import function_pass


def _cast_sinfo(sinfo, source: str, dtype: str):
    if isinstance(sinfo, TensorStructInfo) and sinfo.dtype == source:
        return attrs.evolve(sinfo, dtype=dtype)
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(tuple(_cast_sinfo(s, source, dtype) for s in sinfo.fields))
    if isinstance(sinfo, FuncStructInfo):
        return attrs.evolve(sinfo, params=tuple(_cast_sinfo(s, source, dtype) for s in sinfo.params),
                            ret=_cast_sinfo(sinfo.ret, source, dtype))
    return sinfo


class _Caster(ExprMutator):
    def __init__(self, source: str, dtype: str):
        super().__init__()
        self.source, self.dtype = source, dtype

    def visit_constant(self, c: Constant):
        if c.data.dtype.name != self.source:
            return c
        return self.builder.normalize(Constant(c.data.astype(numpy_dtype(self.dtype))))

    def visit_global_var(self, gv: GlobalVar):
        # A call is typed by its callee's cast signature: every function of the module is cast alike.
        sinfo = _cast_sinfo(gv.struct_info, self.source, self.dtype)
        return gv if sinfo == gv.struct_info else GlobalVar(gv.name_hint, sinfo, span=gv.span)

    def visit_call(self, call: Call):
        new = super().visit_call(call)
        op = new.op
        schema = {a.name: a.convert for a in getattr(op, "attrs_schema", ())}
        changed = {k: self.dtype for k, v in new.attrs.items()
                   if v == self.source and schema.get(k) in (to_dtype, to_opt_dtype)}
        if not changed:
            return new
        return self.builder.normalize(Call(op, new.args, {**new.attrs, **changed}, span=new.span))

    def cast_function(self, func: Function) -> Function:
        params = []
        for p in func.params:
            sinfo = _cast_sinfo(p.struct_info, self.source, self.dtype)
            q = p if sinfo == p.struct_info else type(p)(p.name_hint, sinfo, span=p.span)
            self.var_remap[p] = q
            params.append(q)
        body = self.visit_expr(func.body)
        return Function(tuple(params), body, body.struct_info, func.is_pure, func.private, dict(func.attrs), span=func.span)


@function_pass(name="cast-floats")
class CastFloats:
    """Compute in another float dtype: every `source` (float32) tensor, parameters and constants included, becomes `dtype`."""

    dtype: str = "bfloat16"
    source: str = "float32"

    def transform_function(self, func: Function, mod, ctx) -> Function:
        for name, value in (("dtype", self.dtype), ("source", self.source)):
            if value not in FLOAT_DTYPES:
                raise PassError(f"cast-floats: {name} must be a float dtype ({', '.join(FLOAT_DTYPES)}), got {value!r}").about_option(name)
        numpy_dtype(self.dtype)  # ml_dtypes for bfloat16 / float8, or a clear error naming what to install
        return _Caster(self.source, self.dtype).cast_function(func)
