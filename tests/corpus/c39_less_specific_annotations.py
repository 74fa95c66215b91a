# Annotations less specific than inference are kept (as in TVM): ndim only, dtype only, R.Object.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), dtype="float32")) -> R.Tensor(dtype="float32", ndim=2):
        a: R.Tensor(dtype="float32", ndim=2) = R.exp(x)
        b: R.Tensor(dtype="float32") = R.exp(x)
        c: R.Object = R.exp(x)
        d: R.Tensor(ndim=2, dtype="float32") = R.add(a, a)
        return d
