"""Gradients of the cases_math ops where conventions matter (boundaries, ties, zeros, duplicates,
piecewise-constant ops), through the Gradient pass, against PyTorch autograd on the same inputs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from ops.op_case import OpCase, P

import retrograd
from retrograd.passes import Gradient
from optional import need  # noqa: E402

torch = need("torch")


def differentiate_floats(case: OpCase) -> OpCase:
    """The case with every float array input (or tuple of them) marked differentiable."""

    def is_float(inp):
        if isinstance(inp, list):
            return all(is_float(i) for i in inp)
        return isinstance(inp, np.ndarray) and inp.dtype.kind == "f"

    return replace(case, differentiable_args=[i for i, inp in enumerate(case.inputs) if is_float(inp)])


def ours(case: OpCase, values, cot):
    """vjp of the case's output with cotangent `cot`, for every differentiable parameter."""
    mod = case.as_dtype("float64").build()
    adj = Gradient("main", case.differentiable_params(), 0, seeds="param")(mod)
    values = [v.astype("float64") if v.dtype == np.float32 else v for v in values]
    _, grads = retrograd.build(adj)["main_adjoint"](*values, cot)
    return [np.asarray(g) for g in grads]


def theirs(fn, values, diff, cot):
    ts = [torch.tensor(v, dtype=torch.float64, requires_grad=True) if i in diff else torch.tensor(v) for i, v in enumerate(values)]
    out = fn(*ts)
    out.backward(torch.tensor(cot))
    return [ts[i].grad.numpy() for i in diff]


def ints(v):
    return np.array(v, "int64")


CONVENTIONS = [
    # clamp: the gradient passes at x == min and x == max (both ends inclusive).
    (OpCase("relax.clip", [np.array([-1.0, -0.5, 0.0, 0.5, 0.7], "float64"), P(-0.5), P(0.5)]), lambda x: torch.clamp(x, -0.5, 0.5)),
    (OpCase("relax.floor", [np.array([-1.5, 0.2, 2.7], "float64")]), torch.floor),
    (OpCase("relax.sign", [np.array([-1.5, 0.2, 2.7], "float64")]), torch.sign),
    (OpCase("relax.mod", [np.array([7.5, -7.5, 3.2], "float64"), np.array([2.0, 2.0, -1.5], "float64")]), torch.fmod),
    (OpCase("relax.floor_mod", [np.array([7.5, -7.5, 3.2], "float64"), np.array([2.0, 2.0, -1.5], "float64")]), torch.remainder),
    (OpCase("relax.floor_divide", [np.array([7.5, -7.5], "float64"), np.array([2.0, 2.0], "float64")]), lambda a, b: torch.div(a, b, rounding_mode="floor")),
    # prod with zeros: the product of the others, exact (one zero: nonzero gradient at it).
    (OpCase("relax.prod", [np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.5, 2.0, -1.0]])], {"axis": [1]}), lambda x: torch.prod(x, 1)),
    (OpCase("relax.prod", [np.array([[2.0, 0.0], [3.0, 4.0]])]), torch.prod),
    (OpCase("relax.std", [np.array([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]])], {"axis": [1]}), lambda x: torch.std(x, 1, unbiased=False)),
    (OpCase("relax.cumprod", [np.array([[1.5, -0.5, 2.0], [0.7, 1.2, 0.9]])], {"axis": 1}), lambda x: torch.cumprod(x, 1)),
    (OpCase("relax.sort", [np.array([[3.0, 1.0, 2.0], [0.5, 0.7, -1.0]])], {"axis": 1, "descending": True}), lambda x: torch.sort(x, 1, descending=True).values),
    (OpCase("relax.topk", [np.array([[3.0, 1.0, 2.0, 5.0], [0.5, 0.7, -1.0, 0.0]])], {"k": 2, "ret_type": "values"}), lambda x: torch.topk(x, 2).values),
    (OpCase("relax.median", [np.array([[3.0, 1.0, 2.0, 5.0], [0.5, 0.7, -1.0, 0.0]])]), torch.median),
    (OpCase("relax.tile", [np.array([[1.0, 2.0], [3.0, 4.0]])], {"repeats": [2, 3]}), lambda x: x.tile((2, 3))),
    (OpCase("relax.repeat", [np.array([[1.0, 2.0], [3.0, 4.0]])], {"repeats": 3, "axis": 0}), lambda x: x.repeat_interleave(3, 0)),
    (OpCase("relax.einsum", [[np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, -1.0, 2.0])]], {"subscripts": "ij,k->ik"}),
     lambda a, b: torch.einsum("ij,k->ik", a, b)),
    (OpCase("relax.gather_nd", [np.arange(24.0).reshape(2, 3, 4), ints([[[0, 1], [2, 3]], [[1, 1], [1, 1]]])], {"batch_dims": 1}),
     lambda x, i: x[torch.arange(2)[:, None], i[..., 0], i[..., 1]]),
    (OpCase("relax.index_put", [np.zeros((3, 2)), [ints([0, 2, 0]), ints([1, 1, 1])], np.array([1.0, 2.0, 3.0])], {"accumulate": True}),
     lambda x, i, j, v: x.index_put((i, j), v, accumulate=True)),
]


@pytest.mark.parametrize("case, fn", CONVENTIONS, ids=lambda v: v.id if isinstance(v, OpCase) else "")
def test_gradient_follows_pytorch(case, fn):
    case = differentiate_floats(case)
    values = case.make_inputs(seed=4)
    out = np.asarray(case.run_kernel(values))
    cot = np.random.default_rng(5).standard_normal(out.shape)
    diff = case.differentiable_params()
    got = ours(case, values, cot)
    want = theirs(fn, values, diff, cot)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=case.id)


def test_scatter_update_gradient_is_exact_where_pytorch_hands_g_to_every_duplicate():
    # Index 1 is written twice: only the later update lands, so only it receives the gradient.
    case = differentiate_floats(OpCase("relax.scatter_elements", [np.zeros(3), ints([1, 1, 2]), np.array([5.0, 6.0, 7.0])]))
    cot = np.array([0.3, 2.0, -1.0])
    _, d_updates = ours(case, case.make_inputs(), cot)
    np.testing.assert_array_equal(d_updates, [0.0, 2.0, -1.0])


def test_clip_with_bounds_known_only_at_run_time():
    mod = retrograd.parse('''
@R.function
def main(x: R.Tensor((5,), "float64"), lo: R.Prim("float64"), hi: R.Prim("float64")):
    y = R.clip(x, lo, hi)
    return y
''')
    x = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    cot = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    out = retrograd.build(mod)["main"](x, -0.5, 0.5)
    np.testing.assert_array_equal(out, np.clip(x, -0.5, 0.5))
    adj = Gradient("main", [0], 0, seeds="param")(mod)
    _, (gx,) = retrograd.build(adj)["main_adjoint"](x, -0.5, 0.5, cot)
    t = torch.tensor(x, requires_grad=True)
    torch.clamp(t, -0.5, 0.5).backward(torch.tensor(cot))
    np.testing.assert_array_equal(gx, t.grad.numpy())


def test_index_put_gradient_goes_to_the_write_that_lands():
    case = differentiate_floats(OpCase("relax.index_put", [np.zeros(3), [ints([1, 1, 2])], np.array([5.0, 6.0, 7.0])]))
    cot = np.array([0.3, 2.0, -1.0])
    d_data, d_values = ours(case, case.make_inputs(), cot)
    np.testing.assert_array_equal(d_data, [0.3, 0.0, 0.0])
    np.testing.assert_array_equal(d_values, [0.0, 2.0, -1.0])
