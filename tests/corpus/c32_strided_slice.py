# strided_slice prints its axes/begin/end positionally as tuples, as TVM does.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((5, 6), dtype="float32")) -> R.Tuple(R.Tensor((2, 6), dtype="float32"), R.Tensor((5, 3), dtype="float32")):
        a = R.strided_slice(x, (0,), (1,), (3,), assume_inbound=False)
        b = R.strided_slice(x, axes=[1], begin=[0], end=[6], strides=[2])
        return (a, b)
