# If/else whose branches end by binding the same name.
@I.ir_module
class Module:
    @R.function
    def main(c: R.Tensor((), dtype="bool"), x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        if c:
            t = R.exp(x)
            y = R.add(t, x)
        else:
            y = R.negative(x)
        z = R.multiply(y, y)
        return z
