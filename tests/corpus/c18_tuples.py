# Tuple literals with and without parentheses, nested, R.tuple, a bare tuple return.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), dtype="float32"), y: R.Tensor((2,), dtype="float32")):
        p = x, y
        q = (x, (y, x))
        r = R.tuple(x, y)
        single = (x,)
        e = R.tuple()
        a = q[1][0]
        return a, p
