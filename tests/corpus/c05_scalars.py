# Scalar tensors R.Tensor((), ...) and scalar constants of several dtypes.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((), dtype="float32"), n: R.Tensor((), dtype="int32")) -> R.Tuple(R.Tensor((), dtype="float32"), R.Tensor((), dtype="int32")):
        two = R.const(2, "float32")
        y = R.multiply(x, two)
        z = R.add(y, R.const(1.5))
        m = R.add(n, R.const(1))
        return (z, m)
