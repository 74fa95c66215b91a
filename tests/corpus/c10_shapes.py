# Shape values and annotations: R.shape, R.Shape([..]), R.Shape(ndim=..), shapes as op arguments.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 6), dtype="float32"), s: R.Shape([3, 4]), u: R.Shape(ndim=2)) -> R.Tuple(R.Tensor((3, 4), dtype="float32"), R.Shape([3, 4])):
        target: R.Shape([3, 4]) = R.shape([3, 4])
        y = R.reshape(x, target)
        z = R.reshape(x, [4, 3])
        w = R.reshape(z, R.shape([3, 4]))
        v = R.add(y, w)
        return (v, s)
