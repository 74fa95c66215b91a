# Bindings outside any dataflow block, with and without annotations.
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3,), dtype="float32")) -> R.Tensor((3,), dtype="float32"):
        a: R.Tensor((3,), dtype="float32") = R.negative(x)
        b = R.abs(a)
        c: R.Tensor((3,), dtype="float32") = R.sqrt(b)
        return c
