"""Inference of the nn.* and grad.* ops against TVM 0.27, their errors, attribute canonical forms, kernel shapes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ops.cases_nn import CASES
from retrograd.errors import OpError, TypeInferenceError
from retrograd.ir.builder import BlockBuilder
from retrograd.ir.expr import Var
from retrograd.ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from retrograd.ops.registry import get
from optional import need  # noqa: E402

def sinfo_of(inp) -> TensorStructInfo:
    if isinstance(inp, TensorStructInfo | ShapeStructInfo):
        return inp
    arr = np.asarray(inp)
    return TensorStructInfo(arr.shape, str(arr.dtype))


def infer(op: str, inputs, attrs=None):
    """The normalized call of `op` on fresh vars of the given struct infos."""
    bb = BlockBuilder()
    args = [Var(f"a{i}", sinfo_of(x)) for i, x in enumerate(inputs)]
    return bb.normalize(get(op)(*args, **(attrs or {})))


# -- TVM as the reference ----------------------------------------------------------------


def _tvm_dim(d):
    if type(d).__name__ == "IntImm":
        return int(d)
    return re.sub(r"T\.int64\((-?\d+)\)", r"\1", str(d))


def tvm_infer(op: str, inputs, attrs):
    """(struct info as ours, attrs as a dict in TVM's field order) of TVM's own call."""
    tvm = need("tvm")
    relax = need("tvm.relax")
    tirx = need("tvm.tirx")

    fn = relax.op
    for part in op[len("relax.") :].split("."):
        fn = getattr(fn, part)
    sym = {}

    def dim(d):
        return sym.setdefault(d, tirx.Var(d, "int64")) if isinstance(d, str) else d

    args = [
        relax.ShapeExpr([dim(d) for d in x.values]) if isinstance(x, ShapeStructInfo)
        else relax.Var(f"a{i}", relax.TensorType([dim(d) for d in sinfo_of(x).shape], sinfo_of(x).dtype))
        for i, x in enumerate(inputs)
    ]
    call = fn(*args, **attrs)
    bb = relax.BlockBuilder()
    with bb.function("f", []):
        v = bb.emit(call)
        bb.emit_func_output(v)
    fields = [f.name for f in type(call.attrs).__tvm_ffi_type_info__.fields] if call.attrs is not None else []
    tvm_attrs = {}
    for k in fields:
        val = getattr(call.attrs, k)
        if isinstance(val, tvm.ir.Array) or hasattr(val, "__len__") and not isinstance(val, str):
            val = tuple(int(x) for x in val)
        elif type(val).__name__ == "FloatImm":
            val = float(val.value)
        elif val is not None and not isinstance(val, (bool, int, float, str)):
            val = str(val)
        tvm_attrs[k] = val
    # TVM's grad.* wrappers store padding as given; (1, 1) means (1, 1, 1, 1) there too.
    pad = tvm_attrs.get("padding")
    if pad is not None and len(pad) in (1, 2) and op.startswith("relax.grad."):
        tvm_attrs["padding"] = pad * 4 if len(pad) == 1 else pad * 2
    return _tvm_sinfo(v.ty), tvm_attrs


def _tvm_sinfo(ty):
    """TVM's inferred type as our struct info (tensors and tuples of them)."""
    if hasattr(ty, "fields"):
        return TupleStructInfo(tuple(_tvm_sinfo(f) for f in ty.fields))
    shape = tuple(_tvm_dim(d) for d in ty.shape.values) if ty.shape is not None else None
    return TensorStructInfo(shape, ty.dtype) if shape is not None else TensorStructInfo(None, ty.dtype, ty.ndim)


TVM_CASES = [c for c in CASES if c.tvm]


@pytest.mark.parametrize("case", TVM_CASES, ids=[c.id for c in TVM_CASES])
def test_inference_matches_tvm(case):
    ours = infer(case.op, case.inputs, case.attrs)
    theirs, tvm_attrs = tvm_infer(case.op, case.inputs, case.attrs)
    assert ours.struct_info == theirs
    # Same attribute names, in TVM's order, with the canonical values TVM prints; retrograd's own
    # extensions (dropout's training/seed) are left out of the printed call at their defaults.
    omit = get(case.op).print_omit
    attrs = {k: v for k, v in ours.attrs.items() if k in tvm_attrs or k not in omit or omit[k] != v}
    assert list(attrs) == list(tvm_attrs)
    assert attrs == tvm_attrs


def test_symbolic_ceil_mode_keeps_ndim():
    # TVM spells this dim with T.if_then_else; we keep the rank and dtype only.
    call = infer("relax.nn.max_pool2d", [TensorStructInfo(("n", 3, "h", 8), "float32")], dict(pool_size=2, strides=2, ceil_mode=True))
    assert call.struct_info == TensorStructInfo(None, "float32", 4)


def test_unknown_shape_keeps_ndim():
    x = TensorStructInfo(None, "float32", 4)
    assert infer("relax.nn.conv2d", [x, TensorStructInfo((6, 4, 3, 3), "float32")]).struct_info == TensorStructInfo(None, "float32", 4)
    assert infer("relax.nn.avg_pool2d", [x], dict(pool_size=2)).struct_info == TensorStructInfo(None, "float32", 4)


def test_pool_positional_attributes_bind_like_tvm():
    # TVM's Python signature takes padding before dilation, but prints dilation first.
    args, attrs = get("R.nn.max_pool2d").bind(["x", [3, 3], [2, 2], [1, 1], [1, 1]], {})
    assert attrs == {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1], "dilation": [1, 1]}
    norm = get("R.nn.max_pool2d").normalize_attrs(attrs)
    assert list(norm)[:4] == ["pool_size", "strides", "dilation", "padding"]
    assert norm["padding"] == (1, 1, 1, 1) and norm["out_layout"] == "NCHW"


def test_out_layout_defaults_to_layout():
    assert get("R.nn.max_pool2d").normalize_attrs({"layout": "NHWC"})["out_layout"] == "NHWC"
    assert get("R.nn.conv2d").normalize_attrs({"data_layout": "NHWC", "kernel_layout": "HWIO"})["out_layout"] == "NHWC"
    assert get("R.nn.conv2d").normalize_attrs({"out_layout": "NHWC"})["out_layout"] == "NHWC"


# -- errors --------------------------------------------------------------------------------

f32 = "float32"
ERRORS = [
    ("relax.nn.conv2d", [(2, 4, 9, 9), (6, 3, 3, 3)], {}, "data has 4 channels but the weight expects 3"),
    ("relax.nn.conv2d", [(2, 4, 9, 9), (5, 2, 3, 3)], dict(groups=2), "5 output channels are not divisible by groups=2"),
    ("relax.nn.conv2d", [(4, 9, 9), (6, 4, 3, 3)], {}, "expected a 4-D tensor in layout NCHW, got 3-D"),
    ("relax.nn.conv2d", [(2, 4, 9, 9), ((6, 4, 3, 3), "float64")], {}, "same dtype, got float32 and float64"),
    ("relax.nn.conv2d", [(2, 4, 2, 2), (6, 4, 3, 3)], {}, "window of extent 3 does not fit the padded input of extent 2"),
    ("relax.nn.conv2d", [(2, 4, 9, 9), (6, 4, 3, 3)], dict(data_layout="NHWC"), "data has 9 channels"),
    ("relax.nn.conv2d_transpose", [(2, 4, 5, 5), (4, 3, 3, 3)], dict(output_padding=1), "must be smaller than strides"),
    ("relax.nn.conv2d_transpose", [(2, 4, 5, 5), (3, 3, 3, 3)], {}, "data has 4 channels but the weight expects 3"),
    ("relax.nn.conv2d_transpose", [(2, 3, 5, 5), (3, 3, 3, 3)], dict(groups=2), "3 channels are not divisible by groups=2"),
    ("relax.nn.max_pool2d", [(1, 6, 6)], dict(pool_size=2), "expected a 4-D tensor in layout NCHW, got 3-D"),
    ("relax.nn.avg_pool2d", [(1, 1, 2, 2)], dict(pool_size=3), "does not fit"),
    ("relax.nn.nll_loss", [(2, 7), ((2,), f32)], {}, "targets must have an integer dtype, got float32"),
    ("relax.nn.nll_loss", [(2, 7), ((3,), "int64")], {}, "targets must have shape (2,)"),
    ("relax.nn.nll_loss", [(2, 7, 3), ((2, 4), "int64")], {}, "targets must have shape (2, 3)"),
    ("relax.nn.nll_loss", [(2, 7), ((2, 1), "int64")], {}, "targets must have 1 dimensions for 2-D predictions, got 2"),
    ("relax.nn.nll_loss", [(2, 7), ((2,), "int64"), (6,)], {}, "weights must have one entry per class (7), got 6"),
    ("relax.nn.nll_loss", [(2, 7), ((2,), "int64"), ((7,), "float64")], {}, "weights must have the predictions' dtype"),
    ("relax.nn.nll_loss", [((), f32), ((), "int64")], {}, "predictions must be (C,) or (N, C, d1, ...)"),
    ("relax.nn.cross_entropy_with_logits", [(2, 7), (2, 6)], {}, "must have the same shape"),
    ("relax.nn.cross_entropy_with_logits", [(2, 7), ((2, 7), "float64")], {}, "same dtype"),
    ("relax.nn.softmax", [((2, 7), "int32")], {}, "requires a float tensor, got dtype int32"),
    ("relax.nn.log_softmax", [(2, 7)], dict(axis=2), "axis 2 out of range for a 2-D tensor"),
    ("relax.nn.gelu", [((3,), "int32")], {}, "requires a float tensor"),
    ("relax.nn.silu", [((3,), "int64")], {}, "requires a float tensor"),
    ("relax.grad.take_backward", [(5, 3), (10, 3), ((5,), f32)], dict(axis=0), "indices must have an integer dtype"),
    ("relax.grad.take_backward", [(4, 3), (10, 3), ((5,), "int64")], dict(axis=0), "shaped like take(x, indices, axis)"),
    ("relax.grad.take_backward", [(5, 3), (10, 3), ((5,), "int64")], dict(axis=2), "axis 2 out of range"),
    ("relax.grad.nll_loss_backward", [(), (2, 7), ((2,), "int64")], dict(reduction="none"), "expected the gradient of nll_loss's result"),
    ("relax.grad.nll_loss_backward", [((), "float64"), (2, 7), ((2,), "int64")], {}, "of dtype float32, got float64"),
    ("relax.grad.max_pool2d_backward", [(1, 1, 4, 4), (1, 1, 6, 6)], dict(pool_size=2, strides=2), "of shape (1, 1, 3, 3)"),
    ("relax.grad.avg_pool2d_backward", [(1, 1, 3), (1, 1, 6, 6)], dict(pool_size=2, strides=2), "with 4 dimensions, got 3"),
    ("relax.grad.max_pool2d_backward_grad", [(1, 1, 6, 5), (1, 1, 6, 6)], dict(pool_size=2), "shaped like the data"),
]


def _sinfos(shapes):
    out = []
    for s in shapes:
        shape, dtype = s if len(s) == 2 and isinstance(s[1], str) else (s, f32)
        out.append(TensorStructInfo(shape, dtype))
    return out


@pytest.mark.parametrize("op,shapes,attrs,fragment", ERRORS, ids=[f"{e[0][6:]}-{i}" for i, e in enumerate(ERRORS)])
def test_inference_errors(op, shapes, attrs, fragment):
    with pytest.raises(TypeInferenceError) as info:
        infer(op, _sinfos(shapes), attrs)
    message = str(info.value)
    assert fragment in message
    # The message names the op and shows the arguments' types.
    assert get(op).script_name in message and "arguments were" in message


ATTR_ERRORS = [
    ("relax.nn.max_pool2d", dict(padding=(1, 2, 3)), "expected 1, 2 or 4 integers, got 3"),
    ("relax.nn.conv2d", dict(strides=(1, 2, 3)), "expected 1 or 2 integers, got 3"),
    ("relax.nn.max_pool2d", dict(strides=(0, 1)), "every value must be >= 1"),
    ("relax.nn.avg_pool2d", dict(padding=-1), "every value must be >= 0"),
    ("relax.nn.max_pool2d", dict(layout="NCHW4c"), "expected a permutation of 'NCHW'"),
    ("relax.nn.conv2d", dict(kernel_layout="OIHWx"), "expected a permutation of 'OIHW'"),
    ("relax.nn.conv2d", dict(groups=0), "groups must be >= 1"),
    ("relax.nn.conv2d", dict(out_dtype="float13"), "expected a dtype"),
    ("relax.nn.conv2d_transpose", dict(output_padding=-1), "every value must be >= 0"),
    ("relax.nn.nll_loss", dict(reduction="max"), "expected one of 'mean', 'sum', 'none'"),
    ("relax.nn.nll_loss", dict(ignore_index=1.5), "expected an integer"),
    ("relax.nn.softmax", dict(axis="1"), "expected an integer"),
    ("relax.grad.take_backward", dict(axis=[0]), "expected an integer"),
    ("relax.nn.relu", dict(axis=0), "has no attribute 'axis'"),
]


@pytest.mark.parametrize("op,attrs,fragment", ATTR_ERRORS, ids=[f"{e[0][6:]}-{i}" for i, e in enumerate(ATTR_ERRORS)])
def test_attribute_errors(op, attrs, fragment):
    with pytest.raises(OpError) as info:
        get(op).normalize_attrs(attrs)
    assert fragment in str(info.value)


# -- kernels agree with inference -------------------------------------------------------------


STATIC_CASES = [c for c in CASES if c.is_static]


@pytest.mark.parametrize("case", STATIC_CASES, ids=[c.id for c in STATIC_CASES])
def test_kernel_matches_inferred_struct_info(case):
    call = infer(case.op, case.inputs, case.attrs)
    arrays = case.make_inputs()
    result = get(case.op).kernel(*case.kernel_args(arrays), **call.attrs)
    sinfos = call.struct_info.fields if isinstance(call.struct_info, TupleStructInfo) else (call.struct_info,)
    results = result if isinstance(call.struct_info, TupleStructInfo) else (result,)
    assert len(results) == len(sinfos)
    for r, sinfo in zip(results, sinfos):
        r = np.asarray(r)
        assert r.shape == sinfo.shape
        assert str(r.dtype) == sinfo.dtype


def test_relu_kernel_keeps_dtype_and_values():
    x = np.array([[-2, 0, 3]], dtype="int32")
    out = get("relax.nn.relu").kernel(x)
    assert out.dtype == np.int32 and out.tolist() == [[0, 0, 3]]
    y = np.array([-0.5, 0.25], dtype="float16")
    assert get("relax.nn.relu").kernel(y).dtype == np.float16


# -- max_pool2d_backward_grad: our own op, checked against a naive loop and as an adjoint ---------


def _naive_select(g, x, k, s, p, d, ceil_mode):
    """g at each window's first maximum (row-major), by explicit loops; padding never wins."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = k, s, p, d

    def count(size, kk, ss, p0, p1, dd):
        span = size + p0 + p1 - dd * (kk - 1) - 1
        m = (-(-span // ss) if ceil_mode else span // ss) + 1
        return m - 1 if ceil_mode and (m - 1) * ss >= size + p0 else m

    oh, ow = count(h, kh, sh, pt, pb, dh), count(w, kw, sw, pl, pr, dw)
    out = np.zeros((n, c, oh, ow), g.dtype)
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    best = None
                    for a in range(kh):
                        for e in range(kw):
                            r, q = i * sh + a * dh - pt, j * sw + e * dw - pl
                            if 0 <= r < h and 0 <= q < w and (best is None or x[b, ch, r, q] > best[0]):
                                best = (x[b, ch, r, q], g[b, ch, r, q])
                    out[b, ch, i, j] = best[1] if best is not None else 0
    return out


SELECT_CASES = [
    dict(pool_size=(2, 2), strides=(2, 2)),
    dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1)),
    dict(pool_size=(3, 2), strides=(2, 1), padding=(1, 0, 0, 1), ceil_mode=True, dilation=(1, 2)),
    dict(pool_size=(2, 2), strides=(1, 1), dilation=(2, 2), ceil_mode=True),
]


@pytest.mark.parametrize("attrs", SELECT_CASES)
def test_max_pool2d_backward_grad_kernel(attrs):
    rng = np.random.default_rng(1)
    # Rounded values make ties, which must go to the first maximum in row-major window order.
    x = np.round(rng.uniform(-1, 1, (2, 3, 7, 6)), 1)
    g = rng.normal(size=x.shape)
    call = infer("relax.grad.max_pool2d_backward_grad", [g, x], attrs)
    got = get("relax.grad.max_pool2d_backward_grad").kernel(g, x, **call.attrs)
    a = call.attrs
    want = _naive_select(g, x, a["pool_size"], a["strides"], a["padding"], a["dilation"], a["ceil_mode"])
    np.testing.assert_array_equal(got, want)
    # It is the adjoint of max_pool2d_backward in output_grad: <B og, G> == <og, B^T G>.
    og = rng.normal(size=got.shape)
    back = get("relax.grad.max_pool2d_backward").kernel(og, x, **call.attrs)
    np.testing.assert_allclose(np.vdot(back, g), np.vdot(og, got), rtol=1e-12)


def test_max_pool2d_backward_grad_kernel_nhwc():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1, 6, 5, 2))
    g = rng.normal(size=x.shape)
    call = infer("relax.grad.max_pool2d_backward_grad", [g, x], dict(pool_size=2, strides=2, layout="NHWC"))
    got = get("relax.grad.max_pool2d_backward_grad").kernel(g, x, **call.attrs)
    nchw = _naive_select(g.transpose(0, 3, 1, 2), x.transpose(0, 3, 1, 2), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False)
    np.testing.assert_array_equal(got, nchw.transpose(0, 2, 3, 1))


# -- text: our printed calls round-trip, load in TVM, and TVM's printing of them reads back the same -----


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_printed_call_round_trips_and_loads_in_tvm(case):
    import retrograd

    mod = case.build()
    text = mod.script()
    back = retrograd.parse(text)
    retrograd.assert_structural_equal(mod, back)
    assert back.script() == text
    if case.tvm:
        tvm_script = need("tvm.script")
        theirs = retrograd.parse(tvm_script.from_source(text).script())
        # TVM drops the global_symbol attribute when printing; everything else must read back identically.
        ours = "\n".join(line for line in text.splitlines() if "R.func_attr" not in line)
        assert theirs.script().strip() == ours.strip()


# -- diagnostics located in the source ---------------------------------------------------------------

SCRIPT = """# from tvm.script import relax as R
@R.function
def main(x: R.Tensor((2, 4, 9, 9), "float32"), w: R.Tensor((6, WEIGHT_C, 3, 3), "float32")):
    y = R.nn.conv2d(x, w, ATTRS)
    return y
"""


@pytest.mark.parametrize(
    "weight_c,attrs,kind,fragment",
    [
        (3, "strides=2", "type error", "data has 4 channels but the weight expects 3"),
        (4, "padding=[1, 2, 3]", "op error", "bad value (1, 2, 3) for attribute 'padding'"),
        (4, "data_layout=\"NCHW4c\"", "op error", "expected a permutation of 'NCHW'"),
    ],
)
def test_parse_errors_point_at_the_call(weight_c, attrs, kind, fragment):
    import retrograd

    text = SCRIPT.replace("WEIGHT_C", str(weight_c)).replace("ATTRS", attrs)
    with pytest.raises(retrograd.DiagnosticError) as info:
        retrograd.parse(text, "net.py")
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"net.py:4:9: {kind}: R.nn.conv2d") and fragment in lines[0]
    assert lines[1].strip().startswith("y = R.nn.conv2d(x, w,") and lines[2].strip().startswith("^^^^")
