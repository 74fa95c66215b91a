"""Executor: arguments checked against the signature; symbolic dims bound per call."""

import numpy as np
import pytest
from runtime.helpers import T, function, module

import retrograd
from retrograd.errors import DiagnosticError, ExecutionError
from retrograd.ir import PrimValue, Tuple
from retrograd.ir.struct_info import ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo


SYM = '''
@R.function
def main(x: R.Tensor((3, "n"), "float32"), y: R.Tensor(("n",), "float32")):
    s = R.add(x, y)
    return (s, R.shape([n, 3]))
'''


def _sym_module():
    """main(x: (3, n), y: (n,)) -> (x + y, shape [n, 3])."""
    return retrograd.parse(SYM, "sig.py")


def test_symbolic_dims_bound_per_call():
    ex = retrograd.build(_sym_module())
    for n in (4, 7):
        x = np.arange(3 * n, dtype="float32").reshape(3, n)
        y = np.arange(n, dtype="float32")
        s, shape = ex["main"](x, y)
        np.testing.assert_array_equal(s, x + y)
        assert shape == (n, 3)


def test_inconsistent_symbolic_dim():
    ex = retrograd.build(_sym_module())
    with pytest.raises(ExecutionError) as info:
        ex["main"](np.zeros((3, 4), "float32"), np.zeros(5, "float32"))
    msg = str(info.value)
    assert "main: parameter 'y' expects Tensor((n,), float32), got array of shape (5,) float32" in msg
    assert "n = 4 from x, but dimension 0 is 5" in msg


def test_wrong_shape_names_the_parameter():
    ex = retrograd.build(_sym_module())
    with pytest.raises(ExecutionError) as info:
        ex["main"](np.zeros((3, 4, 2), "float64"), np.zeros(4, "float32"))
    assert str(info.value) == (
        "execution error: main: parameter 'x' expects Tensor((3, n), float32), got array of shape (3, 4, 2) float64"
    )


@pytest.mark.parametrize(
    "x, expected_got",
    [
        (np.zeros((2, 3), "float64"), "array of shape (2, 3) float64"),  # dtype
        (np.zeros((3, 2), "float32"), "array of shape (3, 2) float32"),  # static shape
        ([[0.0] * 3] * 2, "list of 2 values"),  # not an array
        (1.0, "float 1.0"),  # a scalar for a non-0-d parameter
    ],
)
def test_static_parameter_mismatch(x, expected_got):
    mod = retrograd.parse('''
@R.function
def main(x: R.Tensor((2, 3), "float32")):
    e = R.exp(x)
    return e
''')
    with pytest.raises(ExecutionError, match=r"main: parameter 'x' expects Tensor\(\(2, 3\), float32\), got ") as info:
        retrograd.build(mod)["main"](x)
    assert str(info.value).endswith(expected_got)


def test_nested_tuple_mismatch_names_the_path():
    mod = retrograd.parse('''
@R.function
def main(p: R.Tuple(R.Tensor((2,), "float32"), R.Tuple(R.Tensor((2,), "float32"), R.Tensor((3,), "float32")))):
    return p
''')
    ex = retrograd.build(mod)
    a = np.zeros(2, "float32")
    with pytest.raises(ExecutionError, match=r"parameter 'p\[1\]\[1\]' expects Tensor\(\(3,\), float32\), got array of shape \(4,\)"):
        ex["main"]((a, (a, np.zeros(4, "float32"))))
    with pytest.raises(ExecutionError, match=r"parameter 'p\[1\]' expects Tuple\(.*\), got tuple of 3 values"):
        ex["main"]((a, (a, a, a)))
    with pytest.raises(ExecutionError, match=r"parameter 'p' expects Tuple\(.*\), got ndarray|got array"):
        ex["main"](a)


def test_wrong_number_of_arguments():
    ex = retrograd.build(_sym_module())
    with pytest.raises(ExecutionError, match=r"main: expects 2 argument\(s\) \(x, y\), got 1"):
        ex["main"](np.zeros((3, 4), "float32"))
    with pytest.raises(ExecutionError, match="got 3"):
        ex["main"](*[np.zeros(1)] * 3)


def test_unknown_function():
    with pytest.raises(ExecutionError, match=r"no function 'nope' \(functions: main\)"):
        retrograd.build(_sym_module())["nope"]


def test_expression_dims_checked_after_binding():
    # y: (n + 1,) and z: (2 * n,) follow from x: (n,)
    ex = retrograd.build(retrograd.parse('''
@R.function
def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("n + 1",), "float32"), z: R.Tensor(("2 * n",), "float32")):
    a = R.exp(x)
    b = R.exp(y)
    c = R.exp(z)
    return (a, b, c)
'''))
    ex["main"](np.zeros(3, "float32"), np.zeros(4, "float32"), np.zeros(6, "float32"))
    with pytest.raises(ExecutionError, match=r"parameter 'z' .* \(2 \* n = 6, but dimension 0 is 7\)"):
        ex["main"](np.zeros(3, "float32"), np.zeros(4, "float32"), np.zeros(7, "float32"))


def test_unbindable_dim_is_a_build_error():
    params = [("y", T(("n + 1",)))]
    with pytest.raises(DiagnosticError, match=r"main: parameter 'y': symbolic dim\(s\) n cannot be bound"):
        retrograd.build(module(main=function(params, lambda bb, y: y)))


def test_symbolic_shape_expr_in_a_call_is_resolved():
    # The kernel receives a tuple of ints for a ShapeExpr argument whose dims are symbolic.
    ex = retrograd.build(retrograd.parse('''
@R.function
def main(x: R.Tensor(("n", "m"), "float32")):
    z = R.zeros(R.shape([n, n * m]), dtype="float32")
    r = R.reshape(x, R.shape([m, n]))
    return (z, r)
'''))
    for n, m in ((3, 2), (1, 5)):
        x = np.arange(n * m, dtype="float32").reshape(n, m)
        z, r = ex["main"](x)
        assert z.shape == (n, n * m) and z.dtype == np.float32 and not z.any()
        np.testing.assert_array_equal(r, x.reshape(m, n))


def test_ndim_only_and_object_and_prim_and_shape_params():
    params = [
        ("x", TensorStructInfo(None, "float32", 2)),
        ("o", ObjectStructInfo()),
        ("p", PrimStructInfo("int64")),
        ("s", ShapeStructInfo(("k", 2))),
    ]
    mod = module(main=function(params, lambda bb, x, o, p, s: Tuple((x, p, s))))
    ex = retrograd.build(mod)
    x = np.zeros((5, 1), "float32")
    out = ex["main"](x, "anything", np.int64(3), [4, 2])
    assert out[0] is x and out[1] == 3 and out[2] == (4, 2)
    with pytest.raises(ExecutionError, match=r"parameter 'x' expects Tensor\(ndim=2, float32\), got array of shape \(5,\)"):
        ex["main"](np.zeros(5, "float32"), None, 3, (4, 2))
    with pytest.raises(ExecutionError, match=r"parameter 'p' expects Prim\(int64\), got float 2.5"):
        ex["main"](x, None, 2.5, (4, 2))
    with pytest.raises(ExecutionError, match=r"parameter 's' expects Shape\(\['k', 2\]\), got shape \(4, 3\)"):
        ex["main"](x, None, 3, (4, 3))


def test_prim_value_argument_reaches_kernel_as_python_scalar():
    seen = []
    from retrograd.ops.registry import Arg, OpDef

    probe = OpDef("relax.test_probe", (Arg("x"), Arg("p", "prim")), (), infer=lambda ctx: ctx.tensor(0),
                  kernel=lambda x, p: seen.append(type(p)) or x)
    mod = module(main=function([("x", T((1,)))], lambda bb, x: bb.emit(probe(x, PrimValue(2, "int64")), "y")))
    retrograd.build(mod)["main"](np.zeros(1, "float32"))
    assert seen == [int]


SCALARS = '''
@R.function
def main(x: R.Tensor((), "int64"), u: R.Tensor((), "uint8"), p: R.Prim("int32")):
    return (x, u, p)
'''


@pytest.mark.parametrize("args, param", [
    ((2**70, 1, 1), "x"), ((1, -1, 1), "u"), ((1, 256, 1), "u"), ((1, 1, 2**31), "p"), ((1, 1, np.int64(-(2**31) - 1)), "p"),
])
def test_integers_out_of_the_dtypes_range_are_refused_naming_the_parameter(args, param):
    # NumPy raised a raw OverflowError for the tensors; the int32 prim silently carried 2**31.
    ex = retrograd.build(retrograd.parse(SCALARS))
    with pytest.raises(ExecutionError, match=f"parameter '{param}' expects"):
        ex["main"](*args)


def test_integers_at_the_ends_of_the_range_are_accepted():
    x, u, p = retrograd.build(retrograd.parse(SCALARS))["main"](-(2**63), 255, -(2**31))
    assert int(x) == -(2**63) and u.dtype == np.uint8 and int(u) == 255 and p == -(2**31)


SUBCLASS = '''
@R.function
def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor(("n", 3), "float32")):
    with R.dataflow():
        r = R.reshape(x, R.shape([6]))
        s = R.sum(y, axis=[1])
        R.output(r, s)
    return (r, s)
'''


def test_an_ndarray_subclass_runs_as_a_plain_array():
    # np.matrix keeps two dimensions through reshape and rejects sum's keepdims inside the kernels.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # NumPy's advice against np.matrix
        m = np.asmatrix(np.arange(6, dtype="float32").reshape(2, 3))
    r, s = retrograd.build(retrograd.parse(SUBCLASS))["main"](m, m)
    assert type(r) is np.ndarray and r.shape == (6,) and r.tolist() == [0, 1, 2, 3, 4, 5]
    assert type(s) is np.ndarray and s.tolist() == [3.0, 12.0]


def test_a_masked_array_is_refused_rather_than_its_mask_dropped():
    data = np.ma.array(np.ones((2, 3), "float32"), mask=[[1, 0, 0], [0, 0, 0]])
    with pytest.raises(ExecutionError, match=r"parameter 'x' expects .*masked array"):
        retrograd.build(retrograd.parse(SUBCLASS))["main"](data, np.ones((2, 3), "float32"))


def test_arguments_by_name_bind_like_a_python_call_and_mistakes_name_the_parameter():
    ex = retrograd.build(retrograd.parse('''
@R.function
def main(x: R.Tensor((2,), "float32"), y: R.Tensor((2,), "float32")):
    return R.subtract(x, y)
'''))
    a, b = np.array([5, 7], "float32"), np.array([1, 2], "float32")
    assert ex["main"](a, y=b).tolist() == [4, 5] and ex["main"](y=b, x=a).tolist() == [4, 5]
    for args, kwargs, message in [((a,), {"z": b}, "no parameter named 'z' (parameters: x, y)"),
                                  ((a,), {"x": a}, "parameter 'x' is given both by position and by name"),
                                  ((), {"y": b}, "missing argument(s) for 'x'")]:
        with pytest.raises(ExecutionError) as info:
            ex["main"](*args, **kwargs)
        assert message in str(info.value)
