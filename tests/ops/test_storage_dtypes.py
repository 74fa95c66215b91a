"""bfloat16 / float8 (ml_dtypes): every op computes in float32 and rounds its result to the storage dtype.

References: the op's own float32 result on the same (exactly representable) inputs, rounded by
ml_dtypes' cast (round-to-nearest-even); PyTorch's bfloat16 kernels for a set of ops and a gradient.
PyTorch's CPU kernels round elementwise results the same way (compute in float, round once), and
accumulate matmul and sum in float32 before one rounding, as these kernels do; only the order of the
float32 additions differs, hence the one-ulp tolerance for reductions and transcendental functions
(PyTorch evaluates exp/tanh with its own vectorized code, NumPy with its own).
"""

from __future__ import annotations


import numpy as np
import pytest
from ops.helpers import float_cases, in_dtype
from optional import need

import retrograd
from retrograd.analysis import peak_memory
from retrograd.errors import DiagnosticError, UnsupportedError
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.passes import parse_pipeline

STORAGE = ("bfloat16", "float8_e4m3fn", "float8_e5m2")


CASES = float_cases()


def _leaves(value, sinfo):
    if isinstance(sinfo, TupleStructInfo):
        return [p for v, s in zip(value, sinfo.fields) for p in _leaves(v, s)]
    return [(value, sinfo)]


def _run(mod, values):
    with np.errstate(all="ignore"):
        return retrograd.build(mod)["main"](*values)


@pytest.mark.parametrize("dtype", STORAGE)
@pytest.mark.parametrize("chunk", range(4))
def test_every_op_rounds_its_float32_result_to_the_storage_dtype(dtype, chunk):
    need("ml_dtypes")
    checked, problems = 0, []
    for case in CASES[chunk::4]:
        low = in_dtype(case, dtype)
        try:
            mod = low.build()
        except DiagnosticError:
            continue  # the op does not type this dtype: a located error, as for any other dtype
        values32 = case.make_inputs(seed=3)
        # Inputs exactly representable in the storage dtype, so the float32 run sees the same numbers.
        swapped = [s.dtype == dtype for s in low.param_sinfo()]
        values = [v.astype(dtype) if sw else v for v, sw in zip(values32, swapped)]
        values32 = [v.astype(np.float32) if sw else v for v, sw in zip(values, swapped)]
        try:
            want = _run(case.build(), values32)
        except DiagnosticError:
            continue
        ex = retrograd.build(mod)
        with np.errstate(all="ignore"):
            got = ex["main"](*values)
        # The memory model follows: views stay views, nothing is written in place over a float32 copy.
        try:
            model = peak_memory(mod, "main")
        except UnsupportedError:  # a result of data-dependent shape: the model has no static peak
            model = ex.stats.peak_live_bytes
        if model != ex.stats.peak_live_bytes:
            problems.append(f"{low.id}: peak {ex.stats.peak_live_bytes} bytes, the memory model says {model}")
        for (g, s), (w, _) in zip(_leaves(got, mod["main"].ret_struct_info), _leaves(want, case.build()["main"].ret_struct_info)):
            if not isinstance(s, TensorStructInfo):
                continue
            g = np.asarray(g)
            expect = np.asarray(w).astype(s.dtype) if s.dtype == dtype else np.asarray(w)
            if str(g.dtype) != s.dtype or g.shape != expect.shape:
                problems.append(f"{low.id}: {g.dtype}{g.shape}, expected {s.dtype}{expect.shape}")
            elif not np.array_equal(g.astype(np.float64), expect.astype(np.float64), equal_nan=True):
                problems.append(f"{low.id}: values differ from the float32 result rounded to {dtype}")
        checked += 1
    assert not problems, "\n".join(problems[:20])
    assert checked > 10


def test_the_cases_cover_the_float_ops_of_the_registry():
    need("ml_dtypes")
    ops = {in_dtype(c, "bfloat16").op for c in CASES}
    assert {"relax.add", "relax.matmul", "relax.nn.conv2d", "relax.sum", "relax.nn.softmax", "relax.astype"} <= ops | {"relax.astype"}


SCRIPT = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "{dt}"), w: R.Tensor((8, 5), "{dt}")) -> R.Tensor((4, 5), "{dt}"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.tanh(y)
            c = R.multiply(z, R.const(1.5, "{dt}"))
            r = R.nn.relu(R.add(c, R.const(-0.25, "{dt}")))
            R.output(r)
        return r
'''


def _bf16_ulp(t):
    """One unit in the last place of bfloat16 at each value (8 bits of mantissa)."""
    torch = need("torch")
    a = t.float().abs().clamp_min(torch.finfo(torch.bfloat16).tiny)
    return torch.exp2(torch.floor(torch.log2(a)) - 7)


def test_a_bfloat16_function_against_pytorch_bfloat16():
    need("ml_dtypes")
    torch = need("torch")
    mod = retrograd.parse(SCRIPT.format(dt="bfloat16"))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype("bfloat16")
    w = rng.standard_normal((8, 5)).astype("bfloat16")
    got = retrograd.build(mod)["main"](x, w)
    assert str(got.dtype) == "bfloat16"
    tx, tw = torch.tensor(x.astype(np.float32)).bfloat16(), torch.tensor(w.astype(np.float32)).bfloat16()
    # Per op, as the executor runs it: each result rounded to bfloat16 before the next op.
    y = tx @ tw
    want = torch.relu(torch.tanh(y) * torch.tensor(1.5, dtype=torch.bfloat16) + torch.tensor(-0.25, dtype=torch.bfloat16))
    diff = (torch.tensor(got.astype(np.float32)) - want.float()).abs()
    assert bool((diff <= 2 * _bf16_ulp(want)).all()), diff.max()
    # Elementwise ops round exactly as PyTorch's: compute in float32, round to nearest even once.
    a, b = rng.standard_normal(1000).astype("bfloat16"), rng.standard_normal(1000).astype("bfloat16")
    ta, tb = torch.tensor(a.astype(np.float32)).bfloat16(), torch.tensor(b.astype(np.float32)).bfloat16()
    for op, tf in (("add", torch.add), ("multiply", torch.mul), ("divide", torch.div), ("subtract", torch.sub)):
        src = f'''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((1000,), "bfloat16"), b: R.Tensor((1000,), "bfloat16")) -> R.Tensor((1000,), "bfloat16"):
        r = R.{op}(a, b)
        return r
'''
        out = retrograd.build(retrograd.parse(src))["main"](a, b)
        np.testing.assert_array_equal(out.astype(np.float32), tf(ta, tb).float().numpy(), err_msg=op)


def test_gradient_in_bfloat16_against_pytorch_autograd():
    need("ml_dtypes")
    torch = need("torch")
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 6), "bfloat16"), w: R.Tensor((6, 2), "bfloat16")) -> R.Tensor((), "bfloat16"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.multiply(y, y)
            s = R.sum(z)
            R.output(s)
        return s
'''
    mod = parse_pipeline("gradient(func=main)")(retrograd.parse(src))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 6)).astype("bfloat16")
    w = rng.standard_normal((6, 2)).astype("bfloat16")
    loss, (gx, gw) = retrograd.build(mod)["main_adjoint"](x, w)
    assert str(gx.dtype) == str(gw.dtype) == "bfloat16"
    tx = torch.tensor(x.astype(np.float32)).bfloat16().requires_grad_()
    tw = torch.tensor(w.astype(np.float32)).bfloat16().requires_grad_()
    y = tx @ tw
    (y * y).sum().backward()
    for g, t in ((gx, tx.grad), (gw, tw.grad)):
        diff = (torch.tensor(g.astype(np.float32)) - t.float()).abs()
        assert bool((diff <= 2 * _bf16_ulp(t)).all()), diff.max()
    # And against float64 on the same inputs: the bfloat16 gradient is within bfloat16 precision.
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    gw64 = x64.T @ (2 * (x64 @ w64))
    np.testing.assert_allclose(gw.astype(np.float64), gw64, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("dtype", STORAGE)
def test_constants_print_and_parse_back_and_fold(dtype):
    ml_dtypes = need("ml_dtypes")
    values = np.array([0.1, -2.5, 3.0, 100.0, 0.0], dtype=np.float32)
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main() -> R.Tensor((5,), "{dtype}"):
        a = R.const({values.tolist()}, "float32")
        b = R.astype(a, "{dtype}")
        c = R.add(b, R.const([1, 1, 1, 1, 1], "{dtype}"))
        return c
'''
    mod = retrograd.parse(src)
    folded = parse_pipeline("fold-constant")(mod)
    want = (values.astype(getattr(ml_dtypes, dtype)).astype(np.float32) + 1).astype(getattr(ml_dtypes, dtype))
    text = folded.script()
    assert "R.add" not in text and "R.astype" not in text, text
    again = retrograd.parse(text)
    assert again.script() == text
    for m in (mod, folded, again):
        got = retrograd.build(m)["main"]()
        assert str(got.dtype) == dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_astype_to_and_from_storage_matches_ml_dtypes_rounding():
    ml_dtypes = need("ml_dtypes")
    x = np.random.default_rng(2).standard_normal(4096).astype(np.float32) * 50
    for dtype in STORAGE:
        src = f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4096,), "float32")) -> R.Tensor((4096,), "float32"):
        y = R.astype(x, "{dtype}")
        z = R.astype(y, "float32")
        return z
'''
        got = retrograd.build(retrograd.parse(src))["main"](x)
        assert got.dtype == np.float32, dtype
        np.testing.assert_array_equal(got, x.astype(getattr(ml_dtypes, dtype)).astype(np.float32), err_msg=dtype)


@pytest.mark.parametrize("dtype", STORAGE)
def test_astype_from_storage_gives_a_float32_array_that_later_ops_compute_in(dtype):
    # Widening is the astype's whole result: the ops after it compute in float32, beyond the storage range.
    ml_dtypes = need("ml_dtypes")
    x = np.array([0.5, -104.0, 448.0, 3.0], dtype=getattr(ml_dtypes, dtype))
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "{dtype}"), s: R.Tensor((), "float32")) -> R.Tensor((4,), "float32"):
        y = R.astype(x, "float32")
        z = R.add(y, y)
        w = R.multiply(z, s)
        return w
'''
    for target in ("numpy", "python"):
        mod = retrograd.parse(src)
        if target == "numpy":
            got = retrograd.build(mod)["main"](x, np.float32(1000.0))
        else:
            namespace: dict = {}
            exec(compile(retrograd.lower_to_python(mod), "lowered", "exec"), namespace)  # noqa: S102 - our own generated source
            got = namespace["main"](x, np.float32(1000.0))
        want = x.astype(np.float64) * 2 * 1000
        assert got.dtype == np.float32, (target, got.dtype)
        np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=target)


def test_without_ml_dtypes_building_says_what_to_install(monkeypatch):
    need("ml_dtypes")
    import sys

    monkeypatch.setitem(sys.modules, "ml_dtypes", None)
    with pytest.raises(DiagnosticError, match=r"pip install ml_dtypes.*retrograd\[bf16\]"):
        retrograd.parse(SCRIPT.format(dt="bfloat16"))  # its constants
    src = SCRIPT.format(dt="bfloat16").replace('R.const(1.5, "bfloat16")', "z").replace('R.const(-0.25, "bfloat16")', "c")
    mod = retrograd.parse(src)  # types without ml_dtypes
    assert mod["main"].ret_struct_info.dtype == "bfloat16"
    with pytest.raises(DiagnosticError, match=r"pip install ml_dtypes.*retrograd\[bf16\]"):
        retrograd.build(mod)


def test_run_cast_converts_inputs_to_bfloat16(tmp_path, capsys):
    need("ml_dtypes")
    from retrograd.cli import main

    script = tmp_path / "m.py"
    script.write_text(SCRIPT.format(dt="bfloat16"))
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 5)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, w=w)
    out = tmp_path / "out.npz"
    assert main(["run", str(script), "--inputs", str(tmp_path / "in.npz"), "--cast", "--save", str(out)]) == 0
    assert "dtype=bfloat16" in capsys.readouterr().out
    got = np.load(out)["result"]
    ref = retrograd.build(retrograd.parse(SCRIPT.format(dt="bfloat16")))["main"](x.astype("bfloat16"), w.astype("bfloat16"))
    np.testing.assert_array_equal(got.astype(np.float32) if got.dtype.kind != "V" else got.view(ref.dtype).astype(np.float32), ref.astype(np.float32))
    # bfloat16 arrays saved by NumPy (raw 2-byte records) are read back as bfloat16, without --cast.
    np.savez(tmp_path / "in16.npz", x=x.astype(ref.dtype), w=w.astype(ref.dtype))
    assert main(["run", str(script), "--inputs", str(tmp_path / "in16.npz"), "--save", str(out)]) == 0
    got = np.load(out)["result"]
    np.testing.assert_array_equal(got.view(ref.dtype).astype(np.float32), ref.astype(np.float32))
    # Random inputs of bfloat16 parameters, in a function without bfloat16 constants.
    plain = tmp_path / "plain.py"
    plain.write_text(SCRIPT.format(dt="bfloat16").replace('R.const(1.5, "bfloat16")', "z").replace('R.const(-0.25, "bfloat16")', "c"))
    capsys.readouterr()
    assert main(["run", str(plain)]) == 0
    assert "dtype=bfloat16" in capsys.readouterr().out


# (Relax call on `a` (and `b`), shape of a, shape of b, PyTorch on bfloat16 tensors). PyTorch's CPU
# kernels compute these in float32 and round once, as retrograd does; reductions and matmul/conv
# accumulate in float32 in another order, and exp/tanh/sigmoid use other float32 code, so a result
# may round to the neighbouring bfloat16: one ulp is allowed.
TORCH_OPS = [
    ("R.exp(a)", (6, 7), None, lambda t, a, b: t.exp(a)),
    ("R.tanh(a)", (6, 7), None, lambda t, a, b: t.tanh(a)),
    ("R.sigmoid(a)", (6, 7), None, lambda t, a, b: t.sigmoid(a)),
    ("R.sqrt(R.abs(a))", (6, 7), None, lambda t, a, b: t.sqrt(t.abs(a))),
    ("R.sum(a, axis=[1])", (6, 300), None, lambda t, a, b: a.sum(dim=1)),
    ("R.mean(a, axis=[0])", (300, 6), None, lambda t, a, b: a.mean(dim=0)),
    ("R.nn.softmax(a, axis=-1)", (6, 50), None, lambda t, a, b: t.softmax(a, dim=-1)),
    ("R.matmul(a, b)", (16, 64), (64, 8), lambda t, a, b: a @ b),
    ("R.nn.conv2d(a, b, padding=[1, 1, 1, 1])", (2, 3, 8, 8), (4, 3, 3, 3),
     lambda t, a, b: t.nn.functional.conv2d(a, b, padding=1)),
]


@pytest.mark.parametrize("expr, ashape, bshape, ref", TORCH_OPS, ids=[o[0] for o in TORCH_OPS])
def test_single_ops_against_pytorch_bfloat16(expr, ashape, bshape, ref):
    need("ml_dtypes")
    torch = need("torch")
    rng = np.random.default_rng(5)
    a = rng.uniform(-2, 2, ashape).astype("bfloat16")
    args = [a] if bshape is None else [a, rng.uniform(-1, 1, bshape).astype("bfloat16")]
    params = ", ".join(f'{n}: R.Tensor({tuple(v.shape)}, "bfloat16")' for n, v in zip("ab", args))
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main({params}):
        r = {expr}
        return r
'''
    got = retrograd.build(retrograd.parse(src))["main"](*args)
    assert str(got.dtype) == "bfloat16"
    targs = [torch.tensor(v.astype(np.float32)).bfloat16() for v in args] + [None]
    want = ref(torch, targs[0], targs[1])
    assert want.dtype == torch.bfloat16
    diff = (torch.tensor(np.asarray(got).astype(np.float32)) - want.float()).abs()
    assert bool((diff <= _bf16_ulp(want)).all()), float(diff.max())



# (call, exact): TVM's CPU legalization (BF16ComputeLegalize / FP8ComputeLegalize) computes an elementwise op
# in float32 and rounds to storage, as retrograd does: the same bits; its exp/tanh/sigmoid/softmax use other
# float32 code, so a result may round to the neighbouring value. Not compared: TVM's reductions (sum, matmul)
# keep their accumulator in the storage dtype, rounding at every step, where retrograd (like PyTorch)
# accumulates in float32 and rounds once; and float8_e4m3fn, where TVM 0.27 rounds some exactly
# representable products to a neighbour (-0.0234375 -> -0.02734375), so e4m3fn is checked against
# ml_dtypes' own casting only (test_every_op_rounds_its_float32_result_to_the_storage_dtype).
TVM_OPS = [
    ("R.exp(a)", False), ("R.tanh(a)", False), ("R.sigmoid(a)", False), ("R.add(a, b)", True),
    ("R.multiply(a, b)", True), ("R.divide(a, b)", True), ("R.subtract(a, b)", True),
    ("R.nn.softmax(a, axis=-1)", False), ("R.nn.relu(a)", True), ("R.maximum(a, b)", True),
]


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e5m2"])
@pytest.mark.parametrize("call, exact", TVM_OPS, ids=[c for c, _ in TVM_OPS])
def test_single_ops_against_tvm(call, exact, dtype):
    """One op per function, so that TVM's fusion does not keep an intermediate in float32."""
    ml_dtypes = need("ml_dtypes")
    tvm = need("tvm")
    relax = need("tvm.relax")

    if dtype.startswith("float8") and not exact:
        pytest.skip("TVM's exp/tanh/sigmoid/softmax refuse float8 (its float check excludes float8); retrograd runs them")
    storage = getattr(ml_dtypes, dtype)
    rng = np.random.default_rng(6)
    a = rng.uniform(-2, 2, (8, 40)).astype(storage)
    b = rng.uniform(0.5, 2, (8, 40)).astype(storage)
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main(a: R.Tensor((8, 40), "{dtype}"), b: R.Tensor((8, 40), "{dtype}")):
        r = {call}
        return r
'''
    got = retrograd.build(retrograd.parse(src))["main"](a, b)
    vm = relax.VirtualMachine(tvm.compile(tvm.script.from_source(src), target="llvm"), tvm.cpu())
    want = vm["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b)).numpy()
    assert str(got.dtype) == str(want.dtype) == dtype
    g, w = got.astype(np.float64), want.astype(np.float64)
    if exact:
        np.testing.assert_array_equal(g, w)
    else:  # at most one step of the storage dtype apart
        info = ml_dtypes.finfo(storage)
        step = np.abs(w) * float(info.eps) + float(info.smallest_subnormal)
        assert np.all(np.abs(g - w) <= step), np.abs(g - w).max()


@pytest.mark.parametrize("dtype", STORAGE)
def test_lowered_python_rounds_as_the_executor(dtype):
    """`retrograd lower` source runs the same float32-then-round kernels: the same bits as the executor."""
    need("ml_dtypes")
    mod = parse_pipeline("gradient(func=main)")(retrograd.parse(_scalar_loss(dtype)))
    ns: dict = {}
    exec(compile(retrograd.lower_to_python(mod), "lowered", "exec"), ns)  # noqa: S102 - our own generated source
    rng = np.random.default_rng(7)
    args = [rng.uniform(-1, 1, (4, 8)).astype(dtype), rng.uniform(-1, 1, (8, 5)).astype(dtype)]
    want = retrograd.build(mod)["main_adjoint"](*args)
    got = ns["main_adjoint"](*args)
    for g, w in zip([got[0], *got[1]], [want[0], *want[1]]):
        assert str(g.dtype) == str(w.dtype) == dtype
        np.testing.assert_array_equal(g.astype(np.float32), w.astype(np.float32))


def _scalar_loss(dtype):
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 8), "{dtype}"), w: R.Tensor((8, 5), "{dtype}")) -> R.Tensor((), "{dtype}"):
        with R.dataflow():
            y = R.matmul(x, w)
            z = R.tanh(y)
            c = R.multiply(z, R.const(1.5, "{dtype}"))
            s = R.sum(R.nn.relu(R.add(c, R.const(-0.25, "{dtype}"))))
            R.output(s)
        return s
'''


def test_run_cast_bfloat16_runs_a_float32_module_in_bfloat16(tmp_path, capsys):
    """`retrograd run --cast bfloat16` (the cast-floats pass): every float32 tensor, parameters and
    constants included, becomes bfloat16; the same bits as the module written in bfloat16."""
    need("ml_dtypes")
    from retrograd.cli import main

    script = tmp_path / "m32.py"
    script.write_text(SCRIPT.format(dt="float32"))
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((4, 8)).astype(np.float32), rng.standard_normal((8, 5)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, w=w)
    out = tmp_path / "out.npz"
    assert main(["run", str(script), "--inputs", str(tmp_path / "in.npz"), "--cast", "bfloat16", "--save", str(out)]) == 0
    assert "dtype=bfloat16" in capsys.readouterr().out
    ref = retrograd.build(retrograd.parse(SCRIPT.format(dt="bfloat16")))["main"](x.astype("bfloat16"), w.astype("bfloat16"))
    got = np.load(out)["result"].view(ref.dtype)
    np.testing.assert_array_equal(got.astype(np.float32), ref.astype(np.float32))
    cast = parse_pipeline("cast-floats(dtype=bfloat16)")(retrograd.parse(SCRIPT.format(dt="float32")))
    assert retrograd.structural_equal(cast, retrograd.parse(SCRIPT.format(dt="bfloat16")))
    assert main(["run", str(script), "--cast", "int8"]) == 1
    assert "give a float dtype" in capsys.readouterr().err


@pytest.mark.parametrize("dtype", STORAGE)
def test_special_constants_and_prim_values_read_back(dtype):
    """(From the coordinator's bf16 branch.) inf and nan where the dtype has them, prim values, astype."""
    need("ml_dtypes")
    values = "[1.5, -0.25, 3.0]" if dtype != "float8_e5m2" else '[1.5, -0.25, float("inf"), float("nan")]'
    text = f"""
@R.function
def main(x: R.Tensor((4,), "float32")):
    c = R.const({values}, "{dtype}")
    p = R.prim_value(T.{dtype}(1.5))
    y = R.astype(x, "{dtype}")
    return (c, p, y)
"""
    mod = retrograd.parse(text)
    again = retrograd.parse(mod.script())
    assert retrograd.structural_equal(again, mod)
    c = again["main"].body.blocks[0].bindings[0].value.data
    assert str(c.dtype) == dtype
    want = np.array(eval(values.replace("float", "_f"), {"_f": float}), dtype)  # noqa: S307 - the literal above
    np.testing.assert_array_equal(c.astype(np.float64), want.astype(np.float64))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_cast_floats_casts_callees_and_their_calls_alike(dtype):
    """Functions calling each other (through `cls.` and recursively): every signature is cast, so each call
    type-checks against its callee's new signature; the result is well formed and computes, in `dtype`,
    what a naive reference computes in float32 and rounds after each op."""
    ml_dtypes = need("ml_dtypes")
    from retrograd.ir.well_formed import well_formed

    src = '''
@I.ir_module
class Module:
    @R.function
    def square(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y = R.multiply(x, x)
        return y

    @R.function
    def count(n: R.Tensor((), "int64"), acc: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        cls = Module
        stop = R.less_equal(n, R.const(0, "int64"))
        if stop:
            r = acc
        else:
            r = cls.count(R.subtract(n, R.const(1, "int64")), R.add(cls.square(acc), R.const(0.5, "float32")))
        return r

    @R.function
    def main(x: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        cls = Module
        y = cls.count(R.const(2, "int64"), x)
        return y
'''
    cast = parse_pipeline(f"cast-floats(dtype={dtype})")(retrograd.parse(src))
    assert well_formed(cast) == []
    assert "float32" not in cast.script()
    st = getattr(ml_dtypes, dtype) if dtype == "bfloat16" else np.dtype(dtype)
    x = np.array([0.3, -1.25, 0.7], dtype=st)
    want = x
    for _ in range(2):
        want = ((want.astype(np.float32) * want.astype(np.float32)).astype(st).astype(np.float32) + 0.5).astype(st)
    got = retrograd.build(cast)["main"](x)
    assert got.dtype == st
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


@pytest.mark.parametrize("corpus_file, func", [("c01_mlp.py", "main"), ("c60_nn_models.py", "cnn")])
def test_a_fresh_process_differentiates_a_bfloat16_script(tmp_path, corpus_file, func):
    """In a process that has not imported ml_dtypes (the CLI reading a bfloat16 script), the gradient rules'
    bfloat16 constants (c01's relu, cnn's adaptive pooling matrices) are made through ml_dtypes too: `opt -p
    gradient` succeeds and gives what the same pass gives in this process."""
    need("ml_dtypes")
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    cast = parse_pipeline("cast-floats(dtype=bfloat16)")(retrograd.parse((root / "tests" / "corpus" / corpus_file).read_text()))
    script = tmp_path / "bf16.py"
    script.write_text(cast.script())
    env = {"PYTHONPATH": str(root), "PATH": ""}
    probe = "import sys; import retrograd; print('ml_dtypes' in sys.modules)"
    fresh = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert fresh.stdout.strip() == "False", fresh.stderr  # the case this test is about
    pipeline = f"gradient(func={func}, seeds=ones)"
    res = subprocess.run([sys.executable, "-m", "retrograd", "opt", str(script), "-p", pipeline], capture_output=True,
                         text=True, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert retrograd.structural_equal(retrograd.parse(res.stdout), parse_pipeline(pipeline)(cast))
