"""structural_equal / structural_hash / assert_structural_equal on IR built with BlockBuilder."""

from __future__ import annotations

import numpy as np
import pytest

from retrograd.errors import Span
from retrograd.ir import (
    BindingBlock,
    BlockBuilder,
    Call,
    DataflowBlock,
    DataflowVar,
    Function,
    GlobalVar,
    If,
    IRModule,
    SeqExpr,
    Tuple,
    TupleGetItem,
    Var,
    VarBinding,
    const,
    shape_expr,
)
from retrograd.ir.struct_info import (
    FuncStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    TensorStructInfo,
    TupleStructInfo,
)
from retrograd.ir.structural import (
    assert_structural_equal,
    first_difference,
    structural_equal,
    structural_hash,
)
from retrograd.ops.api import R
from retrograd.ops.registry import get
from optional import need


def T(*shape, dtype="float32"):
    return TensorStructInfo(tuple(shape), dtype)


def func(params, emit, dataflow=True, mod=None):
    """params: [(name, sinfo)]; emit(bb, *vars) emits bindings and returns the result."""
    bb = BlockBuilder(mod)
    vs = [Var(n, s) for n, s in params]
    bb.begin_scope()
    if dataflow:
        bb.begin_block(dataflow=True)
    out = emit(bb, *vs)
    if dataflow:
        out = bb.emit_output(out, "gv")
        bb.end_block()
    body = bb.end_scope(out)
    return Function(vs, body, body.struct_info)


def mlp(names=("x", "w", "b"), dim="n", op="add", swap=False, const_value=2.0, dtype="float32"):
    x, w, b = names

    def emit(bb, xv, wv, bv):
        lv0 = bb.emit(R.multiply(xv, wv), "lv0")
        args = (bv, lv0) if swap else (lv0, bv)
        lv1 = bb.emit(getattr(R, op)(*args), "lv1")
        lv2 = bb.emit(R.multiply(lv1, const(const_value, dtype)), "lv2")
        return R.exp(lv2)

    f = func([(x, T(dim, 4, dtype=dtype)), (w, T(dim, 4, dtype=dtype)), (b, T(4, dtype=dtype))], emit)
    return IRModule({"main": f})


def check_equal(a, b, **kw):
    assert structural_equal(a, b, **kw)
    assert structural_equal(b, a, **kw)
    assert structural_hash(a) == structural_hash(b)
    assert_structural_equal(a, b, **kw)


def check_unequal(a, b, **kw):
    assert not structural_equal(a, b, **kw)
    assert not structural_equal(b, a, **kw)
    with pytest.raises(AssertionError):
        assert_structural_equal(a, b, **kw)


# -- equal modulo renaming -------------------------------------------------------


def test_same_builder_output_is_equal_and_hashes_alike():
    check_equal(mlp(), mlp())


def test_renamed_params_bindings_and_symbolic_dims_are_equal():
    check_equal(mlp(), mlp(names=("a", "b", "c"), dim="m"))


def test_renamed_binding_names_are_equal():
    a = mlp()
    f = a["main"]
    blocks = []
    for blk in f.body.blocks:
        bindings = []
        for bd in blk.bindings:
            bindings.append(VarBinding(type(bd.var)("renamed_" + bd.var.name_hint, bd.var.struct_info), bd.value))
        blocks.append(type(blk)(bindings))
    # Uses still point at the old vars: the renamed copy has to be rebuilt consistently.
    remap = {}
    new_blocks = []
    for blk, old in zip(blocks, f.body.blocks):
        nb = []
        for bd, ob in zip(blk.bindings, old.bindings):
            value = bd.value
            if isinstance(value, Call):
                value = Call(value.op, [remap.get(x, x) for x in value.args], value.attrs, value.struct_info)
            remap[ob.var] = bd.var
            nb.append(VarBinding(bd.var, value))
        new_blocks.append(type(blk)(nb))
    body = SeqExpr(new_blocks, remap[f.body.body], f.body.struct_info)
    b = IRModule({"main": Function(f.params, body, f.ret_struct_info)})
    check_equal(a, b)


def test_spans_are_ignored():
    a = mlp()
    f = a["main"]
    span = Span("file.py", 3, 4)
    params = [Var(p.name_hint, p.struct_info, span=span) for p in f.params]
    remap = dict(zip(f.params, params))
    blocks = []
    for blk in f.body.blocks:
        bindings = []
        for bd in blk.bindings:
            v = bd.value
            value = Call(v.op, [remap.get(x, x) for x in v.args], v.attrs, v.struct_info, span=span)
            var = type(bd.var)(bd.var.name_hint, bd.var.struct_info, span=span)
            remap[bd.var] = var
            bindings.append(VarBinding(var, value, span=span))
        blocks.append(type(blk)(bindings, span=span))
    body = SeqExpr(blocks, remap[f.body.body], f.body.struct_info, span=span)
    check_equal(a, IRModule({"main": Function(params, body, f.ret_struct_info, span=span)}))


def test_function_order_in_module_does_not_matter():
    f, g = mlp()["main"], mlp(op="subtract")["main"]
    check_equal(IRModule({"f": f, "g": g}), IRModule({"g": g, "f": f}))


# -- unequal ----------------------------------------------------------------------


def test_different_op_is_unequal():
    check_unequal(mlp(), mlp(op="subtract"))


def test_swapped_args_are_unequal():
    check_unequal(mlp(), mlp(swap=True))


def test_different_constant_value_dtype_shape():
    check_unequal(mlp(), mlp(const_value=3.0))
    check_unequal(mlp(), mlp(dtype="float64"))
    x = Var("x", T(2))
    a = Call(get("relax.add"), [x, const(np.array([1.0, 2.0], "float32"))])
    b = Call(get("relax.add"), [x, const(np.array([[1.0, 2.0]], "float32"))])
    check_unequal(a, b)


def test_constants_nan_equal_and_negative_zero():
    a = const(np.array([np.nan, 0.0, 1.0], "float32"))
    b = const(np.array([np.nan, -0.0, 1.0], "float32"))
    check_equal(a, b)
    check_unequal(a, const(np.array([np.nan, 0.0, 2.0], "float32")))


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2"])
def test_extension_float_constants_nan_equal_and_negative_zero(dtype):
    # ml_dtypes' floats are NumPy kind 'V': compared as raw values, a constant with a NaN was unequal to
    # itself, so a module holding one did not parse back equal to its own print.
    need("ml_dtypes")
    import retrograd
    from retrograd.ir.dtypes import numpy_dtype

    def c(vals):
        return const(np.array(vals, "float32").astype(numpy_dtype(dtype)), dtype)

    a, b = c([np.nan, 0.0, 1.5]), c([np.nan, -0.0, 1.5])
    check_equal(a, b)
    check_unequal(a, c([np.nan, 0.0, 2.0]))
    check_unequal(a, const(np.array([np.nan, 0.0, 1.5], "float32")))
    x = Var("x", T(3, dtype=dtype))
    bb = BlockBuilder()
    bb.begin_scope()
    out = bb.emit(Call(get("relax.add"), [x, a]), "y")
    mod = IRModule({"main": Function([x], bb.end_scope(out))})
    assert structural_equal(retrograd.parse(mod.script()), mod)


def test_different_struct_info_annotation_is_unequal():
    a = mlp()
    f = a["main"]
    # Same program but the first binding var annotated with a less precise struct info.
    blk = f.body.blocks[0]
    first = blk.bindings[0]
    loose = DataflowVar(first.var.name_hint, TensorStructInfo(None, "float32", 2))
    bindings = [VarBinding(loose, first.value)] + [
        VarBinding(bd.var, Call(bd.value.op, [loose if v is first.var else v for v in bd.value.args],
                                bd.value.attrs, bd.value.struct_info))
        for bd in blk.bindings[1:]
    ]
    body = SeqExpr([DataflowBlock(bindings)] + list(f.body.blocks[1:]), f.body.body, f.body.struct_info)
    b = IRModule({"main": Function(f.params, body, f.ret_struct_info)})
    check_unequal(a, b)
    assert "bindings[0].var.struct_info" in first_difference(a, b)


def test_param_struct_info_differs():
    check_unequal(mlp(dim="n"), mlp(dim=5))


def test_different_attrs_are_unequal():
    x = Var("x", T(2, 3))
    op = get("relax.add")
    a = Function([x], SeqExpr([BindingBlock([VarBinding(y := Var("y", T(2, 3)), Call(op, [x, x], {"axis": (1,)}, T(2, 3)))])], y))
    x2 = Var("x", T(2, 3))
    y2 = Var("y", T(2, 3))
    b = Function([x2], SeqExpr([BindingBlock([VarBinding(y2, Call(op, [x2, x2], {"axis": [1]}, T(2, 3)))])], y2))
    check_equal(a, b)  # lists and tuples compare alike
    x3 = Var("x", T(2, 3))
    y3 = Var("y", T(2, 3))
    c = Function([x3], SeqExpr([BindingBlock([VarBinding(y3, Call(op, [x3, x3], {"axis": (0,)}, T(2, 3)))])], y3))
    check_unequal(a, c)
    msg = first_difference(a, c)
    assert "attribute 'axis': (1,) vs (0,)" in msg
    # A bool attribute is not the int 1.
    x4 = Var("x", T(2, 3))
    y4 = Var("y", T(2, 3))
    d = Function([x4], SeqExpr([BindingBlock([VarBinding(y4, Call(op, [x4, x4], {"axis": (True,)}, T(2, 3)))])], y4))
    check_unequal(a, d)


def test_different_block_kind_is_unequal():
    a = IRModule({"main": func([("x", T(3))], lambda bb, x: bb.emit(R.exp(x)), dataflow=True)})
    b = IRModule({"main": func([("x", T(3))], lambda bb, x: bb.emit(R.exp(x)), dataflow=False)})
    check_unequal(a, b)


def test_dataflow_var_vs_var_is_unequal():
    x = Var("x", T(3))
    a_var = DataflowVar("y", T(3))
    b_var = Var("y", T(3))
    call = Call(get("relax.exp"), [x], {}, T(3))
    a = Function([x], SeqExpr([DataflowBlock([VarBinding(a_var, call)])], x))
    b = Function([x], SeqExpr([DataflowBlock([VarBinding(b_var, call)])], x))
    check_unequal(a, b)
    assert "DataflowVar" in first_difference(a, b)


def test_var_correspondence_is_a_bijection():
    # f(x, y) = x + y   vs   f(a, b) = a + a
    a = func([("x", T(3)), ("y", T(3))], lambda bb, x, y: R.add(x, y), dataflow=False)
    b = func([("a", T(3)), ("b", T(3))], lambda bb, x, y: R.add(x, x), dataflow=False)
    check_unequal(a, b)
    msg = first_difference(a, b)
    assert "Var 'y' vs Var 'a'" in msg and "corresponds" in msg


def test_symbolic_dims_map_bijectively():
    one = func([("x", T("n", "n"))], lambda bb, x: R.exp(x), dataflow=False)
    two = func([("x", T("n", "m"))], lambda bb, x: R.exp(x), dataflow=False)
    renamed = func([("x", T("k", "k"))], lambda bb, x: R.exp(x), dataflow=False)
    check_unequal(one, two)
    check_equal(one, renamed)
    # Expressions of symbolic dims are compared modulo the same mapping.
    assert structural_equal(
        Function([p := Var("x", T("n", "m"))], SeqExpr([], p), T("n", "m")),
        Function([q := Var("x", T("a", "b"))], SeqExpr([], q), T("a", "b")),
    )
    e1 = func([("x", T("n", "m"))], lambda bb, x: shape_expr(["n + m", 2]), dataflow=False)
    e2 = func([("x", T("p", "q"))], lambda bb, x: shape_expr(["p + q", 2]), dataflow=False)
    e3 = func([("x", T("p", "q"))], lambda bb, x: shape_expr(["q + p", 2]), dataflow=False)
    check_equal(e1, e2)
    check_unequal(e1, e3)


def test_symbolic_dim_maps_are_per_function():
    f = func([("x", T("n"))], lambda bb, x: R.exp(x), dataflow=False)
    g = func([("x", T("m"))], lambda bb, x: R.exp(x), dataflow=False)
    check_equal(IRModule({"f": f, "g": g}), IRModule({"f": g, "g": f}))


def test_free_vars_identity_or_mapped():
    x, y = Var("x", T(3)), Var("y", T(3))
    a = Call(get("relax.exp"), [x], {}, T(3))
    b = Call(get("relax.exp"), [y], {}, T(3))
    check_unequal(a, b)
    assert structural_equal(a, Call(get("relax.exp"), [x], {}, T(3)))
    assert structural_equal(a, b, map_free_vars=True)
    assert structural_hash(a) == structural_hash(b)
    assert "map_free_vars" in first_difference(a, b)


def test_global_vars_by_name_and_calls_between_functions():
    callee = func([("x", T(3))], lambda bb, x: R.exp(x), dataflow=False)
    gsig = {"f": callee.struct_info, "g": callee.struct_info}

    def caller(name):
        bb = BlockBuilder(global_sinfo=gsig)
        x = Var("x", T(3))
        bb.begin_scope()
        out = bb.emit(Call(GlobalVar(name), [x]))
        body = bb.end_scope(out)
        return Function([x], body, body.struct_info)

    a = IRModule({"f": callee, "g": callee, "main": caller("f")})
    check_equal(a, IRModule({"f": callee, "g": callee, "main": caller("f")}))
    b = IRModule({"f": callee, "g": callee, "main": caller("g")})
    check_unequal(a, b)
    assert 'Module.functions["main"].body.blocks[0].bindings[0].value.op' in first_difference(a, b)
    check_unequal(a, IRModule({"f": callee, "main": caller("f")}))


def test_tuples_getitem_and_if():
    def emit(index, swap):
        def body(bb, c, x, y):
            t = bb.emit(Tuple([x, y]))
            item = bb.emit(TupleGetItem(t, index))
            bb.begin_scope()
            tb = bb.end_scope(bb.emit(R.exp(item)) if not swap else bb.emit(R.sin(item)))
            bb.begin_scope()
            fb = bb.end_scope(bb.emit(R.sin(item)) if not swap else bb.emit(R.exp(item)))
            return If(c, tb, fb)
        return body

    params = [("c", TensorStructInfo((), "bool")), ("x", T(3)), ("y", T(3))]
    a = func(params, emit(0, False), dataflow=False)
    check_equal(a, func(params, emit(0, False), dataflow=False))
    check_unequal(a, func(params, emit(1, False), dataflow=False))
    diff = first_difference(a, func(params, emit(0, True), dataflow=False))
    assert ".true_branch" in diff


def test_struct_info_objects():
    assert structural_equal(T(2, 3), T(2, 3))
    assert not structural_equal(T(2, 3), T(3, 2))
    assert not structural_equal(T("n"), T("m"))  # free symbolic names are not mapped by default
    assert structural_equal(T("n"), T("m"), map_free_vars=True)
    assert structural_equal(
        TupleStructInfo([T(2), ShapeStructInfo([2, "n"]), PrimStructInfo("int64")]),
        TupleStructInfo([T(2), ShapeStructInfo([2, "n"]), PrimStructInfo("int64")]),
    )
    assert not structural_equal(FuncStructInfo([T(2)], T(2)), FuncStructInfo([T(2)], T(3)))
    assert structural_hash(T(2, 3)) == structural_hash(T(2, 3))
    assert not structural_equal(T(2, 3), mlp())


# -- messages ------------------------------------------------------------------------


def test_assert_message_names_path_and_both_sides():
    a = func([("x", T(3)), ("y", T(3))], lambda bb, x, y: R.add(bb.emit(R.exp(x)), x), dataflow=False)
    b = func([("x", T(3)), ("y", T(3))], lambda bb, x, y: R.add(bb.emit(R.exp(x)), y), dataflow=False)
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(IRModule({"main": a}), IRModule({"main": b}))
    msg = str(info.value)
    first = msg.splitlines()[0]
    assert first == (
        'structural mismatch at Module.functions["main"].body.blocks[0].bindings[1].value.args[1]: '
        "Var 'x' vs Var 'y'"
    )
    assert "left:  lv: R.Tensor((3,), \"float32\") = R.add(lv, x)" in msg
    assert "right: lv: R.Tensor((3,), \"float32\") = R.add(lv, y)" in msg


def test_message_for_constants_names_first_differing_index():
    a = const(np.arange(6, dtype="float32").reshape(2, 3))
    values = np.arange(6, dtype="float32").reshape(2, 3)
    values[1, 2] = 9
    msg = first_difference(a, const(values))
    assert msg.startswith("Constant:") and "(1, 2)" in msg


# -- hashing and scale --------------------------------------------------------------------


def test_hash_distinguishes_the_negative_cases():
    base = mlp()
    for other in (mlp(op="subtract"), mlp(swap=True), mlp(const_value=3.0), mlp(dim=5)):
        assert structural_hash(base) != structural_hash(other)


def _chain(n, last_op="add"):
    bb = BlockBuilder()
    x = Var("x", T(4, 3))
    bb.begin_scope()
    with bb.dataflow():
        a = x
        for i in range(n - 1):
            a = bb.emit(R.exp(a) if i % 2 else R.add(a, x))
        out = bb.emit_output(getattr(R, last_op)(a, x))
    body = bb.end_scope(out)
    return IRModule({"main": Function([x], body, body.struct_info)})


@pytest.mark.slow
def test_long_chain_without_recursion_error():
    n = 20_000
    a, b = _chain(n), _chain(n)
    check_equal(a, b)
    c = _chain(n, last_op="subtract")
    assert not structural_equal(a, c)
    assert f"bindings[{n - 1}].value.op" in first_difference(a, c)
