# Reductions with axes and keepdims.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4, 5), dtype="float32")):
        a = R.sum(x)
        b = R.mean(x, axis=[0, 2])
        c = R.max(x, axis=[1], keepdims=True)
        d = R.min(x, axis=[-1])
        e = R.variance(x, axis=[1, 2], keepdims=False)
        return (a, b, c, d, e)
