"""The torch backend (runtime/torch_exec.py) against the NumPy executor: every op case forward and through
its adjoint (the Gradient pass), the corpus, memory (peak_live_bytes equal on both backends and to
retrograd.analysis.peak_memory), errors at the binding, checkpoint plans within budget. CPU here; the
CUDA variants run when torch.cuda.is_available()."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from optional import need

import retrograd
from retrograd.errors import DiagnosticError, ExecutionError, UnsupportedError
from retrograd.ir.struct_info import TensorStructInfo, is_float_dtype

from ops.all_cases import ALL_CASES  # noqa: E402
from ops.helpers import ACCUMULATING_ULPS, assert_matches  # noqa: E402

STATIC = [c for c in ALL_CASES if c.is_static and c.opdef.kernel is not None]
GRAD = [c for c in STATIC if c.differentiable_params() and c.opdef.grad is not None]
CORPUS = sorted((Path(__file__).resolve().parents[1] / "corpus").glob("c*.py"))


def _negative_strides(case) -> bool:
    """NumPy views a slice with negative strides; torch has no negative strides and copies it (the one
    place the torch backend's peak may exceed the NumPy executor's and the memory model's)."""
    strides = case.attrs.get("strides") if case.op.endswith("strided_slice") else None
    return bool(strides) and any(s < 0 for s in strides) or case.op.endswith("dynamic_strided_slice")


def _ulps(case) -> int:
    return 2 if case.opdef.cost.kind == "elementwise" and not case.op.startswith("relax.grad.") else ACCUMULATING_ULPS


def _eps(args):
    """The unit of the ulps: the coarsest float among the arguments (float32 data read into a float64 result)."""
    flat = []
    for a in args:
        flat.extend(a if isinstance(a, tuple) else (a,))
    return max((np.finfo(a.dtype).eps for a in flat if isinstance(a, np.ndarray) and a.dtype.kind == "f"), default=None)


def _run_both(mod, name, args, device="cpu"):
    """(NumPy result, torch result as NumPy, NumPy peak, torch peak), or None when NumPy refuses the inputs."""
    ex = retrograd.build(mod)
    try:
        want = ex[name](*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    except DiagnosticError:
        with pytest.raises(DiagnosticError):
            retrograd.build(mod, backend="torch", device=device)[name](*args)
        return None
    tex = retrograd.build(mod, backend="torch", device=device)
    got = tex.numpy(tex[name](*args))
    return want, got, _model_peak(mod, name, ex.stats.peak_live_bytes, tex.stats.peak_live_bytes), tex.stats.peak_live_bytes


def _model_peak(mod, name, numpy_peak, torch_peak):
    """retrograd.analysis.peak_memory, the peak both backends must meet; NumPy's measured peak where the
    model cannot say (dynamic shapes) or is a bound the NumPy executor does not reach either (an If's
    untaken branch)."""
    from retrograd.analysis import peak_memory

    try:
        model = peak_memory(mod, name)
    except DiagnosticError:
        return numpy_peak
    return numpy_peak if torch_peak != model and numpy_peak != model else model


@pytest.mark.parametrize("case", STATIC, ids=lambda c: c.id)
def test_op_case_forward_on_torch(case):
    need("torch")
    out = _run_both(case.build(), "main", case.make_inputs(seed=5))
    if out is not None:
        want, got, model_peak, t_peak = out
        assert_matches(got, want, _ulps(case), case.id, _eps(case.make_inputs(seed=5)))
        assert t_peak >= model_peak if _negative_strides(case) else t_peak == model_peak


def _adjoint(case):
    from retrograd.passes.gradient import Gradient

    mod = case.build()
    required = case.differentiable_params()
    return Gradient("main", required, None, seeds="param")(mod)


def _cotangent(case, mod, inputs, rng):
    out = retrograd.build(case.build())["main"](*[v.copy() for v in inputs])

    def like(v):
        if isinstance(v, tuple):
            return tuple(like(x) for x in v)
        v = np.asarray(v)
        return rng.uniform(-1, 1, v.shape).astype(v.dtype) if v.dtype.kind == "f" else np.zeros_like(v)

    return like(out)


@pytest.mark.parametrize("case", GRAD, ids=lambda c: c.id)
def test_op_case_adjoint_on_torch(case):
    need("torch")
    try:
        mod = _adjoint(case)
    except DiagnosticError as err:
        pytest.skip(f"no adjoint: {err}")
    inputs = case.make_inputs(seed=7)
    try:
        cot = _cotangent(case, mod, inputs, np.random.default_rng(8))
    except DiagnosticError:
        pytest.skip("the forward call fails on these inputs (checked by the forward test)")
    out = _run_both(mod, "main_adjoint", [*inputs, cot])
    if out is not None:
        want, got, model_peak, t_peak = out
        assert_matches(got, want, ACCUMULATING_ULPS, case.id, _eps(inputs))
        assert t_peak >= model_peak if _negative_strides(case) else t_peak == model_peak


def test_peak_matches_the_memory_model():
    need("torch")
    from retrograd.analysis import peak_memory

    mod = retrograd.parse(CORPUS[0].read_text())
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((8, 16)).astype("float32"),
            rng.standard_normal(16).astype("float32"), rng.standard_normal((16, 3)).astype("float32"),
            rng.standard_normal(3).astype("float32"), np.array([0, 2, 1, 0])]
    tex = retrograd.build(mod, backend="torch")
    loss = tex["main"](*args)
    assert tex.stats.peak_live_bytes == peak_memory(mod, "main")
    # A naive reference: the MLP written with NumPy.
    x, w0, b0, w1, b1, y = args
    h = np.maximum(x @ w0 + b0, 0)
    z = h @ w1 + b1
    logp = z - z.max(1, keepdims=True) - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True))
    np.testing.assert_allclose(float(loss), -logp[np.arange(4), y].mean(), rtol=1e-5)


def _corpus_inputs(func, rng):
    out = []
    for p in func.params:
        s = p.struct_info
        if not isinstance(s, TensorStructInfo) or not s.is_static:
            return None
        if is_float_dtype(s.dtype):
            out.append(rng.uniform(-1, 1, s.shape).astype(s.dtype))
        elif s.dtype == "bool":
            out.append(rng.random(s.shape) < 0.5)
        else:
            out.append(np.zeros(s.shape, s.dtype))
    return out


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_on_both_backends(path):
    need("torch")
    mod = retrograd.parse(path.read_text(), str(path))
    rng = np.random.default_rng(1)
    ran = 0
    for name, func in mod.functions_items() if hasattr(mod, "functions_items") else mod.items():
        if not hasattr(func, "params"):
            continue
        args = _corpus_inputs(func, rng)
        if args is None:
            continue
        out = _run_both(mod, name, args)
        if out is not None:
            want, got, model_peak, t_peak = out
            assert_matches(got, want, ACCUMULATING_ULPS, f"{path.stem}:{name}")
            assert t_peak == model_peak
            ran += 1
    if not ran:
        pytest.skip("no function with static tensor parameters")


def test_errors_name_the_binding():
    need("torch")
    mod = retrograd.parse(
        "@R.function\n"
        "def main(x: R.Tensor((3,), \"float32\"), i: R.Tensor((2,), \"int64\")):\n"
        "    y = R.take(x, i, axis=0)\n"
        "    return y\n"
    )
    tex = retrograd.build(mod, backend="torch")
    with pytest.raises(ExecutionError, match=r"binding 'y' = R\.take\(x, i\).*out of range") as info:
        tex["main"](np.zeros(3, np.float32), np.array([0, 7]))
    assert info.value.span is not None and info.value.span.line == 3
    with pytest.raises(ExecutionError, match="parameter 'x' expects"):
        tex["main"](np.zeros(4, np.float32), np.array([0, 1]))


def test_torch_inputs_and_outputs():
    torch = need("torch")
    mod = retrograd.parse(CORPUS[0].read_text())
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((8, 16)).astype("float32"),
            rng.standard_normal(16).astype("float32"), rng.standard_normal((16, 3)).astype("float32"),
            rng.standard_normal(3).astype("float32"), np.array([0, 2, 1, 0])]
    tex = retrograd.build(mod, backend="torch")
    from_np = tex["main"](*args)
    from_torch = tex["main"](*[torch.from_numpy(a) for a in args])
    assert isinstance(from_torch, torch.Tensor) and from_torch.device.type == "cpu"
    assert torch.equal(from_np, from_torch)
    as_np = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](*args)
    assert isinstance(as_np, np.ndarray) and as_np == from_np.numpy()


def test_unknown_backend_and_missing_cuda():
    torch = need("torch")
    mod = retrograd.parse(CORPUS[0].read_text())
    with pytest.raises(UnsupportedError, match="unknown backend 'jax'"):
        retrograd.build(mod, backend="jax")
    if not torch.cuda.is_available():
        with pytest.raises(UnsupportedError, match="no CUDA device"):
            retrograd.build(mod, backend="torch", device="cuda")


def test_cuda_forward_and_device_peak():
    torch = need("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from retrograd.analysis import peak_memory

    mod = retrograd.parse(CORPUS[0].read_text())
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((8, 16)).astype("float32"),
            rng.standard_normal(16).astype("float32"), rng.standard_normal((16, 3)).astype("float32"),
            rng.standard_normal(3).astype("float32"), np.array([0, 2, 1, 0])]
    want = retrograd.build(mod)["main"](*args)
    tex = retrograd.build(mod, backend="torch", device="cuda")
    got = tex["main"](*args)
    assert got.device.type == "cuda"
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5)
    assert tex.stats.peak_live_bytes == peak_memory(mod, "main")
    assert tex.stats.device_max_allocated_bytes >= tex.stats.peak_intermediate_bytes


FAST_PATHS = """
@R.function
def main(x: R.Tensor((2, 3, 7, 9), "float32"), g: R.Tensor((2, 3, 4, 5), "float32"), b: R.Tensor((1, 3, 1, 1), "float32")):
    a = R.add(x, b)
    r = R.nn.relu(a)
    p = R.nn.max_pool2d(r, pool_size=[3, 2], strides=[2, 2], padding=[1, 1, 1, 1], dilation=[1, 1], ceil_mode=True)
    q = R.grad.max_pool2d_backward(g, x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 1, 1], ceil_mode=True)
    m = R.greater(x, R.const(0.0, "float32"))
    w1 = R.where(m, q, R.const(0.0, "float32"))
    w2 = R.where(m, R.const(0.0, "float32"), q)
    e = R.negative(w2)
    return (p, q, w1, e, r)
"""


def test_fast_cpu_paths_equal_numpy_at_special_values():
    """The CPU kernels that avoid torch.where and ATen's NC... max pooling (strided tap views, the
    threshold ops, results written into a dying argument's buffer) against the NumPy executor, bit for
    bit: ties in every window (integers), NaN data (a NaN window sends its gradient to its last NaN), an infinite
    gradient (its mask multiplies: NaN off the maximum), signed zeros."""
    need("torch")
    mod = retrograd.parse(FAST_PATHS)
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (2, 3, 7, 9)).astype("float32")
    x[0, 0, 0, 0], x[1, 2, 3, 4], x[0, 1, 2, 2] = np.nan, -0.0, np.inf
    g = rng.standard_normal((2, 3, 4, 5)).astype("float32")
    g[0, 0, 1, 1], g[1, 1, 0, 0] = np.inf, np.nan
    b = np.array([0.0, -0.0, 1.0], np.float32).reshape(1, 3, 1, 1)
    with np.errstate(invalid="ignore"):
        want = retrograd.build(mod)["main"](x, g, b)
    got = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](x, g, b)
    for name, w, o in zip("pqwer", want, got):
        assert w.dtype == o.dtype and w.shape == o.shape
        np.testing.assert_array_equal(o, w)
        assert np.array_equal(np.signbit(o[~np.isnan(o)]), np.signbit(w[~np.isnan(w)])), name


TILED_POOLS = """
@R.function
def main(x: R.Tensor((2, 3, 7, 9), "float32"), g1: R.Tensor((2, 3, 4, 5), "float32"), g2: R.Tensor((2, 3, 3, 3), "float32"),
         g3: R.Tensor((2, 3, 3, 4), "float32"), v: R.Tensor((2, 3, 5, 6, 7), "float32"), g4: R.Tensor((2, 3, 3, 3, 4), "float32")):
    q1 = R.grad.max_pool2d_backward(g1, x, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 1, 1], ceil_mode=True)
    q2 = R.grad.max_pool2d_backward(g2, x, pool_size=[3, 3], strides=[3, 3], padding=[1, 1, 1, 1])
    q3 = R.grad.max_pool2d_backward(g3, x, pool_size=[2, 2], strides=[2, 2])
    q4 = R.grad.max_pool3d_backward(g4, v, pool_size=[2, 2, 2], strides=[2, 2, 2], padding=[1, 1, 1, 0, 0, 0])
    return (q1, q2, q3, q4)
"""


def _same_bits(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def test_compiled_forms_of_the_fast_paths_equal_numpy(monkeypatch):
    """The forms the CPU kernels take under torch.compile (plain selects, the max pooling backward over
    window blocks), run eagerly with torch.compiler.is_compiling forced on: bit for bit the eager kernels'
    results, and the NumPy executor's at the special values of test_fast_cpu_paths_equal_numpy_at_special_values
    (the 3-D pooling backward's NumPy kernel sums per-depth parts: there the values, zeros of either sign)."""
    torch = need("torch")
    rng = np.random.default_rng(6)

    def special(shape, kind):
        a = (rng.integers(-2, 3, shape) if kind == "x" else rng.standard_normal(shape)).astype("float32")
        a.flat[0], a.flat[5], a.flat[9] = (np.nan, -0.0, np.inf) if kind == "x" else (np.inf, np.nan, -0.0)
        return a

    cases = [(FAST_PATHS, [special((2, 3, 7, 9), "x"), special((2, 3, 4, 5), "g"),
                           np.array([0.0, -0.0, 1.0], np.float32).reshape(1, 3, 1, 1)]),
             (TILED_POOLS, [special((2, 3, 7, 9), "x"), special((2, 3, 4, 5), "g"), special((2, 3, 3, 3), "g"),
                            special((2, 3, 3, 4), "g"), special((2, 3, 5, 6, 7), "x"), special((2, 3, 3, 3, 4), "g")])]
    for text, args in cases:
        mod = retrograd.parse(text)
        with np.errstate(invalid="ignore"):
            want = retrograd.build(mod)["main"](*args)
        eager = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](*args)
        with monkeypatch.context() as m:
            m.setattr(torch.compiler, "is_compiling", lambda: True)
            got = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](*args)
        for k, (w, e, o) in enumerate(zip(want, eager, got)):
            assert _same_bits(o, e), k
            if o.ndim == 5:
                np.testing.assert_array_equal(o, w)
            else:
                assert np.array_equal(o, w, equal_nan=True) and np.array_equal(np.signbit(o), np.signbit(w)), k


SELECTS = """
@R.function
def main(x: R.Tensor((6, 9), "DT"), y: R.Tensor((6, 9), "DT"), a: R.Tensor((9,), "DT"), c: R.Tensor((6, 9), "bool")):
    s1 = R.maximum(x, y)
    s2 = R.minimum(x, y)
    s3 = R.nn.leakyrelu(x, alpha=0.3)
    s4 = R.nn.prelu(x, a, axis=1)
    s5 = R.clip(x, -1.0, 1.0)
    s6 = R.nn.selu(x)
    s7 = R.nn.softplus(x, beta=2.0, threshold=1.0)
    s8 = R.sign(x)
    s9 = R.where(c, x, y)
    s10 = R.where(c, x, R.const(-0.0, "DT"))
    return (s1, s2, s3, s4, s5, s6, s7, s8, s9, s10)
"""


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_select_kernels_equal_numpy_at_special_values(dtype):
    """The kernels that select without torch.where on CPU (a bit blend, ATen's leaky_relu) against the NumPy
    executor bit for bit: NaN in either operand, ties of +0 and -0, infinities, ties of equal values."""
    need("torch")
    rng = np.random.default_rng(7)
    pool = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, -2.5, 3.0], dtype)
    x, y = rng.choice(pool, (6, 9)), rng.choice(pool, (6, 9))
    x[0, :], y[0, :] = pool[:9], pool[:9]  # every value against itself
    x[1, :], y[1, :] = pool[:9], pool[::-1][:9]
    a = rng.choice(np.array([0.25, -0.5, 0.0, -0.0, np.nan], dtype), 9)
    c = rng.random((6, 9)) < 0.5
    mod = retrograd.parse(SELECTS.replace("DT", dtype))
    with np.errstate(invalid="ignore", over="ignore"):
        want = retrograd.build(mod)["main"](x, y, a, c)
    got = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](x, y, a, c)
    for name, w, o in zip(("maximum", "minimum", "leakyrelu", "prelu", "clip", "selu", "softplus", "sign", "where",
                           "where -0"), want, got):
        assert w.dtype == o.dtype and w.shape == o.shape, name
        if name in ("selu", "softplus"):  # exp and log: within 2 ulps (the selects around them are exact)
            np.testing.assert_allclose(o, w, rtol=2 * np.finfo(dtype).eps, atol=0, equal_nan=True, err_msg=name)
        else:
            assert np.array_equal(o, w, equal_nan=True) and np.array_equal(np.signbit(o), np.signbit(w)), (name, o, w)


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_storage_dtypes_cross_the_torch_backend_as_ml_dtypes_arrays(dtype):
    """NumPy bfloat16 / float8 arrays (ml_dtypes) in, constants of those dtypes, results back as such arrays,
    and torch's own tensors of them: on the torch executor and in its lowered source, equal to the NumPy
    executor and to a naive reference (computed in float32, rounded to storage by ml_dtypes)."""
    torch = need("torch")
    ml_dtypes = need("ml_dtypes")
    from retrograd.runtime.torch_source import lower_to_torch

    st = getattr(ml_dtypes, dtype)
    src = f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "{dtype}")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "{dtype}")):
        y = R.add(x, R.const([1.5, -2.0, 3.0, 0.25], "{dtype}"))
        z = R.astype(y, "float32")
        w = R.multiply(z, R.const(1000.0, "float32"))
        return (w, y)
'''
    mod = retrograd.parse(src)
    x = np.array([0.5, -104.0, 2.0, 1.0], dtype=st)
    y = (x.astype(np.float32) + np.array([1.5, -2.0, 3.0, 0.25], np.float32)).astype(st)
    want = (y.astype(np.float32) * 1000, y)
    ns: dict = {}
    exec(compile(lower_to_torch(mod, "m"), "m_torch", "exec"), ns)  # noqa: S102 - our own generated source
    tx = torch.from_numpy(x.view(np.int16 if dtype == "bfloat16" else np.uint8)).view(getattr(torch, dtype))
    runs = {"numpy": retrograd.build(mod)["main"](x),
            "torch": retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](x),
            "torch on torch tensors": retrograd.build(mod, backend="torch")["main"](tx),
            "lowered torch": ns["main"](tx)}
    for how, got in runs.items():
        got = tuple(g.float().numpy() if isinstance(g, torch.Tensor) else g for g in got)
        assert got[0].dtype == np.float32, how
        np.testing.assert_array_equal(got[0], want[0], err_msg=how)
        np.testing.assert_array_equal(got[1].astype(np.float32), want[1].astype(np.float32), err_msg=how)
    assert runs["torch"][1].dtype == st and runs["numpy"][1].dtype == st


@pytest.mark.parametrize("rate", [0.5, 0.3])
def test_bfloat16_dropout_on_torch_is_the_numpy_executors_bit_for_bit(rate):
    """The mask is drawn on the host (the NumPy kernel's draws), the product computed in float32 and rounded
    once, as the NumPy executor computes bfloat16: the same result and mask, bit for bit, and the result is
    the naive x * mask / (1 - rate) rounded to bfloat16."""
    need("torch")
    ml_dtypes = need("ml_dtypes")
    mod = retrograd.parse(f'''
@R.function
def main(x: R.Tensor((64, 8), "bfloat16"), k: R.Tensor((), "int64")) -> R.Tuple(R.Tensor((64, 8), "bfloat16"), R.Tensor((64, 8), "bfloat16")):
    y = R.nn.dropout(x, key=k, rate={rate}, training=True)
    return y
''')
    x = np.random.default_rng(0).standard_normal((64, 8)).astype(ml_dtypes.bfloat16)
    ours = retrograd.build(mod)["main"](x, np.int64(3))
    theirs = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](x, np.int64(3))
    for a, b in zip(ours, theirs):
        assert b.dtype == a.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))
    mask = ours[1].astype(np.float32)
    assert set(np.unique(mask)) <= {0.0, 1.0} and 0 < mask.mean() < 1
    want = (x.astype(np.float32) * mask * np.float32(1 / (1 - rate))).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(ours[0].view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize("chunk", range(2))
def test_every_op_in_a_storage_dtype_computes_on_torch_as_on_numpy(dtype, chunk):
    """Every float op case in bfloat16 / float8: the torch backend computes in float32 and rounds once, as
    the NumPy executor does (docs/script_format.md), so the results have the same dtype, shape, NaN and
    infinity positions, and values within 2 steps of the storage dtype (relative to max(|value|, 1% of the
    largest): the float32 sums may run in another order)."""
    need("torch")
    need("ml_dtypes")
    from ops.helpers import float_cases, in_dtype

    step = 2.0 ** -7 if dtype == "bfloat16" else 2.0 ** -3 if dtype == "float8_e4m3fn" else 2.0 ** -2
    checked, problems = 0, []
    for case in float_cases()[chunk::2]:
        low = in_dtype(case, dtype)
        try:
            mod = low.build()
        except DiagnosticError:
            continue  # the op does not type this dtype
        swapped = [s.dtype == dtype for s in low.param_sinfo()]
        values = [v.astype(dtype) if sw else v for v, sw in zip(case.make_inputs(seed=3), swapped)]
        with np.errstate(all="ignore"):
            try:
                want = retrograd.build(mod)["main"](*values)
            except DiagnosticError:
                continue
            got = retrograd.build(mod, backend="torch", numpy_outputs=True)["main"](*values)
        checked += 1
        for g, w in zip(_flat(got), _flat(want)):
            g, w = np.asarray(g), np.asarray(w)
            if g.dtype != w.dtype or g.shape != w.shape:
                problems.append(f"{low.id}: {g.dtype}{g.shape}, the NumPy executor's {w.dtype}{w.shape}")
                continue
            if w.dtype.kind in "biu":
                if not np.array_equal(g, w):
                    problems.append(f"{low.id}: integers differ")
                continue
            gf, wf = g.astype(np.float64), w.astype(np.float64)
            finite = np.isfinite(wf)
            if not np.array_equal(np.isfinite(gf), finite) or not np.array_equal(gf[~finite], wf[~finite], equal_nan=True):
                problems.append(f"{low.id}: NaN or infinity at other positions")
            elif finite.any():
                scale = np.maximum(np.abs(wf[finite]), 0.01 * np.abs(wf[finite]).max())
                if (np.abs(gf[finite] - wf[finite]) > 2 * step * scale).any():
                    problems.append(f"{low.id}: values differ by more than 2 steps of {dtype}")
    assert not problems, "\n".join(problems[:20])
    assert checked > 100


def _flat(value):
    return [x for v in value for x in _flat(v)] if isinstance(value, tuple | list) else [value]
