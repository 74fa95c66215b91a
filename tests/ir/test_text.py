"""The one struct-info renderer in its three spellings, and one-line briefs of nodes for messages."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.ir.block import VarBinding
from retrograd.ir.expr import Constant, GlobalVar, Var
from retrograd.ir.struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from retrograd.ir.text import brief, format_sinfo, op_script_name
from retrograd.ops.registry import get as get_op

T34 = TensorStructInfo((3, "n"), "float32")

CASES = [
    # (struct info, annotation, positional dtype, brief)
    (T34, 'R.Tensor((3, n), dtype="float32")', 'R.Tensor((3, n), "float32")', "Tensor((3, n), float32)"),
    (TensorStructInfo((4,), "int64"), 'R.Tensor((4,), dtype="int64")', 'R.Tensor((4,), "int64")', "Tensor((4,), int64)"),
    (TensorStructInfo((), "bool"), 'R.Tensor((), dtype="bool")', 'R.Tensor((), "bool")', "Tensor((), bool)"),
    (TensorStructInfo(None, "float32", 2), 'R.Tensor(dtype="float32", ndim=2)', 'R.Tensor(dtype="float32", ndim=2)',
     "Tensor(ndim=2, float32)"),
    (TensorStructInfo(None, "", -1), "R.Tensor", "R.Tensor", "Tensor(ndim=-1, ?)"),
    (TupleStructInfo((T34, PrimStructInfo("int64"))), 'R.Tuple(R.Tensor((3, n), dtype="float32"), R.Prim("int64"))',
     'R.Tuple(R.Tensor((3, n), "float32"), R.Prim("int64"))', "Tuple(Tensor((3, n), float32), Prim(int64))"),
    (ShapeStructInfo(("k", 2)), "R.Shape([k, 2])", "R.Shape([k, 2])", "Shape(['k', 2])"),
    (ShapeStructInfo(None, 3), "R.Shape(ndim=3)", "R.Shape(ndim=3)", "Shape(ndim=3)"),
    (ObjectStructInfo(), "R.Object", "R.Object", "Object"),
    (FuncStructInfo((T34,), T34, False), 'R.Callable([R.Tensor((3, n), dtype="float32")], '
     'R.Tensor((3, n), dtype="float32"), purity=False)', 'R.Callable([R.Tensor((3, n), "float32")], '
     'R.Tensor((3, n), "float32"), purity=False)', "Callable((Tensor((3, n), float32)), Tensor((3, n), float32))"),
]


@pytest.mark.parametrize(("sinfo", "annotation", "positional", "short"), CASES)
def test_format_sinfo_spellings(sinfo, annotation, positional, short):
    assert format_sinfo(sinfo) == annotation
    assert format_sinfo(sinfo, dtype_keyword=False) == positional
    assert format_sinfo(sinfo, brief=True) == short


def test_quote_names_quotes_plain_symbolic_names_only():
    s = TensorStructInfo(("n", "n * 2", 4), "float32")
    assert format_sinfo(s, quote_names=True) == 'R.Tensor(("n", n * 2, 4), dtype="float32")'


def test_printer_and_messages_share_the_renderer():
    from retrograd.parser import printer
    import retrograd.ir.struct_info as si
    import retrograd.ir.structural as st

    assert printer.format_sinfo is format_sinfo
    assert not hasattr(si, "describe_sinfo") and not hasattr(st, "sinfo_script")


def test_briefs():
    x = Var("x", TensorStructInfo((3,), "float32"))
    assert op_script_name(get_op("relax.add")) == "R.add"
    assert op_script_name(get_op("relax.nn.relu")) == "R.nn.relu"
    assert op_script_name(GlobalVar("f")) == "cls.f"
    c = Constant(np.arange(6, dtype="int32"))
    assert brief(c) == "Constant(int32[6]: [0, 1, 2, 3, ...])"
    assert brief(VarBinding(Var("lv", x.struct_info), x)) == "lv: R.Tensor((3,), \"float32\") = Var 'x'"
    assert brief(Var("v" * 200)) == ("Var '" + "v" * 200)[:97] + "..."
