"""Shared by the op tests: higher-order modules (`<f>_dot(params..., w...) = sum_i <grad_i of f, w_i>` built on
Gradient's adjoint), adjoints of scripted functions, and comparing torch-backend results with the NumPy
reference (exact for ints and bools, ulp-scaled for floats)."""

from __future__ import annotations

import ast
import operator
from dataclasses import replace

import numpy as np
from ops.op_case import OpCase

import retrograd
from retrograd.errors import OpError
from retrograd.ir import BlockBuilder, Function, IRModule, Var
from retrograd.ir.expr import Call, GlobalVar, TupleGetItem
from retrograd.ir.struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo, is_float_dtype
from retrograd.ops.api import R
from retrograd.passes.gradient import Gradient
from retrograd.runtime.executor import build
from optional import need  # noqa: E402


def dot_of_adjoint(mod: IRModule, name: str, required: list[int], **options) -> IRModule:
    """`mod` plus `<name>_adjoint` (Gradient with `options`) and `<name>_dot`, which takes the adjoint's
    parameters and one weight per gradient and returns sum_i sum(grad_i * w_i): differentiating it again
    is the next order (a Hessian-vector product when `name` returns a scalar)."""
    first = Gradient(name, required, **options)(mod)
    adj = first[f"{name}_adjoint"]
    params = [Var(p.name_hint, p.struct_info) for p in adj.params]
    weights = [Var(f"w{i}", s) for i, s in enumerate(adj.ret_struct_info.fields[1].fields)]
    bb = BlockBuilder(first)
    bb.begin_scope()
    # An impure adjoint (of collectives) is called outside dataflow blocks, from an impure function.
    bb.begin_block(dataflow=adj.is_pure)
    res = bb.emit(Call(GlobalVar(f"{name}_adjoint", adj.struct_info), tuple(params)), "res")
    grads = bb.emit(TupleGetItem(res, 1), "grads")
    total = None
    for i, w in enumerate(weights):
        term = bb.emit(R.sum(R.multiply(bb.emit(TupleGetItem(grads, i), "g"), w)), "t")
        total = term if total is None else bb.emit(R.add(total, term), "acc")
    out = bb.emit_output(total, "dot") if adj.is_pure else total
    bb.end_block()
    body = bb.end_scope(out)
    dot = Function(params + weights, body, body.struct_info, adj.is_pure, attrs={"global_symbol": f"{name}_dot"})
    return first.with_function(f"{name}_dot", dot)


def random_value(sinfo, rng):
    """Standard normal floats shaped like `sinfo` (zeros for integer fields: they take no cotangent)."""
    if isinstance(sinfo, TupleStructInfo):
        return tuple(random_value(f, rng) for f in sinfo.fields)
    if not is_float_dtype(sinfo.dtype):
        return np.zeros(tuple(sinfo.shape), sinfo.dtype)
    return rng.standard_normal(tuple(sinfo.shape))


def script_grads(text: str, arrays: list, require: list[str]):
    """(value, gradients of the named parameters) of `main(params..., c) = sum(f(params) * c)`, where the
    text defines `main` over the arrays and the cotangent `c` is its last parameter."""
    mod = Gradient("main", require_grads=require)(retrograd.parse(text))
    value, grads = build(mod)["main_adjoint"](*arrays)
    return value, [np.asarray(g) for g in (grads if isinstance(grads, tuple | list) else [grads])]


def tensor_type(a: np.ndarray) -> str:
    return f'R.Tensor({tuple(a.shape)}, "{a.dtype}")'

# Ops whose PyTorch kernel sums in another order than NumPy (blocked reductions, BLAS, cuDNN-style
# convolutions): their float results may differ by a few ulps of the largest partial sum, so they are
# compared within `ACCUMULATING_ULPS` ulps of the tensor's largest magnitude (at least 1: a sum that cancels
# to a small value keeps the error of its O(1) terms) instead of 2 ulps per value.
ACCUMULATING_ULPS = 16


def to_numpy(value):
    """A torch result (tensor or nested tuple) as NumPy."""
    if isinstance(value, tuple | list):
        return tuple(to_numpy(v) for v in value)
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def assert_matches(got, want, ulps: int = 2, where: str = "", eps: float | None = None):
    """`eps`: the unit of the ulps when the result is wider than the computation (float32 data, float64 out)."""
    if isinstance(want, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(want), f"{where}: tuple of {len(want)} expected, got {type(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_matches(g, w, ulps, f"{where}[{i}]", eps)
        return
    got = to_numpy(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=where)
        return
    eps = max(eps or 0.0, np.finfo(want.dtype).eps)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{where}: NaN positions")
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)], err_msg=f"{where}: infinities")
    if finite.any():
        w, g = want[finite].astype(np.float64), got[finite].astype(np.float64)
        scale = np.maximum(np.abs(w), max(np.abs(w).max(), 1.0) if ulps > 2 else 0.0)
        tol = ulps * eps * np.maximum(scale, np.finfo(want.dtype).tiny)
        bad = np.abs(g - w) > tol
        assert not bad.any(), f"{where}: {bad.sum()} of {bad.size} values differ beyond {ulps} ulps: got {g[bad][:5]}, want {w[bad][:5]}"


# uint64 indices beyond int64 (2**63 + 5 and 2**64 - 1 read as negative int64 would index from the end).
UINT64_BEYOND_INT64 = np.array([2**63 + 5, 3, 2**64 - 1], dtype=np.uint64)

OWN_OPS = {"relax.grad.merge_sparse_rows"}  # ops of our own, outside TVM: test_op_definitions.py, tests/passes/test_gradient_sparse.py, its gradient test_higher_order.py


# -- op cases with symbolic dims, for drawing data ------------------------------------------------


def bound_dims(case):
    """The case with its symbolic dims bound to small sizes, for drawing data (the module stays symbolic)."""
    sizes: dict = {}
    # ndim-only inputs take the shape of a static input of the same rank (so they broadcast together).
    static = {len(x.shape): x.shape for x in case.leaves() if isinstance(x, TensorStructInfo) and x.is_static}

    def conv(inp):
        if isinstance(inp, list):
            return [conv(i) for i in inp]
        if isinstance(inp, TensorStructInfo) and inp.shape is None and inp.ndim >= 0:
            return TensorStructInfo(static.get(inp.ndim, (3,) * inp.ndim), inp.dtype)
        if isinstance(inp, TensorStructInfo) and inp.shape is not None:
            return TensorStructInfo(tuple(sizes.setdefault(d, 3 + len(sizes)) if isinstance(d, str) else d for d in inp.shape), inp.dtype)
        return inp

    return replace(case, inputs=[conv(i) for i in case.inputs])


def has_int_tensors(case) -> bool:
    return any(isinstance(x, TensorStructInfo) and not is_float_dtype(x.dtype) for x in case.leaves())


# -- kernel results against references ------------------------------------------------------------


def assert_same(ours, ref, sinfo, where=""):
    """Values close to the reference, and shape/dtype exactly as inferred."""
    if isinstance(sinfo, TupleStructInfo):
        assert isinstance(ours, tuple) and len(ours) == len(sinfo.fields) == len(ref), where
        for i, (a, b, s) in enumerate(zip(ours, ref, sinfo.fields)):
            assert_same(a, b, s, f"{where}[{i}]")
        return
    assert isinstance(ours, np.ndarray), f"{where}: kernel returned {type(ours).__name__}"
    assert ours.shape == tuple(sinfo.shape), f"{where}: shape {ours.shape}, inferred {sinfo.shape}"
    assert str(ours.dtype) == sinfo.dtype, f"{where}: dtype {ours.dtype}, inferred {sinfo.dtype}"
    assert ours.shape == ref.shape, where
    if ours.dtype.kind == "f":
        tol = 1e-3 if ours.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(ours, ref, rtol=tol, atol=tol, err_msg=where)
    else:
        np.testing.assert_array_equal(ours, ref, err_msg=where)


# -- comparing dims, ours (int or TVMScript text) against TVM's, by evaluation ------------------

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv}


def eval_dim(dim, env: dict) -> int:
    """Evaluate integer dim text such as "n * 6 // 4" (arithmetic on names only, nothing executed)."""
    if isinstance(dim, int):
        return dim

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "T.int64" and len(node.args) == 1:
            return ev(node.args[0])  # TVM writes typed literals: T.int64(4)
        raise ValueError(f"unexpected dim expression {dim!r}")

    return ev(ast.parse(dim, mode="eval"))


def same_dim(a, b) -> bool:
    # Two symbolic expressions agree if they agree on several unrelated assignments of the symbols.
    return all(eval_dim(a, env) == eval_dim(b, env) for env in _ENVS)


_ENVS = [dict.fromkeys(("n", "m", "b", "k"), v) | {"m": v + 3, "k": 2 * v + 1} for v in (1, 2, 5, 12)]

# -- TVM side --------------------------------------------------------------------------------


def _tvm_sinfo_text(s) -> str:
    if isinstance(s, TensorStructInfo):
        if s.shape is None:
            return f'R.Tensor(ndim={s.ndim}, dtype="{s.dtype}")'
        dims = ", ".join(f'"{d}"' if isinstance(d, str) else str(d) for d in s.shape)
        return f'R.Tensor(({dims}{"," if len(s.shape) == 1 else ""}), dtype="{s.dtype}")'
    raise TypeError(s)


def _tvm_value(v) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_tvm_value(x) for x in v) + "]"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


def tvm_script(case: OpCase, attrs: dict | None = None) -> str:
    """The case as a TVMScript function whose last binding is the call (with all our normalized
    attributes, or exactly `attrs`)."""
    params = [f"a{i}: {_tvm_sinfo_text(s)}" for i, s in enumerate(case.param_sinfo())]
    names = iter(f"a{i}" for i in range(len(params)))
    symbols = set()
    args = []
    for inp in case.inputs:
        if isinstance(inp, ShapeStructInfo):
            symbols |= {d for d in inp.values if isinstance(d, str)}
            args.append("R.shape([" + ", ".join(str(d) for d in inp.values) + "])")
        elif isinstance(inp, list):
            args.append("(" + ", ".join(next(names) for _ in inp) + ",)")
        elif isinstance(inp, PrimStructInfo):
            args.append(f"R.prim_value(T.{inp.dtype}({inp.value!r}))")
        else:
            args.append(next(names))
    opdef = case.opdef
    try:
        attrs = opdef.normalize_attrs(case.attrs) if attrs is None else attrs
    except OpError:
        attrs = dict(case.attrs)  # attributes we refuse go to TVM as written: it must refuse them too
    args += [f"{k}={_tvm_value(v)}" for k, v in attrs.items()]
    decls = "".join(f"    {s} = T.int64()\n" for s in sorted(symbols))
    deco = "@R.function" if opdef.pure else "@R.function(pure=False)"
    return f"{deco}\ndef main({', '.join(params)}):\n{decls}    r = {opdef.script_name}({', '.join(args)})\n    return r\n"


def tvm_infer(case: OpCase):
    tvm_script_mod = need("tvm.script")
    func = tvm_script_mod.from_source(tvm_script(case))
    return func.body.blocks[-1].bindings[-1].var.ty


def _tvm_dim(d):
    try:
        return int(d)
    except (TypeError, ValueError):
        return str(d)


def assert_matches_tvm(ours, theirs, where: str) -> None:
    kind = type(theirs).__name__
    if kind == "TupleType":
        assert isinstance(ours, TupleStructInfo), f"{where}: TVM gives a tuple, we give {ours}"
        assert len(ours.fields) == len(theirs.fields), where
        for i, (a, b) in enumerate(zip(ours.fields, theirs.fields)):
            assert_matches_tvm(a, b, f"{where}[{i}]")
        return
    assert kind == "TensorType", f"{where}: unexpected TVM type {kind}"
    assert isinstance(ours, TensorStructInfo), f"{where}: TVM gives a tensor, we give {ours}"
    assert ours.dtype == str(theirs.dtype), f"{where}: dtype {ours.dtype} vs TVM's {theirs.dtype}"
    assert ours.ndim == int(theirs.ndim), f"{where}: ndim {ours.ndim} vs TVM's {theirs.ndim}"
    tvm_shape = theirs.shape
    if tvm_shape is None:
        assert ours.shape is None, f"{where}: we know the shape {ours.shape}, TVM only the ndim"
        return
    dims = [_tvm_dim(d) for d in tvm_shape.values] if hasattr(tvm_shape, "values") else [_tvm_dim(d) for d in tvm_shape]
    assert ours.shape is not None, f"{where}: TVM knows the shape {dims}, we only the ndim"
    for i, (a, b) in enumerate(zip(ours.shape, dims)):
        assert same_dim(a, b), f"{where}: dim {i} is {a!r}, TVM says {b!r}"


def our_result(case: OpCase):
    return case.build()["main"].ret_struct_info


def assert_round_trips_and_tvm_reads(case: OpCase) -> None:
    """The case's call prints, parses back equal and prints the same; TVM (when installed) reads it."""
    from optional import need

    mod = case.build()
    text = mod.script()
    back = retrograd.parse(text)
    retrograd.assert_structural_equal(mod, back)
    assert back.script() == text
    if case.tvm:
        need("tvm.script").from_source(text)


def in_dtype(case: OpCase, dtype: str) -> OpCase:
    """The case with every float32 tensor (inputs and dtype attributes) in `dtype` (bfloat16, float8, ...)."""

    def conv(i):
        if isinstance(i, list):
            return [conv(x) for x in i]
        if isinstance(i, TensorStructInfo) and i.dtype == "float32":
            return TensorStructInfo(i.shape, dtype, i.ndim)
        return i

    attrs = {k: (dtype if v == "float32" else v) for k, v in case.attrs.items()}
    return replace(case, inputs=[conv(i) for i in case.inputs], attrs=attrs, name=f"{case.name}-{dtype}")


def float_cases() -> list[OpCase]:
    """The static cases of pure ops with a float32 input."""
    from ops.all_cases import ALL_CASES

    return [c for c in ALL_CASES if c.is_static and any(s.dtype == "float32" for s in c.param_sinfo()) and c.opdef.pure]
