"""Every op case with a zero-size dimension, as 0-d tensors, and in other dtypes: a located error, or a result of
exactly the inferred struct info (never a raw NumPy exception, a 0-d turned 1-d, or a silently promoted dtype)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from ops.all_cases import ALL_CASES
from optional import need

import retrograd
from retrograd.errors import DiagnosticError
from retrograd.ir.struct_info import TensorStructInfo, TupleStructInfo
from retrograd.ops.registry import get


def _map_tensors(case, f):
    def conv(i):
        if isinstance(i, list):
            return [conv(x) for x in i]
        if isinstance(i, TensorStructInfo) and i.shape is not None:
            return f(i)
        return i

    return [conv(i) for i in case.inputs]


def _zero_dim(k):
    def f(t):
        s = list(t.shape)
        if len(s) > k:
            s[len(s) - 1 - k] = 0  # counted from the right, so broadcast partners lose the same dim
        return TensorStructInfo(tuple(s), t.dtype)

    return f


def _variants():
    out = []
    for case in ALL_CASES:
        if not case.is_static:
            continue
        ndim = max((len(s.shape) for s in case.param_sinfo()), default=0)
        for k in range(ndim):
            out.append(replace(case, inputs=_map_tensors(case, _zero_dim(k)), name=f"{case.name}-zero{k}"))
        out.append(replace(case, inputs=_map_tensors(case, lambda t: TensorStructInfo((), t.dtype)), name=f"{case.name}-0d"))
        for dtype in ("float64", "float16", "int32", "bool"):
            swap = lambda t, dtype=dtype: TensorStructInfo(t.shape, dtype) if t.dtype == "float32" else t  # noqa: E731
            out.append(replace(case, inputs=_map_tensors(case, swap), name=f"{case.name}-{dtype}"))
    return out


VARIANTS = _variants()
RAW = re.compile(r"failed: (its result|[A-Z]\w*(Error|Exception)\b)")


def _fields(value, sinfo):
    if isinstance(sinfo, TupleStructInfo):
        return [p for v, s in zip(value, sinfo.fields) for p in _fields(v, s)]
    return [(value, sinfo)]


def _built(cases, seed):
    """(case, module, inputs) of the cases inference accepts (the others have a located error)."""
    for case in cases:
        try:
            yield case, case.build(), case.make_inputs(seed=seed)
        except DiagnosticError:
            continue


def test_variants_cover_every_op_with_a_static_case():
    assert {c.op for c in VARIANTS} == {c.op for c in ALL_CASES if c.is_static}


@pytest.mark.parametrize("chunk", range(8))
def test_a_variant_gives_a_located_error_or_the_inferred_struct_info(chunk):
    problems = []
    for case, mod, values in _built(VARIANTS[chunk::8], seed=2):
        try:
            with np.errstate(all="ignore"):
                got = retrograd.build(mod)["main"](*values)
        except DiagnosticError as err:
            # The executor locates every kernel failure; a Python exception inside (or a result that is not
            # the inferred one) means the kernel met input it does not handle.
            if RAW.search(str(err)):
                problems.append(f"{case.id}: {str(err).splitlines()[0]}")
            continue
        except Exception as err:  # noqa: BLE001  (exactly what must not happen)
            problems.append(f"{case.id}: raw {type(err).__name__}: {err}")
            continue
        for value, sinfo in _fields(got, mod["main"].ret_struct_info):
            if not isinstance(sinfo, TensorStructInfo):
                continue
            shape = value.shape if sinfo.shape is None and getattr(value, "ndim", -2) == sinfo.ndim else sinfo.shape
            if not isinstance(value, np.ndarray) or str(value.dtype) != sinfo.dtype or value.shape != tuple(shape or ()):
                problems.append(f"{case.id}: ran {type(value).__name__} {getattr(value, 'dtype', '')}{getattr(value, 'shape', '')}, inferred {sinfo}")
    assert not problems, "\n".join(problems[:20])


def _torch_disagreements(cases, seed):
    """Where the torch backend and the NumPy executor (the reference) differ on a case: one refuses what
    the other runs, torch fails with a raw exception, or the results differ (shape, dtype, value)."""
    from ops.helpers import ACCUMULATING_ULPS, assert_matches

    problems = []
    for case, mod, values in _built(cases, seed):
        runs = []
        for backend in ("numpy", "torch"):
            ex = retrograd.build(mod, **({"backend": "torch"} if backend == "torch" else {}))
            try:
                with np.errstate(all="ignore"):
                    got = ex["main"](*[v.copy() for v in values])
                runs.append(ex.numpy(got) if backend == "torch" else got)
            except DiagnosticError as err:
                runs.append(err)
        want, got = runs
        if isinstance(want, DiagnosticError) or isinstance(got, DiagnosticError):
            if not isinstance(want, DiagnosticError) or not isinstance(got, DiagnosticError) or RAW.search(str(got)):
                problems.append(f"{case.id}: NumPy {str(want).splitlines()[0]!r}, torch {str(got).splitlines()[0]!r}")
            continue
        try:
            floats = [np.finfo(v.dtype).eps for v in values if v.dtype.kind == "f"]
            assert_matches(got, want, ACCUMULATING_ULPS, case.id, max(floats, default=None))
        except AssertionError as err:
            problems.append(str(err).splitlines()[0])
    return problems


@pytest.mark.parametrize("chunk", range(8))
def test_variants_on_torch_give_the_numpy_result(chunk):
    # ATen's convolutions, pools and scatters refuse empty dimensions (or, for no input channels, drop the
    # output channels); it has no bool abs / cumsum / argmax / bmm, no integer var / std, no CPU Half
    # avg_pool3d, and sums integers into int64. NumPy's kernels define all of these.
    need("torch")
    cases = [c for c in VARIANTS if re.search(r"-(zero\d|0d|bool|int32|float16)$", c.name)]
    problems = _torch_disagreements(cases[chunk::8], seed=2)
    assert not problems, "\n".join(problems[:20])


def test_shape_of_an_empty_tensor_on_torch_stays_a_shape():
    # The NumPy kernel's result of an empty call goes back to torch: a shape's ints must stay ints.
    need("torch")
    mod = retrograd.parse("""
@R.function
def main(x: R.Tensor((2, "n"), "float32")):
    s = R.shape_of(x)
    z = R.sum(R.reshape(x, s), axis=[1])
    return (s, z)
""")
    ex = retrograd.build(mod, backend="torch")
    shape, total = ex["main"](np.zeros((2, 0), "float32"))
    assert shape == (2, 0) and all(type(d) is int for d in shape)
    np.testing.assert_array_equal(ex.numpy(total), np.zeros(2, "float32"))


@pytest.mark.parametrize("op", ["nn.gelu_tanh", "nn.softplus", "nn.selu", "nn.leakyrelu"])
def test_pointwise_activations_keep_a_0d_input_0d(op):
    x = np.array(-0.75, "float64")
    got = get(f"relax.{op}").kernel(x)
    assert isinstance(got, np.ndarray) and got.shape == ()
    np.testing.assert_allclose(got, get(f"relax.{op}").kernel(np.array([-0.75]))[0])


def test_dropout_of_a_0d_tensor():
    out, mask = get("relax.nn.dropout").kernel(np.array(2.0, "float32"), rate=0.25, training=True, seed=3)
    assert out.shape == mask.shape == () and isinstance(mask, np.ndarray)
    assert float(out) == pytest.approx(2.0 / 0.75 * float(mask))


def test_constant_pad_with_negative_widths_reads_position_j_minus_before():
    pad = get("relax.nn.pad").kernel
    x = np.arange(15.0).reshape(3, 5)
    for widths in ([2, -4, -2, 1], [1, -1, -2, 1], [0, 0, -5, 3], [-3, 3, 1, 1], [1, -1, 0, 0]):
        b, a = widths[0::2], widths[1::2]
        want = np.full((3 + b[0] + a[0], 5 + b[1] + a[1]), 9.0)
        for j in np.ndindex(want.shape):
            src = (j[0] - b[0], j[1] - b[1])
            if 0 <= src[0] < 3 and 0 <= src[1] < 5:
                want[j] = x[src]
        np.testing.assert_array_equal(pad(x, pad_width=widths, pad_value=9.0), want, err_msg=str(widths))
    assert pad(np.zeros((0, 5)), pad_width=[1, -1, -2, 1]).shape == (0, 4)


@pytest.mark.parametrize("mode", ["reflect", "circular", "replicate"])
def test_pad_backward_keeps_a_non_finite_gradient_where_it_is_read(mode):
    # The fold matrix's zeros times a NaN spread it over every input position (36 of 36, PyTorch 1).
    F = need("torch.nn.functional")
    torch = need("torch")

    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 9))
    g = rng.standard_normal((6, 14))
    g[2, 5], g[0, 0] = np.nan, np.inf
    xt = torch.tensor(x, requires_grad=True)
    F.pad(xt.reshape(1, 1, 4, 9), (3, 2, 1, 1), mode=mode).reshape(6, 14).backward(torch.tensor(g))
    op = get("relax.grad.pad_backward")
    attrs = dict(pad_width=[1, 1, 3, 2], pad_mode=mode)
    for got in (op.kernel(g, x, **attrs), op.torch_kernel(torch.tensor(g), torch.tensor(x), **attrs).numpy()):
        np.testing.assert_allclose(got, xt.grad.numpy(), rtol=1e-12)


def test_attention_with_zero_heads_or_an_empty_key_sequence():
    att = get("relax.nn.attention").kernel
    q = np.ones((1, 2, 0, 3))
    assert att(q, np.ones((1, 4, 0, 3)), np.ones((1, 4, 0, 2))).shape == (1, 2, 0, 2)
    out = att(np.ones((1, 2, 1, 3)), np.ones((1, 0, 1, 3)), np.ones((1, 0, 1, 2)))
    assert out.shape == (1, 2, 1, 2)
    bb = retrograd.ir.BlockBuilder()
    args = [retrograd.ir.Var(n, TensorStructInfo(s, "float32")) for n, s in (("q", (1, 2, 2, 3)), ("k", (1, 4, 0, 3)), ("v", (1, 4, 0, 3)))]
    with pytest.raises(DiagnosticError, match="must be a multiple of the key's"):
        bb.normalize(get("relax.nn.attention")(*args))


@pytest.mark.parametrize(
    "op, dtype",
    [("divide", "bool"), ("power", "bool"), ("square", "bool"), ("atan2", "int32"), ("log_add_exp", "int64"),
     ("floor_divide", "bool"), ("mod", "bool"), ("floor_mod", "bool")],
)
def test_arithmetic_numpy_would_promote_is_a_kernel_error(op, dtype):
    opdef = get(f"relax.{op}")
    x = np.ones((2,), dtype)
    with pytest.raises(retrograd.errors.KernelError, match=f"R.{op}: not defined for {dtype} tensors"):
        opdef.kernel(*[x] * len(opdef.args))


@pytest.mark.parametrize("chunk", range(4))
def test_gradient_pass_on_every_variant_gives_a_well_formed_module_or_a_located_error(chunk):
    # The rules run on shapes and dtypes the gradient tests never execute: layout_transform's rule met an
    # empty shape's unknown result shape (a TypeError), dequantize's float16 clip called a missing R.const.
    from retrograd.ir import well_formed
    from retrograd.passes.gradient import Gradient

    problems = []
    for case in (VARIANTS + ALL_CASES)[chunk::4]:
        try:
            mod = case.build()
        except DiagnosticError:
            continue
        try:
            out = Gradient("main", None, None, seeds="param")(mod)
        except DiagnosticError:
            continue
        except Exception as err:  # noqa: BLE001  (exactly what must not happen)
            problems.append(f"{case.id}: raw {type(err).__name__}: {err}")
            continue
        if well_formed(out):
            problems.append(f"{case.id}: {well_formed(out)[:2]}")
    assert not problems, "\n".join(problems[:20])


def _gradient_variants():
    out, seen = [], set()
    for case in ALL_CASES:
        if not case.is_static or not case.differentiable_params() or case.op in seen:
            continue
        seen.add(case.op)  # the first differentiable case of each op
        ndim = max((len(s.shape) for s in case.param_sinfo()), default=0)
        for k in range(ndim):
            out.append(replace(case, inputs=_map_tensors(case, _zero_dim(k)), name=f"{case.name}-zero{k}").as_dtype("float64"))
        out.append(replace(case, inputs=_map_tensors(case, lambda t: TensorStructInfo((), t.dtype)), name=f"{case.name}-0d").as_dtype("float64"))
    return out


GRADIENT_VARIANTS = _gradient_variants()


@pytest.mark.parametrize("chunk", range(4))
def test_gradients_of_zero_size_and_0d_variants_run_and_match_finite_differences(chunk):
    from retrograd.testing import check_gradients

    problems = []
    for case, mod, values in _built(GRADIENT_VARIANTS[chunk::4], seed=1):
        if not case.differentiable_params():
            continue
        try:
            with np.errstate(all="ignore"):
                report = check_gradients(mod, "main", values, require_grads=case.differentiable_params(), target_index=None, seed=2)
        except DiagnosticError as err:
            if RAW.search(str(err)):
                problems.append(f"{case.id}: {str(err).splitlines()[0]}")
            continue
        # A zero-size result leaves nothing to compare; 0/0 in std's gradient at one element is NaN as in PyTorch.
        if not report.ok and "nothing to check" not in str(report) and not case.op.endswith(".std"):
            problems.append(f"{case.id}: {report}")
    assert not problems, "\n".join(problems[:20])
