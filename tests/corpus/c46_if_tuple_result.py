# An If whose branches yield tuples and constants.
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor((2,), dtype="float32")):
        if c:
            r = (x, R.const(1.0, "float32"))
        else:
            y = R.negative(x)
            r = (y, R.const(0.0, "float32"))
        first = r[0]
        return first
