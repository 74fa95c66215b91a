"""The IR: struct info, expressions, blocks, modules, builder, functors, structural comparison, checks."""

from retrograd.ir.block import BindingBlock, DataflowBlock, VarBinding
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import (
    Call,
    Constant,
    DataflowVar,
    Expr,
    Function,
    GlobalVar,
    If,
    Op,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    StringImm,
    Tuple,
    TupleGetItem,
    Var,
    const,
    is_leaf,
    prim_value,
    shape_expr,
)
from retrograd.ir.functor import ExprMutator, ExprVisitor
from retrograd.ir.module import IRModule
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from retrograd.ir.well_formed import verify, well_formed
