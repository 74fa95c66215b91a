# broadcast_to, collapse_sum_to, collapse_sum_like, cumsum, matmul with out_dtype.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3), dtype="float32"), m: R.Tensor((3, 3), dtype="float32")):
        b = R.broadcast_to(x, R.shape([4, 3]))
        c = R.collapse_sum_to(b, R.shape([1, 3]))
        d = R.collapse_sum_like(b, x)
        e = R.cumsum(b, axis=0)
        f = R.matmul(b, m, out_dtype="float32")
        return (c, d, e, f)
