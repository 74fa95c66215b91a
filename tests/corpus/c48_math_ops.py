# Extra elementwise math, logical/bitwise, creation, manipulation, indexing, reductions and sorting
# (TVM 0.27's own spellings: prim values as bare numbers and T.<dtype>(...), tuples of tensors).
@I.ir_module
class Module:
    @R.function
    def math(x: R.Tensor((3, 4), dtype="float32"), y: R.Tensor((3, 4), dtype="float32"), n: R.Tensor((3, 4), dtype="int32")):
        a = R.clip(x, 0, 6)
        b = R.clip(a, T.float32(-0.5), T.float32(0.5))
        c = R.atan2(R.asinh(b), R.cosh(y))
        d = R.log_add_exp(R.rsqrt(R.square(c)), R.tan(R.atan(y)))
        e = R.ewise_fma(d, R.floor(x), R.round(y))
        f = R.floor_mod(R.floor_divide(R.bitwise_not(n), R.bitwise_or(n, R.const(1, "int32"))), R.bitwise_or(R.left_shift(n, R.const(1, "int32")), R.const(1, "int32")))
        g = R.logical_and(R.isfinite(e), R.logical_not(R.isnan(e)))
        h = R.mod(R.sign(R.trunc(e)), R.ceil(x))
        return (h, f, g, R.bitwise_xor(f, R.right_shift(n, R.const(2, "int32"))))

    @R.function
    def shapes(x: R.Tensor((3, 4), dtype="float32"), i: R.Tensor((3, 2), dtype="int64"), v: R.Tensor((4,), dtype="float32")):
        s = R.stack((x, x), axis=1)
        t = R.tile(x, repeats=[2, 1])
        r = R.repeat(t, repeats=2, axis=None)
        fl = R.flip(s, axis=-1)
        ge = R.gather_elements(x, i, axis=1)
        se = R.scatter_elements(x, i, ge, axis=1, reduction="add")
        oh = R.one_hot(i, T.float32(1.0), T.float32(0.0), depth=4, axis=-1)
        es = R.einsum((x, v), subscripts="ij,j->i")
        o = R.outer(es, v)
        ar = R.arange(0, 4, 1, dtype="int64")
        ey = R.eye(3, 4, 1, dtype="float32")
        hw = R.hamming_window(4, True, T.float64(0.54), T.float64(0.46), dtype="float32")
        mg = R.meshgrid((v, hw), indexing="ij")
        md = R.median(x, axis=[1], keepdims=False)
        tk = R.topk(x, k=2, axis=1, ret_type="both", largest=True, dtype="int64")
        srt = R.sort(x, axis=0, descending=True)
        am = R.argmax(x, axis=1, keepdims=False)
        bk = R.bucketize(x, v, out_int32=False, right=False)
        cp = R.cumprod(x, axis=1, dtype=None, exclusive=True)
        sd = R.std(x, axis=[0], keepdims=True)
        pr = R.prod(x, axis=None, keepdims=False)
        ss = R.slice_scatter(x, ey, 0, 3, 1, axis=0)
        it = R.index_tensor(x, (am, am))
        ip = R.index_put(x, (am, am), it, accumulate=True)
        return (fl, se, oh, o, ar, mg, md, tk, srt, bk, cp, sd, pr, ss, ip, r)
