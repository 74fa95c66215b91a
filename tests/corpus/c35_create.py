# Creation ops: zeros, ones, full, *_like, triu/tril.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 3), dtype="float32")):
        z = R.zeros(R.shape([2, 3]), dtype="float32")
        o = R.ones([3], "int32")
        f = R.full(R.shape([2, 2]), R.const(1.5, "float32"), dtype="float32")
        zl = R.zeros_like(x)
        ol = R.ones_like(x, dtype="float64")
        u = R.triu(x, 1)
        l = R.tril(x, k=-1)
        return (z, o, f, zl, ol, u, l)
