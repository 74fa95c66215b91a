"""Gradient correctness fixes of issue 9, each against float64 finite differences (and PyTorch when installed)."""

from __future__ import annotations

import numpy as np
import pytest

import retrograd
from retrograd.errors import GradientError
from retrograd.ir.well_formed import well_formed
from retrograd.passes import Gradient, densify_sparse_grad, merge_sparse_grad
from retrograd.runtime import build
from retrograd.testing import check_gradients
from optional import need  # noqa: E402

HEAD = "from tvm.script import ir as I, relax as R, tir as T\n"

COLLIDING = HEAD + """
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((3,), "float64")) -> R.Tensor((3,), "float64"):
        y = R.multiply(x, x)
        return y

    @R.function
    def f_vjp(x: R.Tensor((3,), "float64"), g: R.Tensor((3,), "float64")) -> R.Tensor((3,), "float64"):
        y = R.add(x, g)
        return y

    @R.function
    def main(x: R.Tensor((3,), "float64")) -> R.Tensor((), "float64"):
        cls = Module
        a = cls.f(x)
        b = cls.f_vjp(x, a)
        s = R.sum(b)
        return s
"""


def test_generated_vjp_never_replaces_a_user_function_of_that_name():
    mod = retrograd.parse(COLLIDING)
    x = np.array([1.0, 2.0, 3.0])
    before = build(mod)["main"](x)
    assert float(before) == pytest.approx(np.sum(x + x * x))  # naive reference: f_vjp(x, f(x)) = x + x^2
    out = Gradient("main")(mod)
    assert well_formed(out) == []
    assert retrograd.structural_equal(out["f_vjp"], mod["f_vjp"])
    assert "f_vjp_1" in out
    ex = build(out)
    assert float(ex["main"](x)) == pytest.approx(float(before))
    value, (gx,) = ex["main_adjoint"](x)
    assert float(value) == pytest.approx(float(before))
    np.testing.assert_allclose(gx, 1 + 2 * x)  # d/dx sum(x + x^2)
    assert check_gradients(mod, "main", [x]).ok


def test_an_existing_adjoint_name_is_refused_not_replaced():
    text = COLLIDING.replace("def f_vjp(", "def main_adjoint(").replace("cls.f_vjp(", "cls.main_adjoint(")
    mod = retrograd.parse(text)
    with pytest.raises(GradientError, match="already has a function named .main_adjoint., called by main"):
        Gradient("main")(mod)


TAKE = HEAD + """
@I.ir_module
class Module:
    @R.function
    def main(table: R.Tensor((10, 4), "float64"), idx: R.Tensor((5,), "int64"), w: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        e = R.take(table, idx, axis=0, mode="MODE")
        s = R.sum(R.tanh(R.multiply(e, w)))
        return s
"""
# Out-of-range (clip/wrap) indices, a duplicate and a negative one.
IDX = np.array([-3, 12, 2, 2, 9], dtype="int64")


def _take_inputs():
    rng = np.random.default_rng(4)
    return [rng.standard_normal((10, 4)), IDX, rng.standard_normal(4)]


def _naive_take_grad(table, idx, w, mode):
    """d/dtable sum(tanh(table[rows] * w)) with rows mapped by a loop (the definition of clip and wrap)."""
    n = table.shape[0]
    grad = np.zeros_like(table)
    for i in idx:
        row = min(max(int(i), 0), n - 1) if mode == "clip" else int(i) % n
        grad[row] += (1 - np.tanh(table[row] * w) ** 2) * w
    return grad


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_sparse_and_dense_take_gradients_follow_the_mode(mode):
    mod = retrograd.parse(TAKE.replace("MODE", mode))
    args = _take_inputs()
    expected = _naive_take_grad(*args, mode)
    _, (dense, _) = build(Gradient("main")(mod))["main_adjoint"](*args)
    np.testing.assert_allclose(dense, expected, rtol=1e-12, atol=1e-12)
    report = check_gradients(mod, "main", args, require_grads=[0])
    assert report.ok and report.checked == 40, str(report)
    for merge in (False, True):
        out = Gradient("main", sparse_grads=["table"], merge_duplicates=merge)(mod)
        assert well_formed(out) == []
        _, ((rows, vals), _) = build(out)["main_adjoint"](*args)
        assert ((rows >= 0) & (rows < 10)).all()
        np.testing.assert_allclose(densify_sparse_grad(rows, vals, 10), expected, rtol=1e-12, atol=1e-12)
        unique, merged = merge_sparse_grad(rows, vals, 10)
        np.testing.assert_allclose(densify_sparse_grad(unique, merged, 10), expected, rtol=1e-12, atol=1e-12)


def test_sparse_take_with_mode_nan_is_refused_clearly():
    mod = retrograd.parse(TAKE.replace("MODE", "nan"))
    with pytest.raises(GradientError, match="mode fast, or clip/wrap"):
        Gradient("main", sparse_grads=["table"])(mod)


@pytest.mark.parametrize("mode", ["fast", "clip", "wrap"])
def test_take_backward_prints_what_tvm_reads(mode):
    mod = Gradient("main")(retrograd.parse(TAKE.replace("MODE", mode)))
    text = mod.script()
    assert "take_backward(" in text and "mode=" not in text.split("take_backward(")[1].split("\n")[0]
    assert "not loadable in TVM" not in text
    assert retrograd.structural_equal(retrograd.parse(text), mod)
    need("tvm")
    from_source = need("tvm.script").from_source

    from_source(text)  # TVM's own parser reads it


def test_take_backward_mode_nan_says_tvm_cannot_read_it():
    mod = Gradient("main")(retrograd.parse(TAKE.replace("MODE", "nan")))
    text = mod.script()
    assert 'not loadable in TVM: R.grad.take_backward(mode="nan")' in text
    assert retrograd.structural_equal(retrograd.parse(text), mod)


GEM = HEAD + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((6,), "float64"), p: R.Tensor((), "float64")) -> R.Tensor((), "float64"):
        r = R.nn.relu(x)
        q = R.power(r, p)
        s = R.sum(q)
        return s
"""


def _gem_inputs():
    return [np.array([-1.0, 0.0, 0.5, 2.0, 0.0, 1.5]), np.array(2.5)]


def test_power_at_base_zero_has_a_finite_exponent_gradient():
    mod = retrograd.parse(GEM)
    x, p = _gem_inputs()
    _, (gx, gp) = build(Gradient("main")(mod))["main_adjoint"](x, p)
    r = np.maximum(x, 0)
    pos = r > 0
    # naive reference: d/dp sum r^p = sum over r > 0 of r^p log r; zeros contribute nothing (0^p is flat in p)
    assert float(gp) == pytest.approx(float(np.sum(r[pos] ** p * np.log(r[pos]))), rel=1e-12)
    np.testing.assert_allclose(gx, np.where(pos, p * r ** (p - 1), 0.0), rtol=1e-12)
    report = check_gradients(mod, "main", [x, p])
    assert report.ok and report.checked == 7, str(report)


def test_power_base_zero_matches_pytorch():
    torch = need("torch")
    mod = retrograd.parse(GEM)
    x, p = _gem_inputs()
    _, (gx, gp) = build(Gradient("main")(mod))["main_adjoint"](x, p)
    tx = torch.tensor(x, requires_grad=True)
    tp = torch.tensor(p, requires_grad=True)
    torch.relu(tx).pow(tp).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gp, tp.grad.numpy(), rtol=1e-12)


def test_power_zero_exponent_at_zero_base_matches_pytorch():
    torch = need("torch")
    text = GEM.replace("r = R.nn.relu(x)", "r = R.multiply(x, x)")
    mod = retrograd.parse(text)
    x, p = np.array([0.0, 1.0, -2.0, 0.0, 3.0, 0.5]), np.array(0.0)
    _, (gx, gp) = build(Gradient("main")(mod))["main_adjoint"](x, p)
    tx = torch.tensor(x, requires_grad=True)
    tp = torch.tensor(p, requires_grad=True)
    (tx * tx).pow(tp).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gp, tp.grad.numpy(), rtol=1e-12)


UNKNOWN_SHAPE = HEAD + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(dtype="float64", ndim=2), y: R.Tensor(dtype="float64")) -> R.Tensor((), "float64"):
        a = R.sum(R.multiply(x, x))
        b = R.mean(y)
        c = R.add(a, b)
        return c
"""


def test_full_reductions_of_unknown_shapes_are_scalars_and_differentiable():
    from retrograd.ir.struct_info import TensorStructInfo

    assert TensorStructInfo(None, "float32", 0).shape == ()
    mod = retrograd.parse(UNKNOWN_SHAPE)
    assert mod["main"].body.body.struct_info.shape == ()
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((2, 3)), rng.standard_normal((4,))
    _, (gx, gy) = build(Gradient("main")(mod))["main_adjoint"](x, y)
    np.testing.assert_allclose(gx, 2 * x, rtol=1e-12)
    np.testing.assert_allclose(gy, np.full(4, 0.25), rtol=1e-12)
    assert check_gradients(mod, "main", [x, y]).ok
    assert retrograd.structural_equal(retrograd.parse(mod.script()), mod)


def test_tvm_reads_the_unknown_shape_reduction_module():
    need("tvm")
    from_source = need("tvm.script").from_source

    tvm_mod = from_source(UNKNOWN_SHAPE[len(HEAD):])
    assert "main" in [gv.name_hint for gv in tvm_mod.get_global_vars()]


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "variance", "prod"])
def test_full_reduction_gradients_of_unknown_rank_tensors(op):
    text = HEAD + f"""
@I.ir_module
class Module:
    @R.function
    def main(y: R.Tensor(dtype="float64")) -> R.Tensor((), "float64"):
        b = R.{op}(y)
        return b
"""
    mod = retrograd.parse(text)
    y = np.random.default_rng(2).standard_normal((3, 4))
    report = check_gradients(mod, "main", [y])
    assert report.ok and report.checked == 12, str(report)


SYMBOLIC = {
    # the next-token language-model loss: lp[:-1] against tokens[1:], sequence length n symbolic
    "next_token": ("""
    @R.function
    def main(lp: R.Tensor(("n", 5), "float64"), y: R.Tensor(("n", 5), "float64")) -> R.Tensor((), "float64"):
        a = R.strided_slice(lp, axes=[0], begin=[0], end=[-1])
        b = R.strided_slice(y, axes=[0], begin=[1], end=[100])
        s = R.nn.cross_entropy_with_logits(a, b)
        return s
""", [(7, 5), (7, 5)]),
    "slice_two_axes_strided": ("""
    @R.function
    def main(x: R.Tensor(("n", "m"), "float64")) -> R.Tensor((), "float64"):
        a = R.strided_slice(x, axes=[0, 1], begin=[5, 1], end=[0, -1], strides=[-2, 2])
        s = R.sum(R.tanh(a))
        return s
""", [(8, 7)]),
    "concat": ("""
    @R.function
    def main(x: R.Tensor(("n", 3), "float64"), y: R.Tensor(("m", 3), "float64"), z: R.Tensor((2, 3), "float64")) -> R.Tensor((), "float64"):
        a = R.concat((x, y, z), axis=0)
        w = R.sin(a)
        s = R.sum(R.multiply(w, a))
        return s
""", [(4, 3), (2, 3), (2, 3)]),
}


@pytest.mark.parametrize("name", sorted(SYMBOLIC))
def test_gradients_on_symbolic_dims_are_computed_at_run_time(name):
    body, shapes = SYMBOLIC[name]
    mod = retrograd.parse(HEAD + "@I.ir_module\nclass Module:\n" + body)
    assert well_formed(Gradient("main")(mod)) == []
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s) for s in shapes]
    report = check_gradients(mod, "main", args)
    assert report.ok and report.checked == sum(int(np.prod(s)) for s in shapes), str(report)


def test_next_token_loss_on_symbolic_length_matches_pytorch():
    torch = need("torch")
    body, shapes = SYMBOLIC["next_token"]
    mod = retrograd.parse(HEAD + "@I.ir_module\nclass Module:\n" + body)
    rng = np.random.default_rng(6)
    lp, y = (rng.standard_normal(s) for s in shapes)
    _, (glp, gy) = build(Gradient("main")(mod))["main_adjoint"](lp, y)
    tlp, ty = torch.tensor(lp, requires_grad=True), torch.tensor(y, requires_grad=True)
    (-(tlp[:-1] * ty[1:]).sum() / (lp.shape[0] - 1)).backward()  # TVM's cross_entropy_with_logits
    np.testing.assert_allclose(glp, tlp.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gy, ty.grad.numpy(), rtol=1e-12)


NLL = HEAD + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(PSHAPE, "float64"), t: R.Tensor(TSHAPE, "int64"), w: R.Tensor((4,), "float64")) -> R.Tensor((), "float64"):
        lp = R.nn.log_softmax(x, axis=AXIS)
        s = R.nn.nll_loss(lp, t, w, reduction="RED", ignore_index=IGNORE)
        return s
"""


def _nll_case(pshape, red, ignore):
    tshape = (pshape[0],) + pshape[2:] if len(pshape) > 1 else ()
    axis = 1 if len(pshape) > 1 else 0
    text = (NLL.replace("PSHAPE", repr(pshape)).replace("TSHAPE", repr(tshape)).replace("AXIS", str(axis))
            .replace("RED", red).replace("IGNORE", str(ignore)))
    rng = np.random.default_rng(7)
    x = rng.standard_normal(pshape)
    t = rng.integers(0, 4, size=tshape).astype("int64")
    if t.ndim:
        t.reshape(-1)[1] = ignore if ignore == -100 else t.reshape(-1)[1]
    w = rng.uniform(0.5, 2.0, 4)
    return retrograd.parse(text), [x, t, w]


NLL_CASES = [((5, 4), "mean", -100), ((5, 4), "sum", -100), ((3, 4, 2), "mean", 2), ((3, 4, 2), "sum", 0), ((4,), "mean", -100)]


@pytest.mark.parametrize("pshape,red,ignore", NLL_CASES)
def test_nll_loss_class_weights_get_their_true_gradient(pshape, red, ignore):
    mod, args = _nll_case(pshape, red, ignore)
    report = check_gradients(mod, "main", args)
    assert report.ok and report.checked == int(np.prod(pshape)) + 4, str(report)
    _, (_, gw) = build(Gradient("main")(mod))["main_adjoint"](*args)
    # One sample under mean: w[t] cancels (loss = -p[t]), so only there is the weights' gradient zero.
    assert (np.abs(gw).max() > 0) != (len(pshape) == 1 and red == "mean")


@pytest.mark.parametrize("pshape,red,ignore", NLL_CASES)
def test_nll_loss_class_weight_gradient_matches_pytorch(pshape, red, ignore):
    torch = need("torch")
    mod, (x, t, w) = _nll_case(pshape, red, ignore)
    _, (gx, gw) = build(Gradient("main")(mod))["main_adjoint"](x, t, w)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    axis = 1 if len(pshape) > 1 else 0
    lp = torch.log_softmax(tx, dim=axis)
    # PyTorch's nll_loss refuses a weight gradient: the same loss spelled with gather, which autograd follows.
    tt = torch.tensor(t)
    valid = tt != ignore
    safe = torch.where(valid, tt, torch.zeros_like(tt))
    picked = lp.gather(axis, safe.unsqueeze(axis)).squeeze(axis)
    wt = tw[safe] * valid
    total = -(wt * picked).sum()
    (total / wt.sum() if red == "mean" else total).backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-10, atol=1e-12)


CONV = HEAD + """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 2, "h", "w"), "float64"), k: R.Tensor((3, 2, 3, 2), "float64")) -> R.Tensor((), "float64"):
        a = R.nn.conv2d(x, k, strides=[2, 3], padding=[1, 0, 1, 1], dilation=[1, 2])
        s = R.sum(R.tanh(a))
        return s
"""


@pytest.mark.parametrize("hw", [(7, 9), (8, 10), (5, 6)])
def test_conv2d_gradient_on_symbolic_spatial_dims(hw):
    mod = retrograd.parse(CONV)
    assert well_formed(Gradient("main")(mod)) == []
    rng = np.random.default_rng(8)
    x, k = rng.standard_normal((2, 2) + hw), rng.standard_normal((3, 2, 3, 2))
    report = check_gradients(mod, "main", [x, k])
    assert report.ok and report.checked == x.size + k.size, str(report)
    torch = need("torch")
    _, (gx, gk) = build(Gradient("main")(mod))["main_adjoint"](x, k)
    tx, tk = torch.tensor(x, requires_grad=True), torch.tensor(k, requires_grad=True)
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(tx, (0, 1, 1, 1)), tk, stride=(2, 3), dilation=(1, 2))
    torch.tanh(y).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gk, tk.grad.numpy(), rtol=1e-10, atol=1e-12)
